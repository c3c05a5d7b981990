"""The real MLPerf LoadGen (`mlcommons-loadgen`, optional extra `loadgen`) driving the simulated system.

LoadGen is the load generator and the judge; gpusim's engine is the SUT, advanced in real time: a
driver thread runs the SimPy events whose simulated time has come on the wall clock (simulated
time 0 = LoadGen's first issued query), injects each query LoadGen issues at the current time, and
reports `FirstTokenComplete` and `QuerySamplesComplete` (with the output token count) as soon as
the simulated first token or completion has happened. Sample `i` of LoadGen's QSL is dataset sample
`i` of `dataset_lengths(bench, seed)`. The same run is then summarised by gpusim's own metrics and
rules, so the two judges can be compared on identical events.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpusim.errors import InputError
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.metrics import loadgen_rates, summarize
from gpusim.loadgen.rules import Checks, check
from gpusim.loadgen.workload import Workload

_POLL_S = 0.02
"""Longest the driver sleeps without looking for new queries."""


def available() -> bool:
    """Whether `mlperf_loadgen` is importable."""
    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class LoadgenRun:
    """One LoadGen-driven run: LoadGen's own figures and gpusim's figures for the same events."""

    loadgen: dict
    """tokens_per_s, ttft_p99_s, tpot_p99_s, valid (parsed from LoadGen's mlperf_log_summary.txt)."""
    summary: dict
    """gpusim's summary of the run (metrics.summarize), `valid`/`invalid_reason` from the rules, and
    `result_tokens_per_s`/`result_samples_per_s` as LoadGen defines them (loadgen.metrics.loadgen_rates)."""
    checks: Checks
    requests: pd.DataFrame
    log_dir: Path


class RealtimeSUT:
    """The simulated instances of one deployment, advanced on the wall clock by a driver thread."""

    def __init__(self, setup, seed: int, capacity: int) -> None:
        self.isl, self.osl = dataset_lengths(setup.bench, seed)
        ones = np.ones(capacity, dtype=np.int64)  # a placeholder: each query's lengths are set as LoadGen issues it
        self.cluster = setup.cluster(Workload.create(np.zeros(capacity), ones, ones, name="loadgen"))
        self.env, self.records = self.cluster.env, self.cluster.records
        self.cluster.completion_hooks.append(lambda req: self.done.append(req.id))
        self.cond = threading.Condition()
        self.incoming: list[tuple[float, int, int]] = []
        """(wall seconds since t0, LoadGen response id, sample index) of queries not yet injected."""
        self.ids: list[int] = []
        """LoadGen response id of each gpusim request."""
        self.waiting_first: set[int] = set()
        self.done: list[int] = []
        self.t0: float | None = None
        self.stop = False
        self.error: BaseException | None = None
        self._buf = np.zeros(1, dtype=np.int32)
        self.thread = threading.Thread(target=self._drive, daemon=True)

    # ---- LoadGen callbacks (LoadGen's threads) --------------------------------------------
    def issue_queries(self, samples) -> None:
        with self.cond:
            now = time.perf_counter()
            if self.t0 is None:
                self.t0 = now
            self.incoming.extend((now - self.t0, s.id, s.index) for s in samples)
            self.cond.notify()

    def flush_queries(self) -> None:
        """Nothing is batched on the SUT side."""

    # ---- the driver thread ----------------------------------------------------------------
    def _drive(self) -> None:
        try:
            while True:
                with self.cond:
                    if self.stop:
                        return
                    wait = _POLL_S if self.t0 is None else self._until_next_event()
                    if not self.incoming and wait > 0:
                        self.cond.wait(wait)
                    batch, self.incoming = self.incoming, []
                    if self.t0 is None:
                        continue
                    now = time.perf_counter() - self.t0  # under the lock: later arrivals are later than now
                for at, rid, index in batch:  # each query enters the simulation at its own arrival time
                    self._advance(at)
                    self._issue(rid, index)
                self._advance(now)
                self._report()
        except BaseException as exc:  # surfaced in run_loadgen
            self.error = exc
            self._report_everything()

    def _until_next_event(self) -> float:
        nxt = self.env.peek()
        if nxt == float("inf"):
            return _POLL_S
        return min(_POLL_S, max(0.0, nxt - (time.perf_counter() - self.t0)))

    def _advance(self, now: float) -> None:
        """Run the events due by `now` (simulated seconds = wall seconds since t0), and set the clock to it."""
        while self.env.peek() <= now:
            self.env.step()
        if now > self.env.now:
            self.env.run(until=now)

    def _issue(self, response_id: int, index: int) -> None:
        if len(self.ids) >= len(self.records.scheduled_s):
            raise InputError("loadgen", "capacity", f"more than {len(self.ids)} queries issued; raise the capacity")
        self.ids.append(response_id)
        self.waiting_first.add(self.cluster.issue_request(int(self.isl[index]), int(self.osl[index])))

    def _report(self) -> None:
        import mlperf_loadgen as lg

        first = [i for i in self.waiting_first if not np.isnan(self.records.first_token_s[i])]
        if first:
            self.waiting_first.difference_update(first)
            lg.FirstTokenComplete([self._response(i, 1) for i in first])
        if self.done:
            done, self.done = self.done, []
            lg.QuerySamplesComplete([self._response(i, int(self.records.output_tokens[i])) for i in done])

    def _report_everything(self) -> None:
        """After a failure: answer every outstanding query so LoadGen can finish."""
        import mlperf_loadgen as lg

        with self.cond:
            pending = [rid for _, rid, _ in self.incoming]
            self.incoming = []
        ids = [self.ids[i] for i in range(len(self.ids)) if np.isnan(self.records.completion_s[i])] + pending
        if ids:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(r, self._buf.ctypes.data, 4, 2) for r in ids])

    def _response(self, i: int, tokens: int):
        import mlperf_loadgen as lg

        return lg.QuerySampleResponse(self.ids[i], self._buf.ctypes.data, self._buf.nbytes, tokens)

    def frame(self) -> pd.DataFrame:
        return self.records.frame().iloc[: len(self.ids)]


def run_loadgen(setup, scenario: str, out_dir: Path, qps: float | None = None, min_duration_s: float = 600.0,
                seed: int = 0, offline_samples: int | None = None) -> LoadgenRun:
    """Run LoadGen (PerformanceOnly) against the simulated system in real time; logs go to `out_dir`.

    Server/Interactive: Poisson at `qps` for `min_duration_s` of real time. Offline: one query of
    `offline_samples` (default: LoadGen's sizing from `qps` as the expected QPS).
    """
    if not available():
        raise InputError("command line", "loadgen", "mlperf_loadgen is not installed; "
                         "pip install 'gpusim[loadgen]' (mlcommons-loadgen)")
    import mlperf_loadgen as lg

    bench = setup.bench
    server = scenario in ("server", "interactive")
    if qps is None or qps <= 0:
        raise InputError("command line", "qps", "the LoadGen run needs a target QPS > 0")
    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = int(min_duration_s * 1000)
    settings.performance_sample_count_override = bench.dataset_samples
    # equal-issue mode rounds the query count up to whole permutations of the dataset: conformant runs only
    settings.sample_concatenate_permutation = min_duration_s >= bench.min_duration_s
    settings.use_token_latencies = True
    if server:
        limits = bench.limits(scenario)
        settings.scenario = lg.TestScenario.Server
        settings.server_target_qps = qps
        settings.server_target_latency_percentile = 0.99
        if limits.latency_s is not None:  # use_token_latencies = 0: LoadGen judges the end-to-end latency
            settings.server_target_latency_ns = int(limits.latency_s * 1e9)
        else:
            settings.server_target_latency_ns = 0
            settings.ttft_latency = int(limits.ttft_s * 1e9)
            settings.tpot_latency = int(limits.tpot_s * 1e9)
        settings.min_query_count = bench.server_min_query_count
        capacity = int(qps * min_duration_s * 2 + 10 * np.sqrt(qps * min_duration_s) + 1000)
    else:
        settings.scenario = lg.TestScenario.Offline
        settings.offline_expected_qps = qps
        settings.min_query_count = offline_samples or bench.offline_min_query_count
        if offline_samples:
            settings.max_query_count = offline_samples
        capacity = max(settings.min_query_count, int(1.1 * min_duration_s * qps) + 1) + 1
    out_dir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(out_dir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    sut_state = RealtimeSUT(setup, seed, capacity)
    sut = lg.ConstructSUT(sut_state.issue_queries, sut_state.flush_queries)
    n = bench.dataset_samples
    qsl = lg.ConstructQSL(n, n, lambda _: None, lambda _: None)
    sut_state.thread.start()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # LoadGen's threads need the GIL promptly to issue queries on time
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log)
    finally:
        sys.setswitchinterval(switch)
        with sut_state.cond:
            sut_state.stop = True
            sut_state.cond.notify()
        sut_state.thread.join()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if sut_state.error is not None:
        raise sut_state.error
    frame = sut_state.frame()
    num_gpus = setup.num_gpus
    checks = check(frame, bench, scenario, len(sut_state.ids), min_duration_s)
    summary = summarize(frame, scenario, bench.limits(scenario), num_gpus)
    samples_per_s, tokens_per_s = loadgen_rates(frame, scenario)
    summary.update(valid=checks.valid, invalid_reason=checks.reason, issued_requests=len(sut_state.ids),
                   result_samples_per_s=samples_per_s, result_tokens_per_s=tokens_per_s)
    return LoadgenRun(parse_summary(out_dir / "mlperf_log_summary.txt"), summary, checks, frame, out_dir)


_FIELDS = {
    "tokens_per_s": r"^(?:Completed tokens per second|Tokens per second)\s*:\s*([\d.eE+-]+)",
    "samples_per_s": r"^(?:Completed samples per second|Samples per second)\s*:\s*([\d.eE+-]+)",
    "ttft_p99_s": r"^99\.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
    "tpot_p99_s": r"^99\.00 percentile time to output token \(ns\)\s*:\s*(\d+)",
}


def parse_summary(path: Path) -> dict:
    """tokens_per_s, samples_per_s, ttft_p99_s, tpot_p99_s and valid from LoadGen's summary file."""
    text = path.read_text()
    out: dict = {}
    for key, pattern in _FIELDS.items():
        m = re.search(pattern, text, re.MULTILINE)
        value = float(m.group(1)) if m else None
        out[key] = value / 1e9 if value is not None and key.endswith("_s") and "per_s" not in key else value
    m = re.search(r"^Result is\s*:\s*(\w+)", text, re.MULTILINE)
    out["valid"] = m is not None and m.group(1) == "VALID"
    return out
