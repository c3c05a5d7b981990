"""Default deployments a submitter would run: the deployment search's winners, shipped per system.

`hardware_profiles/defaults/<system>.yaml` holds, for one system of each shipped profile, the deployment
`gpusim.search.search_deployments` found per model and scenario (Offline, Server) with a software profile.
`gpusim defaults --write` re-runs those searches and rewrites the files; each file names the command and
the date, and each entry the search's result, so a default is a searched deployment, not a guess.

Models whose best instances are small (at most `SLICE_GPUS` GPUs) are searched on that many GPUs of a
larger system (the way submitters report a rack slice): an aggregated deployment fills the rest of the
system with the same instances, so its tokens/s per GPU is the slice's.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from gpusim.specs.deployment import AnyDeployment, Deployment, DisaggregatedDeployment
from gpusim.specs.hardware import PROFILES, Hardware, hardware_key, load_hardware, same_as_shipped
from gpusim.specs.loading import load_yaml_model

DEFAULTS = PROFILES / "defaults"
SCENARIOS = ("offline", "server")
SLICE_GPUS = 8
"""Systems larger than this search light models (`slice_gpus`) on a slice of this many GPUs."""


class DefaultEntry(BaseModel):
    """One searched default: the deployment and what the search measured with it."""

    model_config = ConfigDict(extra="forbid")

    deployment: AnyDeployment
    tokens_per_s_per_gpu: float
    peak_qps: float | None = None
    searched_gpus: int
    search_wall_s: float | None = None
    """Wall seconds the search took, and one full-length run of its winner (`run_wall_s`): its cost in runs."""
    run_wall_s: float | None = None


class DefaultsFile(BaseModel):
    """hardware_profiles/defaults/<system>.yaml."""

    model_config = ConfigDict(extra="forbid")

    system: str
    software: str
    command: str
    date: str
    duration_s: float
    entries: dict[str, dict[str, DefaultEntry]] = {}
    """model id → scenario → entry."""


def defaults_path(system: str) -> Path:
    return DEFAULTS / f"{system}.yaml"


def read_defaults(system: str) -> DefaultsFile | None:
    path = defaults_path(system)
    return load_yaml_model(DefaultsFile, path) if path.is_file() else None


def searched_default(hw: Hardware, model_id: str, scenario: str, software: str = "trtllm",
                     system: str | None = None) -> AnyDeployment | None:
    """The shipped searched deployment of `model_id` in `scenario` on `hw` (any number of its systems), or None.
    The defaults are `system`'s, by default the shipped system `hw` is (a renamed copy takes the original's) or
    else its `base` (a shipped system, as `SystemSpec` checks)."""
    system = system or same_as_shipped(hw) or hw.system.base
    table = read_defaults(system) if system is not None else None
    entry = table.entries.get(model_id, {}).get(scenario) if table and table.software == software else None
    if entry is None:
        return None
    dep = entry.deployment
    if isinstance(dep, DisaggregatedDeployment) and hw.systems > 1:  # named pool sizes are per system
        pools = {r: p.model_copy(update={"instances": p.instances * hw.systems})
                 for r in ("prefill", "decode") if (p := getattr(dep, r)).instances is not None}
        dep = dep.model_copy(update=pools)
    return dep.model_copy(update={"instances": None}) if isinstance(dep, Deployment) else dep


def searched_entry(hw: Hardware, model_id: str, benchmark: str, scenario: str, software: str, duration_s: float,
                   seed: int, gpus: int | None) -> DefaultEntry | None:
    """The shipped entry when it answers exactly this search question (one system of the shipped profile, the
    benchmark its model was searched with, the same software, run length, seed 0 and GPU budget), else None."""
    system = same_as_shipped(hw) if hw.systems == 1 and hw.oversubscription == 1 else None
    if system is None or hardware_key(load_hardware(system)) != hardware_key(hw):
        return None
    table = read_defaults(system)
    if table is None or (table.software, table.duration_s, seed) != (software, duration_s, 0) or benchmark != model_id:
        return None
    entry = table.entries.get(model_id, {}).get(scenario)
    return entry if entry is not None and entry.searched_gpus == (gpus or hw.num_gpus) else None


def replica_peak(hw: Hardware, model_id: str, benchmark: str, scenario: str, deployment: AnyDeployment,
                 duration_s: float, seed: int) -> float | None:
    """Where a walk to `deployment`'s peak QPS on `hw` may start when it is the shipped searched default of
    `hw`'s system for this question (same benchmark, software, run length and seed): the shipped peak times the
    GPUs it now fills (independent instances behind one router, on more systems or the whole of a searched
    slice); None otherwise. A start only: the walk judges every rate it reports (`search.walk_to_flip`)."""
    system = same_as_shipped(hw) if hw.oversubscription == 1 else None
    table = read_defaults(system) if system is not None else None
    if table is None or (table.duration_s, seed, benchmark) != (duration_s, 0, model_id):
        return None
    entry = table.entries.get(model_id, {}).get(scenario)
    same = entry is not None and entry.deployment.name == deployment.name and deployment.software == table.software
    return entry.peak_qps * hw.num_gpus / entry.searched_gpus if same and entry.peak_qps else None


LIGHT_GPUS = 2
"""A light model's weights fit in half of the HBM of this many GPUs: its best instances are small."""


def slice_gpus(hw: Hardware, weight_bytes: float, hbm_bytes: float) -> int | None:
    """GPUs to search a model on: a slice of `SLICE_GPUS` for a light model (`LIGHT_GPUS`) on a larger system;
    None (the whole system, where wide expert parallelism and disaggregated pools can win) otherwise."""
    if hw.num_gpus <= SLICE_GPUS or weight_bytes > 0.5 * LIGHT_GPUS * hbm_bytes:
        return None
    return SLICE_GPUS


def write_defaults(table: DefaultsFile) -> Path:
    """Write `table` atomically (a temporary file renamed over the old one)."""
    path = defaults_path(table.system)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Searched default deployments of {table.system} (one system), per model and scenario.\n"
              f"# Written by `{table.command}`; do not edit by hand: re-run it.\n")
    body = yaml.safe_dump(table.model_dump(mode="json", exclude_defaults=True), sort_keys=False, width=120)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(header + body)
    Path(tmp).replace(path)
    return path


def today() -> str:
    return datetime.date.today().isoformat()


__all__ = ["DEFAULTS", "SCENARIOS", "DefaultEntry", "DefaultsFile", "read_defaults", "replica_peak",
           "searched_default", "searched_entry", "slice_gpus", "write_defaults"]
