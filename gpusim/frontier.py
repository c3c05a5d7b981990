"""The throughput–interactivity frontier of one system and model: the points a submitter could run.

1. **Screen** (`screen`): every deployment the search would try (`search.candidate_deployments`: aggregated
   and disaggregated, TP/EP/attention DP, weights precision, batch and token budgets; MTP where the limits'
   scenario allows it) gets its analytic curve (`search.DecodeCurve`: QPS and mean TPOT at each batch). Per
   layout the budget variant with the highest capacity stays; the layouts that hold most of the analytic front
   are kept, and the best disaggregated one beside them where the hardware runs one.
2. **Simulate**: each kept deployment is served Poisson arrivals at `RATE_SHARES` of its analytic capacity,
   each run long enough for its batch to turn over (`steady_run`); its steady rate (after the warm-up, before
   the drain) is the point's tokens/s/GPU, 1 / median TPOT its tokens/s/user. The same deployment's steady
   Offline rate (a submission-length run on one instance of it, `offline_rate`) is reported beside every point.
3. **Front**: only points that are steady and meet the limits (`analysis.frontier.meets_limits`) may stand on
   it; each hardware has its own.

Every simulated point is cached on disk by everything that decides it (`gpusim.best.cache_dir`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from gpusim.analysis.frontier import Limits, fronts, is_steady, meets_limits, pareto_front
from gpusim.best import cache_dir, setup_key, write_atomic
from gpusim.build import Setup, make_setup
from gpusim.errors import InputError
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.rules import SERVER_LIKE, SUBMISSION_DURATION_S
from gpusim.parallel import parallel_map
from gpusim.search import TPOT_MARGIN, candidate_deployments, decode_curve, layout_key, trial
from gpusim.specs.benchmark import LatencyLimits, LengthDistribution
from gpusim.specs.deployment import Deployment

Log = Callable[[str], None]
RATE_SHARES = (0.08, 0.25, 0.5, 0.75, 0.92)
"""Arrival rates per deployment, as shares of its analytic capacity: low shares give few sequences per step
(interactive), high ones a full batch (the analytic capacity is within about 20% of the simulated one, so the
top share may overload: such a point is drawn hollow)."""
BATCH_LEVELS = 24
"""Batches per analytic curve, geometric from one sequence to the largest batch."""
MIN_RUN_S, MAX_RUN_S = 120.0, 4800.0
"""Bounds of a point's arrival time (`steady_run`)."""
TURNOVER = 2.4
"""A run lasts this many times its p90 request's time in the engine, so the steady window opens after the batch
turned over (`analysis.steady`: the warm-up must end before half-way)."""


@dataclass(frozen=True)
class FrontierPoint:
    """One deployment at one arrival rate (the `points` of `gpusim frontier --json`)."""

    hardware: str
    deployment: str
    mode: str
    qps: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    steady: bool
    meets_limits: bool
    on_front: bool
    offline_tokens_per_s_per_gpu: float
    """The deployment's steady Offline rate (`offline_rate`)."""
    duration_s: float
    num_gpus: int


# ---- 1. screen ------------------------------------------------------------------------------------
def analytic_curve(setup: Setup, seed: int = 0, spacing: str = "geometric") -> pd.DataFrame:
    """The cost model's curve of `setup` (`search.DecodeCurve`): per batch, QPS, mean TPOT, tokens/s/GPU and
    tokens/s/user (1 / mean TPOT), at `BATCH_LEVELS` batches spaced geometrically from one sequence to the
    largest batch, or (`spacing="linear"`) at about 64 evenly spaced ones."""
    curve = decode_curve(setup, seed)
    batches = (np.unique(np.geomspace(1, curve.max_batch, BATCH_LEVELS).round().astype(int)) if spacing == "geometric"
               else np.arange(1, curve.max_batch + 1, max(1, curve.max_batch // 64)))
    qps, tpot = np.array([curve(int(b)) for b in batches]).T
    return pd.DataFrame({"batch": batches, "qps": qps, "tpot_s": tpot,
                         "tokens_per_s_per_gpu": qps * curve.lengths.osl / setup.num_gpus,
                         "tokens_per_s_per_user": 1.0 / tpot})


def analytic_points(setup: Setup, limits: Limits, seed: int = 0) -> pd.DataFrame:
    """`analytic_curve` where the mean TPOT is within `TPOT_MARGIN` of the TPOT limit; empty where one sequence
    already misses."""
    pts = analytic_curve(setup, seed)
    return pts[pts["tpot_s"] <= TPOT_MARGIN * limits.tpot_p99_s].reset_index(drop=True)


def screen(base: Setup, scenario: str, limits: Limits, keep: int = 5, seed: int = 0,
           log: Log = lambda _: None, rank: Literal["front", "capacity"] = "front") -> list[Setup]:
    """The deployments to simulate (module docstring, 1): at most `keep`, `base`'s own and the best disaggregated
    one among them. Layouts rank by their share of the analytic front (a frontier: the most of it simulated), or
    by `rank="capacity"` by the highest QPS whose analytic TPOT meets the limit (a capacity plan, which asks only
    for that: the layout holding most of the front may be one whose prefill pool starves at its rate)."""
    best: dict[tuple, tuple[float, Setup, pd.DataFrame]] = {}  # per layout: its highest-capacity budget variant
    for dep in candidate_deployments(base.hardware, base.model, base.bench, scenario, seed=seed,
                                     software=base.deployment.software):
        s = base.with_deployment(dep, dep.name)
        pts = analytic_points(s, limits, seed)
        cap = float(pts["qps"].max()) if len(pts) else 0.0
        if cap > best.get(layout_key(dep), (0.0,))[0]:
            best[layout_key(dep)] = (cap, s, pts)
    if not best:
        raise InputError("command line", "hardware", f"no deployment of {base.model.id} on {base.hardware.id} fits "
                         f"and meets {limits.text()}")
    layouts = list(best.values())
    share: pd.Series = pd.Series(dtype=int)  # points each layout holds on the analytic front (rank="front" only)
    if rank == "front":
        every = pd.concat([pts.assign(layout=i) for i, (_, _, pts) in enumerate(layouts)], ignore_index=True)
        share = every.iloc[pareto_front(every["tokens_per_s_per_user"].to_numpy(),
                                        every["tokens_per_s_per_gpu"].to_numpy())]["layout"].value_counts()
    ranked = [layouts[i][1] for i in sorted(range(len(layouts)), key=lambda i: (-share.get(i, 0), -layouts[i][0]))]
    disagg = next((s for s in ranked if not isinstance(s.deployment, Deployment)), None)
    chosen: dict[tuple, Setup] = {}
    for s in [base, *([disagg] if disagg else []), *ranked]:  # the two always, then the highest ranked
        if len(chosen) < keep:
            chosen.setdefault(layout_key(s.deployment), s)
    log(f"screen: {len(best)} layouts of {base.model.id} on {base.hardware.id}; simulating "
        + ", ".join(s.deployment.name for s in chosen.values()))
    return list(chosen.values())


# ---- 2. simulate ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PointJob:
    setup: Setup
    scenario: str
    qps: float
    duration_s: float
    seed: int


def steady_run(job: PointJob) -> dict:
    """The steady figures of `job`'s deployment at its rate: run for `job.duration_s` of arrivals, and longer
    (up to `MAX_RUN_S`) while the batch has not turned over in the run and the engine keeps up."""
    key = setup_key(job.setup, scenario=job.scenario, qps=job.qps, duration_s=job.duration_s, seed=job.seed)
    path = cache_dir() / "frontier" / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    duration = job.duration_s
    while True:
        t = trial(job.setup, job.scenario, job.qps, duration, job.seed)
        s = t.result.summary
        if is_steady(s) or s.get("overloaded") or duration >= MAX_RUN_S:
            break
        req = t.result.requests
        p90 = float(np.nanquantile(req["completion_s"] - req["first_token_s"], 0.9))
        duration = min(MAX_RUN_S, max(2 * duration, TURNOVER * p90))
    out = {k: s.get(k) for k in ("steady_output_tokens_per_s_per_gpu", "tpot_p50_s", "ttft_p99_s", "tpot_p99_s",
                                 "steady_turned_over", "overloaded", "num_gpus")}
    out["duration_s"] = duration
    write_atomic(path, json.dumps(out))
    return out


def offline_rate(job: PointJob) -> float:
    """Steady tokens/s/GPU of `job.setup` in Offline (every request queued at once) over a submission-length run,
    on one instance where the deployment is aggregated: instances are identical, and on GB300 NVL72's DeepSeek-R1
    Offline default one instance lands within 1% of the rack's nine."""
    setup = job.setup
    if isinstance(setup.deployment, Deployment):
        setup = setup.with_deployment(setup.deployment.model_copy(update={"instances": 1}), setup.deployment.name)
    return float(trial(setup, "offline", None, SUBMISSION_DURATION_S, job.seed).result.summary[
        "steady_output_tokens_per_s_per_gpu"] or 0.0)


def first_duration(setup: Setup, qps: float, seed: int) -> float:
    """A first guess at the arrival time that turns a run over: TURNOVER × the p90 output × the analytic TPOT."""
    curve = analytic_curve(setup, seed, spacing="linear")
    tpot = float(np.interp(qps, curve["qps"], curve["tpot_s"]))  # QPS grows with the batch
    osl90 = float(np.quantile(dataset_lengths(setup.bench, seed)[1], 0.9))
    return float(np.clip(TURNOVER * osl90 * tpot, MIN_RUN_S, MAX_RUN_S))


def with_workload(setup: Setup, scenario: str, limits: Limits, isl: int | None = None,
                  osl: int | None = None) -> Setup:
    """`setup` judged by `limits` in `scenario`, serving requests of `isl` input and `osl` output tokens (each left to
    the benchmark when None): a benchmark without limits for `scenario` can still have a front."""
    fixed = {f: LengthDistribution(kind="constant", value=n, min=n, max=n, source=f"--{flag}", grade="A")
             for f, flag, n in (("input_tokens", "isl", isl), ("output_tokens", "osl", osl)) if n is not None}
    own = setup.bench.limits(scenario)
    if own is None or (own.ttft_s, own.tpot_s) != (limits.ttft_p99_s, limits.tpot_p99_s):
        fixed[scenario] = LatencyLimits(ttft_s=limits.ttft_p99_s, tpot_s=limits.tpot_p99_s,
                                        source="gpusim frontier --ttft-limit/--tpot-limit")
    if not fixed:
        return setup
    return make_setup(setup.hardware, setup.bench.model_copy(update=fixed), setup.model, setup.deployment,
                      "command line", setup.timing)


# ---- 3. the front ---------------------------------------------------------------------------------
def frontier(bases: list[Setup], scenario: str, limits: Limits, keep: int = 5, seed: int = 0, workers: int = 1,
             log: Log = lambda _: None) -> list[FrontierPoint]:
    """Every simulated point of every setup's hardware, its front marked (module docstring)."""
    if scenario not in SERVER_LIKE:
        raise InputError("command line", "scenario", f"{scenario}: a frontier serves arrivals; valid: "
                         + ", ".join(SERVER_LIKE))
    setups = [s for base in bases for s in screen(base, scenario, limits, keep, seed, log)]
    jobs = [PointJob(s, scenario, q, first_duration(s, q, seed), seed)
            for s in setups for q in _rates(s, limits, seed)]
    log(f"simulating {len(jobs)} points and {len(setups)} Offline references, {workers} at a time")
    runs = parallel_map(steady_run, jobs, workers)
    offline = dict(zip((id(s) for s in setups),
                       parallel_map(offline_rate, [PointJob(s, "offline", 0.0, 0.0, seed) for s in setups], workers),
                       strict=True))
    points = [_point(j, r, offline[id(j.setup)], limits) for j, r in zip(jobs, runs, strict=True)]
    return _mark_fronts(points)


def _rates(setup: Setup, limits: Limits, seed: int) -> list[float]:
    """`RATE_SHARES` of the analytic capacity within the TPOT limit (of the whole curve where none meets it)."""
    pts = analytic_points(setup, limits, seed)
    capacity = float((pts if len(pts) else analytic_curve(setup, seed))["qps"].max())
    return [round(share * capacity, 3) for share in RATE_SHARES]


def _point(job: PointJob, run: dict, offline: float, limits: Limits) -> FrontierPoint:
    tpot50 = run["tpot_p50_s"]
    return FrontierPoint(
        hardware=job.setup.hardware.id, deployment=job.setup.deployment.name, mode=job.setup.deployment.mode,
        qps=job.qps, tokens_per_s_per_gpu=float(run["steady_output_tokens_per_s_per_gpu"] or 0.0),
        tokens_per_s_per_user=1.0 / tpot50 if tpot50 else math.nan, ttft_p99_s=run["ttft_p99_s"],
        tpot_p50_s=tpot50, tpot_p99_s=run["tpot_p99_s"], steady=is_steady(run),
        meets_limits=meets_limits(run, limits), on_front=False, offline_tokens_per_s_per_gpu=offline,
        duration_s=run["duration_s"], num_gpus=int(run["num_gpus"]))


def _mark_fronts(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """`points` with `on_front` set per hardware."""
    marks = fronts(pd.DataFrame([asdict(p) for p in points]))
    return [replace(p, on_front=bool(m)) for p, m in zip(points, marks, strict=True)]


def points_frame(points: list[FrontierPoint]) -> pd.DataFrame:
    """One row per point, with `exceeds_offline`: the steady rate above the deployment's steady Offline rate."""
    frame = pd.DataFrame([asdict(p) for p in points])
    frame["exceeds_offline"] = frame["tokens_per_s_per_gpu"] > frame["offline_tokens_per_s_per_gpu"]
    return frame


__all__ = [
    "FrontierPoint",
    "PointJob",
    "analytic_curve",
    "analytic_points",
    "first_duration",
    "frontier",
    "offline_rate",
    "points_frame",
    "screen",
    "steady_run",
    "with_workload",
]
