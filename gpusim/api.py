"""The Python API: `gpusim.run(...)` builds the workload, simulates it and summarises it; `gpusim.mlperf(...)`
reports what an MLPerf submission would, and `gpusim.search(...)` finds the best deployment for an MLPerf
question. Each takes its options as keywords, checked by the schema it names (a misspelt one is an InputError
that lists the valid ones)."""

from __future__ import annotations

from gpusim.best import Found
from gpusim.build import Setup, prepare
from gpusim.errors import InputError
from gpusim.simulation import Result, run_setup
from gpusim.specs.deployment import AnyDeployment, Deployment, DisaggregatedDeployment
from gpusim.specs.experiment import RunSpec
from gpusim.specs.loading import validate
from gpusim.submission import Log, MlperfRun, SearchRun, Submission, best_for, mlperf_result


def run(
    hardware: str = "gb300-nvl72",
    benchmark: str = "deepseek-r1",
    scenario: str = "offline",
    **options: object,
) -> Result:
    """Simulate one run. Options are the fields of `RunSpec` (qps, systems, deployment, seed, …)."""
    spec = validate(RunSpec, {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, **options},
                    "gpusim.run")
    return run_spec(spec)


def run_spec(spec: RunSpec, source: str = "command line", workers: int = 1) -> Result:
    """Simulate the run that `spec` describes (`setup_for`, `run_setup_spec`)."""
    return run_setup_spec(setup_for(spec, source, workers), spec, source)


def setup_for(spec: RunSpec, source: str = "command line", workers: int = 1) -> Setup:
    """The setup `spec` runs; `deployment: best` first finds (or recalls) the searched best deployment for the
    spec's scenario (`gpusim.best`), its contenders `workers` at a time."""
    best = spec.deployment == "best"
    # hand-written in Python or inline in an experiment YAML
    if isinstance(spec.deployment, Deployment | DisaggregatedDeployment):
        spec = spec.model_copy(update={"deployment": _completed(spec, source)})
    setup = prepare(spec.hardware, spec.benchmark, spec.systems, None if best else spec.deployment, source,
                    spec.oversubscription, spec.model, spec.timing, scenario=spec.scenario, software=spec.software)
    if spec.scenario in ("server", "interactive"):
        setup.bench.require_limits(spec.scenario, source)
    if best:
        setup = setup.with_deployment(best_deployment(setup, spec.scenario, spec.seed, source, workers))
    return setup


def run_setup_spec(setup: Setup, spec: RunSpec, source: str = "command line") -> Result:
    """Simulate `setup` with `spec`'s workload and run length (`qps: peak`: at its peak valid QPS)."""
    if spec.qps == "peak":
        return _at_peak(setup, spec, source)
    return run_setup(setup, spec, lambda: setup.expected_qps(spec.seed))


def mlperf(hardware: str, benchmark: str, scenario: str, log: Log | None = None, **options: object) -> Submission:
    """What an MLPerf submission of `benchmark` in `scenario` on `hardware` would report, judged by LoadGen's
    rules, as `gpusim mlperf` reports it (`Submission.summary` is its `--json` object). Options are the fields
    of `gpusim.submission.MlperfRun`: systems, deployment (a YAML path, `default` or `best`), search, qps,
    duration_s (2,400 s by default, as submitters run), seed, timing, workers (1 by default), use_cache,
    loadgen, min_duration_s, loadgen_dir. Without a deployment or a QPS the best deployment is searched
    (cached). `log` receives progress lines."""
    spec = validate(MlperfRun, {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, **options},
                    "gpusim.mlperf")
    return Submission(*mlperf_result(spec, log or (lambda _: None)))


def search(hardware: str, benchmark: str, scenario: str, log: Log | None = None, **options: object) -> Found:
    """The best deployment for an MLPerf question (`Found.deployment`, with its peak QPS or tokens/s and the
    ranked contenders), as `gpusim mlperf --search` finds it: cached on disk, or the shipped searched default
    re-measured when it answers the question. Options are the fields of `gpusim.submission.SearchRun`:
    systems, duration_s, seed, timing, workers (1 by default), use_cache. `log` receives progress lines."""
    spec = validate(SearchRun, {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, **options},
                    "gpusim.search")
    return best_for(spec, log or (lambda _: None))


def _at_peak(setup: Setup, spec: RunSpec, source: str) -> Result:
    """The run at the deployment's peak valid QPS (`search.peak_qps`), searched at the run's length: `duration_s`,
    else as long as submitters run (`rules.SUBMISSION_DURATION_S`), as `gpusim mlperf` finds it. MLPerf's 600 s
    minimum ends DeepSeek-R1's runs before their batch turns over: GB300 NVL72's TP4/EP4 default passes at 274
    QPS there and at 186 over 2,400 s."""
    from gpusim.defaults import replica_peak
    from gpusim.loadgen.rules import SERVER_LIKE, SUBMISSION_DURATION_S
    from gpusim.search import peak_qps

    if spec.scenario not in SERVER_LIKE:
        raise InputError(source, "qps", f"peak is searched for server or interactive, not {spec.scenario}")
    length = spec.duration_s or SUBMISSION_DURATION_S
    hint = replica_peak(setup.hardware, setup.model.id, setup.bench.id, spec.scenario, setup.deployment, length,
                        spec.seed)
    peak = peak_qps(setup, spec.scenario, length, spec.seed, hint=hint)
    if peak.search.peak <= 0:
        raise InputError(source, "qps", f"no QPS of {setup.deployment.name} passes the {spec.scenario} limits")
    result = peak.trial.result
    result.summary.update(target_qps=peak.search.peak, peak_qps=peak.search.peak, peak_search_s=length,
                          peak_short=length < SUBMISSION_DURATION_S)
    return result


def _completed(spec: RunSpec, source: str) -> AnyDeployment:
    from gpusim.deploy import complete, spec_default

    return complete(spec.deployment, spec_default(spec), source)


def best_deployment(setup: Setup, scenario: str, seed: int = 0, source: str = "command line",
                    workers: int = 1) -> AnyDeployment:
    """The search's best deployment for `setup`'s question in `scenario` (cached on disk, `gpusim.best`)."""
    from gpusim.best import find_best
    from gpusim.loadgen.rules import SERVER_LIKE

    if scenario not in ("offline", *SERVER_LIKE):
        raise InputError(source, "deployment", f"best is searched for an MLPerf scenario, not {scenario}; valid: "
                         "offline, server or interactive, or a deployment file")
    return find_best(setup, scenario, seed=seed, workers=workers)[0].deployment


__all__ = ["Deployment", "DisaggregatedDeployment", "Found", "Result", "Submission", "mlperf", "run", "run_spec",
           "search"]
