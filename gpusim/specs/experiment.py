"""A run as data: what `gpusim run EXPERIMENT.yaml` reads and what the CLI flags build."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusim.errors import InputError, unknown_name
from gpusim.specs.catalog import is_path, resolve
from gpusim.specs.costs import CostOverrides
from gpusim.specs.deployment import AnyDeployment
from gpusim.specs.loading import read_yaml, validate

Scenario = Literal["offline", "server", "interactive", "singlestream", "concurrency", "trace", "sessions"]
Timing = Literal["roofline", "table"]
"""How kernels are timed: gpusim's roofline with the software profile's constants, or NVIDIA's measured
kernel tables (gpusim.perf.table_step)."""


MAX_ARRIVALS = 20_000_000
"""Requests one Server-like run may simulate: the engine holds every request's record (about 400 bytes each, 8 GB
at this count on the 24 GB machines gpusim is sized for)."""
MAX_STANDING_ARRIVALS = 1_000_000_000
"""Requests a converged Server-like run may stand for: it simulates at most `run_length.MAX_SIMULATED` of them."""
DEFAULT_ARRIVALS_S = 600.0
"""Seconds of arrivals a Server-like run without `duration_s` is taken to ask for here: MLPerf's minimum."""


class RunSpec(BaseModel):
    """One simulation: hardware, benchmark (model and dataset), scenario and its load, deployment."""

    model_config = ConfigDict(extra="forbid")

    hardware: str = "gb300-nvl72"
    systems: int = Field(1, ge=1, le=10**4)
    benchmark: str = "deepseek-r1"
    model: str | None = None
    """Serve this model instead of the benchmark's (for traces and closed-loop runs; gpusim list models)."""
    scenario: Scenario = "offline"
    qps: float | Literal["peak"] | None = None
    """Poisson arrival rate for server and interactive (queries per second, at most 1e7), or `peak`: the
    highest rate that passes LoadGen's rules on this deployment (`gpusim.search.peak_qps`, as `gpusim mlperf`
    finds it)."""
    concurrency: int | None = Field(None, ge=1, le=10**7)
    isl: int | None = Field(None, ge=1, le=10**8)
    osl: int | None = Field(None, ge=1, le=10**8)
    trace: str | None = None
    session_rate: float | None = Field(None, gt=0, le=1e5)
    """Scenario sessions: agent sessions starting per second (a Poisson process over `duration_s`)."""
    deployment: str | AnyDeployment | None = None
    """A deployment YAML path, an inline deployment, `best` (the searched best for this question, cached) or
    None / `default` (the searched default for the hardware, model and scenario)."""
    software: str | None = None
    """Run the deployment with this software profile (a name or a file) instead of its own: e.g. `trtllm-v5.1`,
    the v5.1 generation's kernels and serving features."""
    duration_s: float | None = Field(None, gt=0, le=1e7)
    """Server/interactive: seconds of arrivals (sessions: of session starts, by default 600 s and longer until the
    load is steady, `simulation.steady_sessions_run`; MLPerf's minimum, 600, by default; at
    `qps: peak` 2,400 s, as `gpusim mlperf` searches); Offline: the min duration LoadGen sizes the run for (by
    default 2,400 s, as long as submitters run and as `gpusim mlperf` runs)."""
    samples: int | None = Field(None, ge=1, le=10**8)
    """Requests to issue (Offline: LoadGen's count for `duration_s` at the expected rate by default)."""
    run_length: Literal["converged", "full"] = "converged"
    """Offline: `converged` simulates the run's first samples until its steady rate is known and skips the rest of
    its stationary middle, the reported figure then within ±0.5% (`gpusim/run_length.py`); `full` simulates every
    sample."""
    seed: int = Field(0, ge=0, lt=2**63)
    """Seed of the workload's random draws (numpy's generators take non-negative seeds)."""
    oversubscription: float = Field(1.0, ge=1)
    """Scale-out fat tree: cross-system traffic shares the NIC bandwidth divided by this."""
    timing: Timing = "roofline"
    costs: CostOverrides | None = None
    """Replacements for the cost and power defaults (hardware_profiles/costs.yaml), e.g. a user rack's capex."""

    @field_validator("qps")
    @classmethod
    def _positive_or_peak(cls, qps: float | str | None) -> float | str | None:
        if isinstance(qps, float | int) and not 0 < qps <= 1e7:
            raise ValueError(f"must be in (0, 1e7] or 'peak', got {qps}")
        return qps

    @model_validator(mode="after")
    def _scenario_needs(self) -> RunSpec:
        needs = {"server": ["qps"], "interactive": ["qps"], "concurrency": ["concurrency", "isl", "osl"],
                 "trace": ["trace"], "sessions": ["session_rate"]}
        for name in needs.get(self.scenario, []):
            if getattr(self, name) is None:
                raise ValueError(f"scenario {self.scenario!r} needs {name}")
        arrivals = self.samples or (self.qps * (self.duration_s or DEFAULT_ARRIVALS_S)
                                    if isinstance(self.qps, float | int) else 0)
        converged = self.run_length == "converged" and self.samples is None
        most = MAX_STANDING_ARRIVALS if converged else MAX_ARRIVALS
        if arrivals > most:
            raise ValueError(f"qps: qps × duration_s asks for {arrivals:,.0f} arrivals, more than the {most:,} "
                             f"a{' converged' if converged else ''} run may issue; lower qps or duration_s")
        return self


def load_run_spec(path: Path) -> RunSpec:
    """Read an experiment YAML; relative deployment, trace, hardware, benchmark, model and software paths are
    relative to the file."""
    data = read_yaml(path)
    for key in ("deployment", "trace"):
        value = data.get(key)
        if isinstance(value, str) and not Path(value).is_absolute() and (path.parent / value).exists():
            data[key] = str(path.parent / value)
    for key, kind in (("hardware", "systems"), ("benchmark", "benchmarks"), ("model", "models"),
                      ("software", "software")):
        value = data.get(key)
        if isinstance(value, str) and is_path(value):
            data[key] = str(resolve(kind, value, str(path), key, path.parent))
    spec = validate(RunSpec, data, str(path))
    _check_names(spec, str(path))
    dep = spec.deployment
    if isinstance(dep, str) and dep not in ("best", "default") and not Path(dep).is_file():
        raise InputError(str(path), "deployment", f"no deployment file {dep!r}; valid: a deployment YAML, best or "
                         "default")
    return spec


def _check_names(spec: RunSpec, source: str) -> None:
    """The profiles an experiment names exist (the error names the experiment file, not the command line)."""
    from gpusim.specs.benchmark import benchmark_names
    from gpusim.specs.hardware import system_names
    from gpusim.specs.model import model_names

    for field, names in (("hardware", system_names), ("benchmark", benchmark_names), ("model", model_names)):
        value = getattr(spec, field)
        if value is not None and not is_path(value) and value not in names():
            raise unknown_name(source, field, value, names())
