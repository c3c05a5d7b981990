"""Parameter sweeps: a grid of runs on local processes or an existing Dask cluster.

A sweep YAML holds the fields of a run (as `gpusim run EXPERIMENT.yaml` reads them) and a `grid`:

    hardware: gb300-nvl72
    benchmark: deepseek-r1
    grid:
      systems: [1, 2, 3, 4]             # any RunSpec field
      deployment.tp: [4, 8]             # a field of the named or default deployment
      costs.usd_per_kwh: [0.05, 0.10]   # a cost override (gpusim/analysis/energy.py)
      load:                             # a group: any other name, a list of mappings set together
        - {scenario: offline}
        - {scenario: server, qps_per_gpu: 0.8}   # qps = qps_per_gpu x the GPUs of the hardware
    costs: {usd_per_kwh: 0.08}          # optional overrides for every point
    requests: true                      # keep per-request records in DIR/requests/<point_id>.parquet

`qps_per_gpu` and `samples_per_gpu` (anywhere a field goes) set qps and samples per GPU of the point's
hardware, so a load or an Offline run scales with the systems.

Points are the product of the grid, each identified by a hash of its parameters. Every finished point
(or its error) is written to DIR/results.parquet at once, by an atomic rewrite, so an interrupted sweep
resumes where it stopped and a failed point is recorded rather than dropped.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from gpusim.analysis.energy import energy_and_cost
from gpusim.analysis.outputs import RESULTS, RESULTS_CSV
from gpusim.deploy import load_deployment, spec_default
from gpusim.errors import InputError
from gpusim.parallel import dask_client, worker_pool
from gpusim.specs.costs import CostOverrides
from gpusim.specs.deployment import AnyDeployment, Deployment, DisaggregatedDeployment, deployment_type
from gpusim.specs.experiment import RunSpec
from gpusim.specs.loading import read_yaml, validate

REQUESTS = "requests"
DERIVED = {"qps_per_gpu": "qps", "samples_per_gpu": "samples"}
"""Sweep-only fields, per GPU of the point's hardware: qps = qps_per_gpu × GPUs, samples = samples_per_gpu × GPUs."""
PREFIXES = {"deployment": {**Deployment.model_fields, **DisaggregatedDeployment.model_fields},
            "costs": CostOverrides.model_fields}
"""Dotted fields `deployment.X` and `costs.X` set a field of a deployment (either mode's) or of the cost overrides."""


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its parameters, the validated run, and what is applied to it."""

    index: int
    id: str
    params: dict[str, Any]
    spec: RunSpec
    deployment: dict[str, Any] = field(default_factory=dict)
    costs: dict[str, Any] = field(default_factory=dict)
    source: str = "sweep"
    keep_requests: bool = True


@dataclass
class PointResult:
    """What a point returns: its summary and records, or the error that stopped it."""

    id: str
    summary: dict | None = None
    requests: pd.DataFrame | None = None
    error: str | None = None


@dataclass
class SweepReport:
    """Counts of one `run_sweep` call."""

    points: int
    ran: int
    skipped: int
    failed: int
    results: Path


@dataclass
class Sweep:
    """A parsed sweep YAML: base fields, the grid, cost overrides."""

    path: Path
    base: dict[str, Any]
    grid: dict[str, list]
    keep_requests: bool = True

    def points(self) -> list[Point]:
        """Every combination of the grid, validated (a malformed point is an InputError here)."""
        keys = list(self.grid)
        out = []
        for index, combo in enumerate(itertools.product(*(self.grid[k] for k in keys))):
            params = dict(self.base)
            for key, value in zip(keys, combo, strict=True):
                params.update(value if _is_group(key) else {key: value})
            out.append(self._point(index, params))
        return out

    def _point(self, index: int, params: dict[str, Any]) -> Point:
        run: dict[str, Any] = {}
        dep: dict[str, Any] = {}
        costs: dict[str, Any] = {}
        for key, value in params.items():
            head, _, rest = key.partition(".")
            if head == "deployment" and rest:
                dep[rest] = value
            elif head == "costs" and rest:
                costs[rest] = value
            else:
                run[key] = _resolve(value, self.path.parent) if key in ("deployment", "trace") else value
        where = f"{self.path} (point {index}: {_describe(params)})"
        for name, target in DERIVED.items():
            if name in run:
                run[target] = _per_gpu(run, name, target, where)
        spec = validate(RunSpec, run, where)
        validate(CostOverrides, costs, where)
        return Point(index, point_id(params), params, spec, dep, costs, str(self.path), self.keep_requests)


def load_sweep(path: Path) -> Sweep:
    """Read a sweep YAML; unknown fields and empty grids are InputErrors naming the field."""
    path = Path(path)
    data = read_yaml(path)
    grid = data.pop("grid", None) or {}
    costs = data.pop("costs", None) or {}
    keep = data.pop("requests", True)
    for name, value, kind, what in (("grid", grid, dict, "a mapping of field: [values]"),
                                    ("costs", costs, dict, "a mapping of cost fields"),
                                    ("requests", keep, bool, "true or false")):
        if not isinstance(value, kind):
            raise InputError(str(path), name, f"expected {what}")
    data.update({f"costs.{k}": v for k, v in costs.items()})  # part of every point's parameters and id
    for key in data:
        _check_field(path, key, key)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise InputError(str(path), f"grid.{key}", "expected a non-empty list of values")
        if _is_group(key):
            for item in values:
                if not isinstance(item, dict):
                    raise InputError(str(path), f"grid.{key}", f"{key!r} is not a field, so its values must "
                                     "be mappings of fields set together")
                for sub in item:
                    _check_field(path, sub, f"grid.{key}.{sub}")
        else:
            _check_field(path, key, f"grid.{key}")
    return Sweep(path, data, grid, keep)


def point_id(params: dict[str, Any]) -> str:
    """A stable identifier: the first 16 hex digits of the SHA-256 of the sorted parameters."""
    text = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_point(point: Point) -> PointResult:
    """Simulate one point; any failure becomes the point's error string (runs on a worker)."""
    from gpusim.api import run_spec
    from gpusim.specs.hardware import load_hardware

    try:
        spec = point.spec
        if point.deployment:
            spec = spec.model_copy(update={"deployment": apply_deployment(spec, point.deployment, point.source)})
        result = run_spec(spec, point.source)
        summary = dict(result.summary)
        if point.costs:
            summary.update(energy_and_cost(summary, load_hardware(spec.hardware, spec.systems), result.stats,
                                           point.costs))
        return PointResult(point.id, summary, result.requests if point.keep_requests else None)
    except Exception as exc:  # recorded with the point, never dropped
        return PointResult(point.id, error=error_text(exc))


def apply_deployment(spec: RunSpec, updates: dict[str, Any], source: str) -> AnyDeployment:
    """The point's deployment (named, or the default for its hardware and model) with `updates` set."""
    if spec.deployment == "best":
        raise InputError(source, "deployment", "deployment.FIELD values change a named or the default deployment; "
                         "valid with them: a deployment file or default, not best")
    base = spec_default(spec) if spec.deployment in (None, "default") else load_deployment(spec.deployment)[0]
    data = base.model_dump()
    for path, value in updates.items():
        *parents, leaf = path.split(".")
        node = data
        for name in parents:
            if not isinstance(node.get(name), dict):
                node[name] = {}
            node = node[name]
        node[leaf] = value
    data["name"] = f"{base.name} with {', '.join(f'{k}={v}' for k, v in updates.items())}"
    return validate(deployment_type(data), data, f"{source}: deployment")


def error_text(exc: BaseException) -> str:
    """One line: an InputError as the CLI prints it, anything else with its type."""
    text = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def run_sweep(path: Path, out: Path, workers: int | None = None, scheduler: str | None = None,
              retry_failed: bool = False, progress: bool = True) -> SweepReport:
    """Run every point of the sweep at `path` not yet in `out`/results.parquet; return the counts.

    `workers` local processes (default: one per CPU; 1 runs in this process), or the Dask cluster at
    `scheduler` (tcp://HOST:PORT), whose workers must have gpusim installed and see the same files.
    """
    points = load_sweep(path).points()
    store = ResultStore(Path(out))
    done = store.finished(retry_failed)
    todo = [p for p in points if p.id not in done]
    by_id = {p.id: p for p in todo}
    failed = 0
    with tqdm(total=len(points), initial=len(points) - len(todo), desc=Path(path).stem, unit="point",
              disable=not progress) as bar:
        for res in execute(todo, workers, scheduler):
            store.add(by_id[res.id], res)
            failed += res.error is not None
            bar.update()
    return SweepReport(len(points), len(todo), len(points) - len(todo), failed, store.results)


def execute(points: list[Point], workers: int | None = None, scheduler: str | None = None) -> Iterator[PointResult]:
    """Run `points`, yielding each result as it finishes (a lost worker is an error of its point)."""
    if not points:
        return
    if scheduler is not None:
        yield from _on_dask(points, scheduler)
        return
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise InputError("command line", "workers", f"must be ≥ 1, got {workers}")
    if workers == 1:
        yield from map(run_point, points)
        return
    yield from _local(points, workers)


def _local(points: list[Point], workers: int) -> Iterator[PointResult]:
    """`points` on a pool of `workers` processes. A worker process that dies (killed, out of memory, a crash
    in native code) breaks the whole pool: the points it took down with it run again, each in a process of its
    own, so that only the point that kills its process is recorded as failed."""
    pool = worker_pool(min(workers, len(points)))
    broken: list[Point] = []
    try:
        futures = {pool.submit(run_point, p): p for p in points}
        yield from _gather(cf.as_completed(futures), futures, broken)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if broken:
        with cf.ThreadPoolExecutor(max_workers=min(workers, len(broken))) as threads:
            yield from threads.map(_alone, broken)


def _alone(point: Point) -> PointResult:
    """Run one point in a process of its own; its death is that point's error."""
    with worker_pool(1) as pool:
        try:
            return pool.submit(run_point, point).result()
        except BrokenProcessPool:
            return PointResult(point.id, error="its worker process died while running it (killed or crashed)")


def _on_dask(points: list[Point], scheduler: str) -> Iterator[PointResult]:
    client = dask_client(scheduler)
    from dask.distributed import as_completed

    try:
        futures = client.map(run_point, points, pure=False)
        yield from _gather(as_completed(futures), dict(zip(futures, points, strict=True)))
    finally:
        client.close()


def _gather(finished: Iterable, points: dict, broken: list[Point] | None = None) -> Iterator[PointResult]:
    """Each finished future's result, or its error; with `broken`, points lost to a broken process pool go
    there instead (to run again)."""
    for fut in finished:
        try:
            yield fut.result()
        except BrokenProcessPool:
            if broken is None:
                raise
            broken.append(points[fut])
        except Exception as exc:
            yield PointResult(points[fut].id, error=error_text(exc))


class ResultStore:
    """DIR/results.parquet and .csv (one row per point) and DIR/requests/<point_id>.parquet, rewritten
    atomically."""

    def __init__(self, out: Path) -> None:
        if out.exists() and not out.is_dir():
            raise InputError("command line", "out", f"{out} exists and is not a directory")
        self.out, self.results = out, out / RESULTS
        out.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = pd.read_parquet(self.results).to_dict("records") if self.results.exists() else []

    def finished(self, retry_failed: bool = False) -> set[str]:
        """Point ids already recorded; with `retry_failed`, failed ones are forgotten and run again."""
        if retry_failed:
            self.rows = [r for r in self.rows if r["status"] == "ok"]
        return {r["point_id"] for r in self.rows}

    def add(self, point: Point, res: PointResult) -> None:
        """Record one finished point: its request records first, then its row."""
        if res.requests is not None:
            _atomic(self.out / REQUESTS / f"{point.id}.parquet", lambda p: res.requests.to_parquet(p, index=False))
        self.rows.append(result_row(point, res))
        frame = pd.DataFrame(self.rows).sort_values("point_index", kind="stable")
        _atomic(self.results, lambda p: frame.to_parquet(p, index=False))
        _atomic(self.out / RESULTS_CSV, lambda p: frame.to_csv(p, index=False))  # the same rows, for spreadsheets


def result_row(point: Point, res: PointResult) -> dict[str, Any]:
    """One results row: identity, status, the point's parameters and run fields, the flattened summary."""
    run = point.spec.model_dump(exclude={"deployment"})
    return {
        "point_id": point.id,
        "point_index": point.index,
        "status": "ok" if res.error is None else "error",
        "error": res.error,
        "params": json.dumps(point.params, sort_keys=True, default=str),
        **run,
        **flatten(res.summary or {}),
    }


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; lists as JSON text (Parquet columns of one type)."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = json.dumps(value) if isinstance(value, list | tuple) else value
    return out


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def _is_group(key: str) -> bool:
    return key not in RunSpec.model_fields and key not in DERIVED and key.partition(".")[0] not in PREFIXES


def _check_field(path: Path, key: str, where: str) -> None:
    head, dot, rest = key.partition(".")
    if dot and head in PREFIXES and rest.partition(".")[0] in PREFIXES[head]:
        return
    if not dot and (key in RunSpec.model_fields or key in DERIVED):
        return
    raise InputError(str(path), where, f"unknown field {key!r}; valid: {', '.join(RunSpec.model_fields)}, "
                     f"{', '.join(DERIVED)}, deployment.FIELD, costs.FIELD")


def _resolve(value: Any, folder: Path) -> Any:
    """A relative deployment or trace path is relative to the sweep file (as in `gpusim run`)."""
    if isinstance(value, str) and not Path(value).is_absolute() and (folder / value).exists():
        return str(folder / value)
    return value


def _per_gpu(run: dict[str, Any], name: str, target: str, where: str) -> float | int:
    """`target` from the per-GPU field `name` times the GPUs of the run's hardware."""
    from gpusim.specs.hardware import load_hardware

    per_gpu = run.pop(name)
    if run.get(target) is not None:
        raise InputError(where, name, f"set {target} or {name}, not both")
    if not isinstance(per_gpu, int | float) or per_gpu <= 0:
        raise InputError(where, name, f"must be a positive number, got {per_gpu!r}")
    base = validate(RunSpec, {k: v for k, v in run.items() if k in ("hardware", "systems")}, where)
    value = per_gpu * load_hardware(base.hardware, base.systems).num_gpus
    return value if target == "qps" else max(round(value), 1)


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
