"""Side-by-side runs of one question on several systems or experiments (`gpusim compare`), with ratios.

Each side is a run spec: a system (shipped or by path) with the shared options, or an experiment file. Every side
runs its own deployment (its system's searched default, a `base:` system's for a derived rack, or its file's),
unless the deployment is held (`same_deployment`: every side runs the first side's), which makes the comparison a
what-if diff: what changed between the sides (`changes`), what moved (the table) and why (`step_parts`: the same
decode step's time by bound and by op on each side's cost model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusim.api import run_setup_spec, setup_for
from gpusim.build import Setup
from gpusim.errors import InputError
from gpusim.perf.step import BatchShape, StepBreakdown, StepCostModel
from gpusim.simulation import Result
from gpusim.specs.deployment import Deployment
from gpusim.specs.experiment import RunSpec

METRICS: tuple[tuple[str, str, str], ...] = (
    ("output_tokens_per_s_per_gpu", "tokens/s/GPU (LoadGen's)", "{:,.1f}"),
    ("expected_output_tokens_per_s_per_gpu", "tokens/s/GPU (LoadGen's, expected)", "{:,.1f}"),
    ("steady_output_tokens_per_s_per_gpu", "steady tokens/s/GPU", "{:,.1f}"),
    ("ttft_p50_s", "TTFT p50 s", "{:.3f}"),
    ("ttft_p99_s", "TTFT p99 s", "{:.3f}"),
    ("tpot_p50_s", "TPOT p50 ms", "{:.1f}"),
    ("tpot_p99_s", "TPOT p99 ms", "{:.1f}"),
    ("steady_energy_j_per_token", "energy J/token (steady)", "{:.3f}"),
    ("steady_usd_per_million_tokens", "$ per M tokens (steady)", "{:.3f}"),
    ("preemptions_per_request", "preemptions per request", "{:.3f}"),
)
"""(summary key, label, format) of the figures compared; TPOT is printed in ms."""
MAX_CHANGES = 12
"""Changed fields listed per side (the rest are counted)."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label and the run it stands for."""

    label: str
    spec: RunSpec
    source: str


@dataclass
class Comparison:
    sides: list[Side]
    setups: list[Setup]
    results: list[Result]
    same_deployment: bool
    changes: list[list[str]] = field(default_factory=list)
    """Per side after the first: what differs from the first side (hardware, model, deployment fields)."""

    def value(self, i: int, key: str) -> float | None:
        v = self.results[i].summary.get(key)
        return None if v is None else float(v) * (1e3 if key.startswith("tpot") else 1.0)

    def ratio(self, i: int, key: str) -> float | None:
        """Side `i`'s figure over the first side's (None where either is missing or the first is 0)."""
        a, b = self.value(0, key), self.value(i, key)
        return None if a in (None, 0.0) or b is None else b / a

    def summary(self) -> dict:
        """The `--json` object."""
        parts = step_parts(self.setups, self.results)
        first = self.results[0].summary
        return {
            "benchmark": first["benchmark"], "scenario": first["scenario"],
            "same_deployment": self.same_deployment,
            "decode_shape": self.results[0].steps.get("decode", {}).get("shape"),
            "sides": [{"label": side.label, "source": side.source, "deployment": r.summary["deployment"]["name"],
                       "deployment_origin": ("held: the first side's" if self.same_deployment and i
                                             else r.summary.get("deployment_origin")),
                       "num_gpus": r.summary["num_gpus"],
                       **{k: r.summary.get(k) for k, _, _ in METRICS},
                       "ratios": {k: self.ratio(i, k) for k, _, _ in METRICS} if i else None,
                       "changes": self.changes[i - 1] if i else [],
                       "decode_step": _parts_json(parts[i])}
                      for i, (side, r) in enumerate(zip(self.sides, self.results, strict=True))],
        }


def compare(sides: list[Side], same_deployment: bool = False, workers: int = 1) -> Comparison:
    """Run every side (`same_deployment`: on the first side's deployment, InputError naming the side where it
    cannot run)."""
    if len(sides) < 2:
        raise InputError("command line", "sides", "give at least two systems or experiment files to compare")
    setups = [setup_for(sides[0].spec, sides[0].source, workers)]
    first = setups[0].deployment
    # every field stated, so that no side fills one in from its own default (a searched default stores only the
    # fields that differ from Deployment's defaults); the same instances, as many as each side's hardware holds
    held = type(first).model_validate(first.model_dump() | ({"instances": None} if isinstance(first, Deployment)
                                                            else {}))
    for side in sides[1:]:
        spec = side.spec.model_copy(update={"deployment": held}) if same_deployment else side.spec
        setups.append(setup_for(spec, side.source, workers))
    results = [run_setup_spec(s, side.spec, side.source) for s, side in zip(setups, sides, strict=True)]
    return Comparison(sides, setups, results, same_deployment, [changes(setups[0], s) for s in setups[1:]])


def changes(a: Setup, b: Setup) -> list[str]:
    """What differs between two setups, field by field: hardware (values, not their sources), systems, model,
    benchmark and deployment; at most `MAX_CHANGES` lines and a count of the rest."""
    out: list[str] = []
    for what, x, y in (("hardware", a.hardware, b.hardware), ("deployment", a.deployment, b.deployment)):
        left, right = _leaves(x.model_dump(mode="json")), _leaves(y.model_dump(mode="json"))
        for key in sorted(left.keys() | right.keys()):
            if left.get(key) != right.get(key) and not key.endswith((".source", ".grade", ".note")):
                out.append(f"{what}.{key.removesuffix('.value')}: {_text(left.get(key))} → {_text(right.get(key))}")
    for what, x, y in (("model", a.model.id, b.model.id), ("benchmark", a.bench.id, b.bench.id)):
        if x != y:
            out.append(f"{what}: {x} → {y}")
    return out if len(out) <= MAX_CHANGES else [*out[:MAX_CHANGES], f"… and {len(out) - MAX_CHANGES} more"]


def step_parts(setups: list[Setup], results: list[Result]) -> list[StepBreakdown | None]:
    """The first side's typical decode step (its run's busy-time mean batch and context, `typical_steps`) timed by
    each side's decoding pool: the same work on every side, so a difference is the hardware's or deployment's.
    None for a side without a roofline cost model or a first run without a decode step."""
    step = results[0].steps.get("decode")
    if step is None:
        return [None] * len(setups)
    shape = BatchShape(**step["shape"])
    return [s.pools[-1].cost.breakdown(shape) if isinstance(s.pools[-1].cost, StepCostModel) else None
            for s in setups]


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    """A nested dict flattened to dotted keys."""
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_leaves(v, key + "."))
        else:
            out[key] = v
    return out


def _text(v: object) -> str:
    return "—" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _parts_json(b: StepBreakdown | None) -> dict | None:
    if b is None:
        return None
    return {"total_s": b.total_s, "compute_s": b.compute_s, "memory_s": b.memory_s,
            "communication_s": b.communication_s, "overhead_s": b.overhead_s, "by_op": b.by_op}
