"""A run as data: what `gpusim run EXPERIMENT.yaml` reads and what the CLI flags build."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpusim.errors import InputError, unknown_name
from gpusim.specs.deployment import Deployment
from gpusim.specs.loading import load_yaml_model, read_yaml, validate

Scenario = Literal["offline", "server", "interactive", "singlestream", "concurrency", "trace"]
Timing = Literal["roofline", "table"]
"""How kernels are timed: gpusim's roofline with the software profile's constants, or NVIDIA's measured
kernel tables (gpusim.perf.table_step)."""


class RunSpec(BaseModel):
    """One simulation: hardware, benchmark (model and dataset), scenario and its load, deployment."""

    model_config = ConfigDict(extra="forbid")

    hardware: str = "gb300-nvl72"
    systems: int = Field(1, ge=1, le=10**4)
    benchmark: str = "deepseek-r1"
    model: str | None = None
    """Serve this model instead of the benchmark's (for traces and closed-loop runs; gpusim list models)."""
    scenario: Scenario = "offline"
    qps: float | None = Field(None, gt=0, le=1e7)
    """Poisson arrival rate for server and interactive (queries per second)."""
    concurrency: int | None = Field(None, ge=1, le=10**7)
    isl: int | None = Field(None, ge=1, le=10**8)
    osl: int | None = Field(None, ge=1, le=10**8)
    trace: str | None = None
    deployment: str | Deployment | None = None
    """A deployment YAML path, an inline deployment, or None for the default for the hardware and model."""
    duration_s: float | None = Field(None, gt=0, le=1e7)
    """Server/interactive: seconds of arrivals; Offline: the min duration LoadGen sizes the run for (MLPerf's
    minimum, 600, by default)."""
    samples: int | None = Field(None, ge=1, le=10**8)
    """Requests to issue (Offline: LoadGen's count for `duration_s` at the expected rate by default)."""
    seed: int = Field(0, ge=0, lt=2**63)
    oversubscription: float = Field(1.0, ge=1)
    """Scale-out fat tree: cross-system traffic shares the NIC bandwidth divided by this."""
    timing: Timing = "roofline"

    @model_validator(mode="after")
    def _scenario_needs(self) -> RunSpec:
        needs = {"server": ["qps"], "interactive": ["qps"], "concurrency": ["concurrency", "isl", "osl"],
                 "trace": ["trace"]}
        for name in needs.get(self.scenario, []):
            if getattr(self, name) is None:
                raise ValueError(f"scenario {self.scenario!r} needs {name}")
        return self


def load_run_spec(path: Path) -> RunSpec:
    """Read an experiment YAML; relative deployment and trace paths are relative to the file."""
    data = read_yaml(path)
    for key in ("deployment", "trace"):
        value = data.get(key)
        if isinstance(value, str) and not Path(value).is_absolute() and (path.parent / value).exists():
            data[key] = str(path.parent / value)
    spec = validate(RunSpec, data, str(path))
    _check_names(spec, str(path))
    if isinstance(spec.deployment, str) and not Path(spec.deployment).is_file():
        raise InputError(str(path), "deployment", f"no deployment file {spec.deployment!r}")
    return spec


def _check_names(spec: RunSpec, source: str) -> None:
    """The profiles an experiment names exist (the error names the experiment file, not the command line)."""
    from gpusim.specs.benchmark import benchmark_names
    from gpusim.specs.hardware import system_names
    from gpusim.specs.model import model_names

    for field, names in (("hardware", system_names), ("benchmark", benchmark_names), ("model", model_names)):
        value = getattr(spec, field)
        if value is not None and value not in names():
            raise unknown_name(source, field, value, names())


def load_deployment(spec: str | Deployment) -> tuple[Deployment, str]:
    """The deployment object and the name of where it came from (for error messages)."""
    if isinstance(spec, Deployment):
        return spec, "deployment"
    from gpusim.specs.software import software_names

    dep = load_yaml_model(Deployment, Path(spec))
    if dep.software not in software_names():
        raise unknown_name(spec, "software", dep.software, software_names())
    return dep, spec
