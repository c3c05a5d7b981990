"""The Python API: `gpusim.run(...)` builds the workload, simulates it and summarises it."""

from __future__ import annotations

from gpusim.build import Setup, prepare
from gpusim.errors import InputError
from gpusim.simulation import Result, run_setup
from gpusim.specs.deployment import Deployment
from gpusim.specs.experiment import RunSpec


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


def run_spec(spec: RunSpec, source: str = "command line", workers: int = 1) -> Result:
    """Simulate the run that `spec` describes; `deployment: best` first finds (or recalls) the searched best
    deployment for the spec's scenario (`gpusim.best`), its contenders `workers` at a time."""
    best = spec.deployment == "best"
    if isinstance(spec.deployment, Deployment):  # hand-written in Python or inline in an experiment YAML
        spec = spec.model_copy(update={"deployment": _completed(spec, source)})
    setup = prepare(spec.hardware, spec.benchmark, spec.systems, None if best else spec.deployment, source,
                    spec.oversubscription, spec.model, spec.timing, scenario=spec.scenario)
    if best:
        setup = setup.with_deployment(best_deployment(setup, spec.scenario, spec.seed, source, workers))
    if spec.qps == "peak":
        return _at_peak(setup, spec, source)
    return run_setup(setup, spec, lambda: setup.expected_qps(spec.seed))


def _at_peak(setup: Setup, spec: RunSpec, source: str) -> Result:
    """The run at the deployment's peak valid QPS (LoadGen's bisection, confirmed at the run's full length)."""
    from gpusim.loadgen.rules import SERVER_LIKE
    from gpusim.search import peak_qps

    if spec.scenario not in SERVER_LIKE:
        raise InputError(source, "qps", f"peak is searched for server or interactive, not {spec.scenario}")
    peak = peak_qps(setup, spec.scenario, spec.duration_s, spec.seed)
    if peak.search.peak <= 0:
        raise InputError(source, "qps", f"no QPS of {setup.deployment.name} passes the {spec.scenario} limits")
    result = peak.trial.result
    result.summary.update(target_qps=peak.search.peak, peak_qps=peak.search.peak)
    return result


def _completed(spec: RunSpec, source: str) -> Deployment:
    from gpusim.build import default_for
    from gpusim.deploy import complete
    from gpusim.items import load_workload_model
    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.hardware import load_hardware

    bench = load_benchmark(spec.benchmark)
    model = load_workload_model(bench, spec.model)
    default = default_for(load_hardware(spec.hardware, spec.systems), bench, model, spec.scenario)
    return complete(spec.deployment, default, source)


def best_deployment(setup: Setup, scenario: str, seed: int = 0, source: str = "command line",
                    workers: int = 1) -> Deployment:
    """The search's best deployment for `setup`'s question in `scenario` (cached on disk, `gpusim.best`)."""
    from gpusim.best import find_best
    from gpusim.loadgen.rules import SERVER_LIKE

    if scenario not in ("offline", *SERVER_LIKE):
        raise InputError(source, "deployment", f"best is searched for an MLPerf scenario, not {scenario}; valid: "
                         "offline, server or interactive, or a deployment file")
    return find_best(setup, scenario, seed=seed, workers=workers)[0].deployment


__all__ = ["Deployment", "Result", "run", "run_spec"]
