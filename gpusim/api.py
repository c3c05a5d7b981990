"""The Python API: `gpusim.run(...)` builds the workload, simulates it and summarises it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpusim.analysis.metrics import summarize
from gpusim.deploy import check_deployment, default_deployment, instance_count
from gpusim.loadgen import scenarios
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.traces import read_trace
from gpusim.loadgen.workload import Workload
from gpusim.perf.capacity import steady_state_qps
from gpusim.perf.memory import plan_memory
from gpusim.perf.step import StepCostModel
from gpusim.sim.cluster import Cluster, SimStats
from gpusim.specs.benchmark import BenchmarkSpec, load_benchmark
from gpusim.specs.deployment import Deployment
from gpusim.specs.experiment import RunSpec, load_deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model


@dataclass
class Result:
    """A finished run: the JSON summary, one row per request, and engine counters."""

    summary: dict
    requests: pd.DataFrame
    stats: SimStats


def run(
    hardware: str = "gb300-nvl72",
    benchmark: str = "deepseek-r1",
    scenario: str = "offline",
    **options: object,
) -> Result:
    """Simulate one run. Options are the fields of `RunSpec` (qps, systems, deployment, seed, …)."""
    from gpusim.specs.loading import validate

    spec = validate(RunSpec, {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, **options},
                    "gpusim.run")
    return run_spec(spec)


def run_spec(spec: RunSpec, source: str = "command line") -> Result:
    """Simulate the run that `spec` describes."""
    hw = load_hardware(spec.hardware, spec.systems)
    bench = load_benchmark(spec.benchmark)
    model = load_model(bench.model)
    if spec.deployment is None:
        dep, dep_source = default_deployment(hw, model), source
    else:
        dep, dep_source = load_deployment(spec.deployment)
    check_deployment(hw, model, dep, dep_source)
    cost, memory = StepCostModel(hw, model, dep), plan_memory(hw, model, dep)
    instances = instance_count(hw, dep)

    def expected_qps() -> float:
        isl, osl = dataset_lengths(bench, spec.seed)
        return steady_state_qps(cost, memory, dep, instances, float(isl.mean()), float(osl.mean()))

    workload = build_workload(spec, bench, expected_qps)
    started = time.perf_counter()
    cluster = Cluster(cost, memory, dep, workload, instances)
    records = cluster.run().frame()
    wall = time.perf_counter() - started
    stats = cluster.stats()
    gpus_used = instances * dep.gpus_per_instance
    summary = {
        "hardware": hw.id,
        "systems": hw.systems,
        "num_gpus": gpus_used,
        "hardware_gpus": hw.num_gpus,
        "benchmark": bench.id,
        "model": model.id,
        "scenario": spec.scenario,
        "target_qps": spec.qps,
        "deployment": dep.model_dump(),
        "instances": stats.instances,
        "kv_capacity_tokens_per_instance": stats.memory.kv_capacity_tokens,
        **summarize(records, spec.scenario, bench.limits(spec.scenario), gpus_used),
        "issued_requests": len(workload),
        "preemptions": int(records["preemptions"].sum()),
        "seed": spec.seed,
        "wall_s": wall,
    }
    return Result(summary=_plain(summary), requests=records, stats=stats)


def build_workload(spec: RunSpec, bench: BenchmarkSpec, expected_qps: Callable[[], float]) -> Workload:
    """The requests a scenario issues; Offline is sized from the expected QPS as LoadGen sizes it."""
    if spec.scenario == "offline":
        samples = spec.samples or scenarios.offline_sample_count(bench, expected_qps())
        return scenarios.offline(bench, spec.seed, samples=samples)
    if spec.scenario in ("server", "interactive"):
        return scenarios.server(bench, spec.qps, spec.seed, duration_s=spec.duration_s or bench.min_duration_s,
                                samples=spec.samples)
    if spec.scenario == "singlestream":
        return scenarios.single_stream(bench, spec.seed, samples=spec.samples or 100)
    if spec.scenario == "concurrency":
        samples = spec.samples or 10 * spec.concurrency
        return scenarios.closed_loop(spec.concurrency, spec.isl, spec.osl, samples)
    return read_trace(Path(spec.trace), limit=spec.samples)


def _plain(d: dict) -> dict:
    """JSON-safe values: numpy scalars to Python, NaN to None."""
    out = {}
    for k, v in d.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and v != v:
            v = None
        out[k] = v
    return out


__all__ = ["Deployment", "Result", "run", "run_spec"]
