"""One simulated run of a prepared setup: its workload, the simulation, and the JSON summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from gpusim import run_length
from gpusim.analysis.activity import timeline_frame, typical_steps
from gpusim.analysis.energy import energy_and_cost
from gpusim.analysis.sessions import session_summary, until_steady
from gpusim.analysis.steady import TokenCount, started_share, steady_summary
from gpusim.build import Setup
from gpusim.deploy import deployment_origin
from gpusim.loadgen import rules, scenarios
from gpusim.loadgen.agentic import agentic_workload, session_workload
from gpusim.loadgen.metrics import SERVER_LIKE, expected_completed_rate, summarize
from gpusim.loadgen.result import result_fields
from gpusim.loadgen.traces import read_trace
from gpusim.loadgen.workload import Workload
from gpusim.parallel import CAN_FORK, in_forked_copy
from gpusim.perf.step import StepCostModel
from gpusim.perf.table_step import TableTimer
from gpusim.sim.cluster import Cluster, SimStats
from gpusim.sim.records import Records
from gpusim.specs.benchmark import BenchmarkSpec, LatencyLimits
from gpusim.specs.experiment import RunSpec


@dataclass
class Result:
    """A finished run: the JSON summary, one row per request, and engine counters."""

    summary: dict
    requests: pd.DataFrame
    stats: SimStats
    timeline: pd.DataFrame | None = None
    """Engine activity binned over simulated time (gpusim.analysis.activity)."""
    steps: dict = field(default_factory=dict)
    """Where the time of a typical decode step and prefill chunk goes (gpusim.analysis.activity)."""


@dataclass
class InvalidStop:
    """A stop rule for runs judged for their verdict alone (the peak-QPS search): a Server-like run ends as
    soon as more of its requests are past the TTFT (or end-to-end) limit, or have completed over the TPOT
    limit, than early stopping allows for its query count (`rules.max_overlatency`), and it has run long
    enough to say what it served (twice `warm_s`); no later event can make it VALID, and an overloaded run
    spends most of its simulated time after that point."""

    limits: LatencyLimits
    allowed: int
    every_s: float
    """How often it is asked, in simulated seconds: twice the TTFT limit, at most ~240 times a run."""
    warm_s: float
    """A request's latency at the limits (TTFT + mean output × TPOT): the engine has reached its operating point
    after about this long, and the served rate means something from there on."""
    overlatency: dict[str, int] = field(default_factory=dict)
    """Requests past each limit (TTFT, TPOT) when last asked."""
    produced: list[tuple[float, float]] = field(default_factory=list)
    """(time, output tokens produced by then) at each ask."""

    @classmethod
    def for_run(cls, bench: BenchmarkSpec, scenario: str, workload: Workload) -> InvalidStop | None:
        limits = bench.limits(scenario) if scenario in SERVER_LIKE else None
        first = limits and min(limits.ttft_s, limits.latency_s or float("inf"))  # the earliest a request can fail
        if first is None or not first < float("inf") or not len(workload):
            return None
        osl = float(np.mean(workload.output_tokens))
        per_token = limits.tpot_s if limits.tpot_s < float("inf") else 0.0
        ttft = limits.ttft_s if limits.ttft_s < float("inf") else 0.0
        return cls(limits, rules.max_overlatency(len(workload)),
                   max(2 * first, float(workload.arrival_s.max()) / 240),
                   max(ttft + osl * per_token, limits.latency_s or 0.0))

    def __call__(self, records: Records, now_s: float) -> bool:
        self.produced.append((now_s, records.produced_tokens))
        if self.limits.ttft_s < float("inf"):
            self.overlatency["TTFT"] = rules.ttft_overlatency(records.scheduled_s, records.first_token_s, now_s,
                                                              self.limits.ttft_s)
        if self.limits.latency_s is not None:  # end-to-end (use_token_latencies = 0): past it once still running
            self.overlatency["latency"] = rules.ttft_overlatency(records.scheduled_s, records.completion_s, now_s,
                                                                 self.limits.latency_s)
        if self.limits.tpot_s < float("inf"):
            self.overlatency["TPOT"] = rules.tpot_overlatency(records.first_token_s, records.completion_s,
                                                              records.output_tokens, self.limits.tpot_s)
        # not before the served rate means something (`served_tokens_per_s`): a doomed run still says what it served
        return max(self.overlatency.values()) > self.allowed and now_s >= 2 * self.warm_s

    def served_tokens_per_s(self) -> float | None:
        """The output rate over the second half of the run so far, what an overloaded engine sustains; None
        when that half began before the engine was warm (`warm_s`)."""
        (t0, n0), (t1, n1) = self.produced[(len(self.produced) - 1) // 2], self.produced[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 and t0 >= self.warm_s else None


def run_setup(setup: Setup, spec: RunSpec, expected_qps: Callable[[], float], stop_when_invalid: bool = False
              ) -> Result:
    """Simulate `spec`'s workload on a prepared setup (searches reuse one setup's step-time cache); a
    SingleStream run is sized by the latency of one request (`Setup.single_stream_qps`). With
    `stop_when_invalid` a Server-like run ends once it can only be INVALID (`InvalidStop`); its summary's
    `stopped` then says when, how many requests were past the TTFT limit and when its last query arrives."""
    if spec.scenario == "singlestream":  # one request in flight: sized by the latency of one, not a full batch
        expected_qps = partial(setup.single_stream_qps, spec.seed)
    if spec.scenario == "offline" and spec.run_length == "converged":
        return converged_offline_run(setup, spec, offline_samples(spec, setup.bench, expected_qps))
    if spec.scenario in SERVER_LIKE and spec.run_length == "converged" and spec.samples is None:
        return converged_server_run(setup, spec, stop_when_invalid)
    if spec.scenario == "sessions" and spec.run_length == "converged" and spec.duration_s is None:
        return steady_sessions_run(setup, spec, expected_qps)
    return whole_run(setup, spec, expected_qps, stop_when_invalid)


def steady_sessions_run(setup: Setup, spec: RunSpec, expected_qps: Callable[[], float]) -> Result:
    """Agent sessions started for the benchmark's duration and, where their load had not levelled off, again for as
    long as that run says it takes (`analysis.sessions.until_steady`); the summary's `run_length` says which
    decided."""
    starts: list[float] = []

    def run(duration: float) -> tuple[dict, Result]:
        starts.append(duration)
        result = whole_run(setup, spec.model_copy(update={"duration_s": duration}), expected_qps, False)
        return result.summary, result

    summary, result, tried = until_steady(run(setup.bench.min_duration_s), run)
    steady, duration = summary["sessions"]["steady"], starts[-1]
    said = (f"sessions started for {duration:,.0f} s, the load steady from {steady['warm_up_s']:,.0f} s"
            if steady["steady"] else f"sessions started for {duration:,.0f} s, the load not steady after "
            f"{tried} runs: its sessions lengthen with the run (overloaded)")
    n = result.summary["issued_requests"]
    result.summary["run_length"] = run_length.RunLength(said, n, n).as_dict()
    return result


def whole_run(setup: Setup, spec: RunSpec, expected_qps: Callable[[], float], stop_when_invalid: bool) -> Result:
    """Every request of `spec`'s workload simulated (`run_setup`)."""
    workload = build_workload(spec, setup.bench, expected_qps)
    return run_workload(setup, spec, workload, _invalid_stop(setup, spec, workload, stop_when_invalid))


def _invalid_stop(setup: Setup, spec: RunSpec, workload: Workload, wanted: bool) -> InvalidStop | None:
    return InvalidStop.for_run(setup.bench, spec.scenario, workload) if wanted else None


def converged_server_run(setup: Setup, spec: RunSpec, stop_when_invalid: bool) -> Result:
    """A Server-like run at `spec.qps` for its duration, simulated only as far as its p99s and steady rate need
    (`run_length.converged_server`); the whole run when they need most of it. Where the whole run may be the
    answer, it is built first and each prefix is judged from it (`_prefix_from_whole`), so that it is not simulated
    again from the start when no prefix will do."""
    walls: list[float] = []
    duration = spec.duration_s or setup.bench.min_duration_s
    whole = _whole_in_waiting(setup, spec, duration, stop_when_invalid)

    def prefix(n: int) -> tuple[pd.DataFrame, TokenCount, bool, tuple]:
        workload = scenarios.server(setup.bench, spec.qps, spec.seed, samples=n)
        stop = _invalid_stop(setup, spec, workload, stop_when_invalid)
        judged = _prefix_from_whole(whole[1], n) if whole is not None else None
        records, stats, wall = judged if judged is not None else setup.simulate(workload, stop)
        walls.append(wall)
        return records, _produced(stats, records), stats.stopped_s is not None, (workload, records, stats, stop)

    found = run_length.converged_server(setup.bench, spec.qps, duration, spec.seed, prefix)
    if found is None:  # the whole run; where it was built first, it goes on from where the last prefix left it
        result = (run_workload(setup, spec, whole[0], cluster=whole[1]) if whole is not None
                  else whole_run(setup, spec, lambda: spec.qps, stop_when_invalid))
        result.summary["wall_s"] += sum(walls)
        return result
    (workload, records, stats, stop), how = found
    how.weigh(records)
    return result_of(setup, spec, workload, records, stats, sum(walls), stop, length=how)


def _whole_in_waiting(setup: Setup, spec: RunSpec, duration_s: float, stop_when_invalid: bool
                      ) -> tuple[Workload, Cluster] | None:
    """The whole run, built and not started, where a prefix may give way to it (more arrivals than a run simulates
    whole outright, at most `run_length.WHOLE_MOST`) and its prefixes can be judged from it (a run not stopped
    once doomed, on a system that forks: `parallel.in_forked_copy`); None elsewhere."""
    total = run_length.server_arrivals(setup.bench.server_min_query_count, spec.qps, duration_s)
    if stop_when_invalid or not CAN_FORK or not run_length.MAX_SIMULATED < total <= run_length.WHOLE_MOST:
        return None
    workload = build_workload(spec, setup.bench, lambda: spec.qps)
    return workload, setup.cluster(workload)


def _prefix_from_whole(cluster: Cluster, n: int) -> tuple[pd.DataFrame, SimStats, float] | None:
    """The run of the whole run's first `n` arrivals alone, as `Setup.simulate` gives it: `cluster` (the whole run)
    goes on to the `n`th arrival, which is where the two runs part, and a forked copy of it issues no more and
    drains; `cluster` stays paused there, ready to go on. None where the copy failed."""
    started = time.perf_counter()
    cluster.run_until_issued(n)

    def drained() -> tuple[pd.DataFrame, SimStats]:
        return cluster.drain().frame(), cluster.stats()

    judged = in_forked_copy(drained)
    return None if judged is None else (*judged, time.perf_counter() - started)


def converged_offline_run(setup: Setup, spec: RunSpec, samples: int) -> Result:
    """An Offline run of `samples`, simulated only as far as its steady rate needs (`run_length`)."""
    walls: list[float] = []

    def prefix(n: int) -> tuple[pd.DataFrame, TokenCount, tuple]:
        workload = scenarios.offline(setup.bench, spec.seed, samples=n)
        records, stats, wall = setup.simulate(workload)
        walls.append(wall)
        return records, _produced(stats, records), (workload, records, stats)

    found = run_length.converged_offline(setup.bench, samples, spec.seed, setup.in_flight(spec.seed), prefix)
    if found is None:
        workload = scenarios.offline(setup.bench, spec.seed, samples=samples)
        records, stats, wall = setup.simulate(workload)
        how = run_length.RunLength("every sample simulated (the steady rate needed most of the run)", samples,
                                   samples)
        return result_of(setup, spec, workload, records, stats, wall + sum(walls), length=how)
    (workload, records, stats), how = found
    return result_of(setup, spec, workload, records, stats, sum(walls), length=how)


def _produced(stats: SimStats, records: pd.DataFrame) -> TokenCount | None:
    """Output tokens the engine produced in an interval: its timeline's decode tokens and the first tokens."""
    if stats.timeline is None:
        return None
    timeline, first = stats.timeline, np.sort(records["first_token_s"].dropna().to_numpy(np.float64))

    def produced(start_s: float, end_s: float) -> float:
        firsts = np.searchsorted(first, end_s, side="right") - np.searchsorted(first, start_s, side="left")
        return timeline.output_tokens_between(start_s, end_s) + float(firsts)
    return produced


def run_workload(setup: Setup, spec: RunSpec, workload: Workload, stop: InvalidStop | None = None,
                 cluster: Cluster | None = None) -> Result:
    """Simulate `workload` on `setup` (on `cluster`, its cluster already built: `Setup.simulate`) and summarise it
    as a run of `spec`'s scenario (`run_setup` builds the workload from the spec; a replayed trace comes ready,
    `Workload.at_rate`)."""
    records, stats, wall = setup.simulate(workload, stop, cluster)
    return result_of(setup, spec, workload, records, stats, wall, stop)


def result_of(setup: Setup, spec: RunSpec, workload: Workload, records: pd.DataFrame, stats: SimStats, wall: float,
              stop: InvalidStop | None = None, length: run_length.RunLength | None = None) -> Result:
    """A simulated run's result: its summary (extended by a skipped middle, `length`) and what reports draw."""
    summary = summarize_run(spec, setup, workload, records, stats, wall, length)
    summary["stopped"] = None if stats.stopped_s is None else {
        "at_s": stats.stopped_s, "overlatency": stop.overlatency,
        "last_arrival_s": float(workload.arrival_s.max()), "served_tokens_per_s": stop.served_tokens_per_s(),
        "mean_output_tokens": float(np.mean(workload.output_tokens))}
    return Result(summary=summary, requests=records, stats=stats,
                  timeline=timeline_frame(stats, summary["kv_capacity_tokens_per_instance"], summary["simulated_s"]),
                  steps=typical_steps(setup.pools[-1], stats, workload))


def summarize_run(spec: RunSpec, setup: Setup, workload: Workload, records: pd.DataFrame, stats: SimStats,
                  wall: float, length: run_length.RunLength | None = None) -> dict:
    """The JSON summary of a finished run; an Offline run whose middle was skipped (`length`) reports the LoadGen
    figures of the whole run and says what it simulated (`run_length`)."""
    hw, dep, bench = setup.hardware, setup.deployment, setup.bench
    summary = {
        "hardware": hw.id,
        "systems": hw.systems,
        "num_gpus": setup.num_gpus,
        "hardware_gpus": hw.num_gpus,
        "benchmark": bench.id,
        "model": setup.model.id,
        "scenario": spec.scenario,
        "target_qps": spec.qps,
        "deployment": dep.model_dump(),
        "deployment_origin": deployment_origin(spec, hw, setup.model),
        "instances": stats.instances,
        "pools": [{"role": p.role, "instances": p.count, "gpus_per_instance": p.deployment.gpus_per_instance,
                   "kv_capacity_tokens": p.kv_capacity_tokens} for p in setup.pools],
        "kv_capacity_tokens_per_instance": setup.pools[-1].kv_capacity_tokens,
        **summarize(records, spec.scenario, bench.limits(spec.scenario), setup.num_gpus),
        **steady_summary(records, spec.scenario, setup.num_gpus, stats.instances, stats.instance_gpus,
                         _produced(stats, records)),
        "issued_requests": len(workload),
        "preemptions": int(records["preemptions"].sum()),
        "preemptions_per_request": float(records["preemptions"].sum() / max(len(records), 1)),
        "kv_transfer_p50_s": float(records["kv_transfer_s"].median()) if dep.mode == "disaggregated" else None,
        "prefix_hit_rate": stats.prefix_hit_rate,
        "sessions": None if workload.session is None else session_summary(
            records, workload.session, hw.systems, hw.system.power_kw.value, stats.kv_tiers),
        "seed": spec.seed,
        "timing": setup.timing,
        "kernel_sources": {p.role: p.cost.timer.sources for p in setup.pools
                           if isinstance(p.cost, StepCostModel) and isinstance(p.cost.timer, TableTimer)},
        "wall_s": wall,
        "run_length": run_length.RunLength("every request simulated", len(workload), len(workload)).as_dict(),
    }
    busy = list(stats.busy_s)
    skipped = length is not None and length.skipped_requests > 0
    if length is not None:
        length.extend(summary, busy)
        summary.update(issued_requests=length.issued_requests, run_length=length.as_dict())
    summary.update(expected_rate_fields(records, spec.scenario, summary, length.skipped_s if skipped else 0.0))
    summary.update(conformance(records, setup, spec.scenario, summary["issued_requests"],
                               summary["simulated_s"] if skipped else None))
    summary.update(result_fields(bench, spec.scenario, summary, records))
    summary.update(energy_and_cost(summary, hw, replace(stats, busy_s=busy),
                                   spec.costs and spec.costs.model_dump(exclude_none=True)))
    return _plain(summary)


def expected_rate_fields(records: pd.DataFrame, scenario: str, summary: dict, shift_s: float) -> dict:
    """A Server-like run's LoadGen tokens/s in expectation over its last-scheduled query's draw, per GPU, and the
    range that draw spans (`metrics.expected_completed_rate`); None for other scenarios."""
    got = expected_completed_rate(records, summary["output_tokens"], shift_s) if scenario in SERVER_LIKE else None
    if got is None:
        return {"expected_output_tokens_per_s": None, "expected_output_tokens_per_s_per_gpu": None,
                "output_tokens_per_s_draw_range": None}
    mean, low, high = got
    return {"expected_output_tokens_per_s": mean, "expected_output_tokens_per_s_per_gpu": mean / summary["num_gpus"],
            "output_tokens_per_s_draw_range": [low, high]}


OVERLOADED_SHARE = 0.9
"""A Server-like run is overloaded when fewer than this share of the requests that arrived in the second half of
its arrivals got their first token by then (the queue grows without bound), or, in a run that is not VALID, when
its arrival rate exceeds the deployment's steady-state capacity (the cost model's rate at a full batch,
`Setup.expected_qps`): a run too short to show its queue growing. A VALID run kept up with its arrivals for a
conformant length whatever that estimate says (Helios MI455X GPT-OSS-120B at its searched 3,353 QPS, estimate
2,977)."""


def conformance(records: pd.DataFrame, setup: Setup, scenario: str, issued: int, duration_s: float | None = None
                ) -> dict:
    """What a run can and cannot claim by LoadGen's rules: `conformant` (min duration and query count met,
    the reasons when not), `latency_met` (the p99 limits, all a short run can judge), `valid` (the whole
    verdict: never true for a run that is not conformant) and, for Server-like runs, whether the offered
    load exceeds what the deployment serves (`overloaded`, with the measured `started_share` and the
    analytic `capacity_qps_estimate`). Every run carries the same keys (a sweep's table has one schema);
    what a scenario cannot judge is None."""
    out: dict = {"conformant": None, "conformance_reasons": [], "latency_met": None, "started_share": None,
                 "capacity_qps_estimate": None, "overloaded": None}
    if scenario not in ("offline", *SERVER_LIKE):
        return out
    checks = rules.check(records, setup.bench, scenario, issued)
    if duration_s is not None:  # an Offline run whose middle was skipped (`run_length`): the whole run's
        checks = replace(checks, duration_s=duration_s, queries_issued=issued)
    reasons = [r for r in checks.reasons if r.startswith(("min duration", "min queries"))]
    out.update(conformant=not reasons, conformance_reasons=reasons)
    if scenario in SERVER_LIKE:
        share, capacity = started_share(records, scenario), setup.expected_qps()
        offered = (len(records) - 1) / float(records["scheduled_s"].max()) if len(records) > 1 else 0.0
        out.update(latency_met=checks.perf_constraints_met, valid=checks.valid,
                   invalid_reason=checks.reason, started_share=share, capacity_qps_estimate=capacity,
                   overloaded=(share is not None and share < OVERLOADED_SHARE)
                   or (offered > capacity and not checks.valid))
    return out


def offline_samples(spec: RunSpec, bench: BenchmarkSpec, expected_qps: Callable[[], float]) -> int:
    """An Offline run's samples: `spec.samples`, else LoadGen's count for its min duration (`build_workload`)."""
    return spec.samples or scenarios.offline_sample_count(bench, expected_qps(),
                                                          spec.duration_s or rules.SUBMISSION_DURATION_S)


def build_workload(spec: RunSpec, bench: BenchmarkSpec, expected_qps: Callable[[], float]) -> Workload:
    """The requests a scenario issues. Offline is sized from the expected QPS as LoadGen sizes it for a min
    duration: `spec.duration_s`, else as long as submitters run (`rules.SUBMISSION_DURATION_S`, as `gpusim
    mlperf` does), so the drain of the last long generations weighs in a run as it does in a submission."""
    if spec.scenario == "offline":
        return scenarios.offline(bench, spec.seed, samples=offline_samples(spec, bench, expected_qps))
    if spec.scenario in ("server", "interactive"):
        return scenarios.server(bench, spec.qps, spec.seed, duration_s=spec.duration_s or bench.min_duration_s,
                                samples=spec.samples)
    if spec.scenario == "singlestream":
        duration = spec.duration_s or bench.min_duration_s
        samples = spec.samples or scenarios.single_stream_count(expected_qps(), duration)
        if bench.agentic is not None:  # turns of agent sessions, one at a time
            return agentic_workload(bench, spec.seed, samples)
        return scenarios.single_stream(bench, spec.seed, samples=samples)
    if spec.scenario == "concurrency":
        samples = spec.samples or 10 * spec.concurrency
        return scenarios.closed_loop(spec.concurrency, spec.isl, spec.osl, samples)
    if spec.scenario == "sessions":
        return session_workload(bench, spec.session_rate, spec.duration_s or bench.min_duration_s, spec.seed)
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


__all__ = ["InvalidStop", "Result", "build_workload", "conformance", "run_setup", "summarize_run"]
