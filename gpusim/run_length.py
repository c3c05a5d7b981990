"""How much of a run to simulate: until what it reports is known, then skip the rest of its stationary middle.

An Offline run issues every sample at once, and LoadGen reports all output tokens over the time to the last
completion: a warm-up while the batch fills, a long stationary middle where the queue feeds a full batch, and
a drain once the queue is empty. The middle is statistically the same from its first minute to its last, so a
run of N samples ends, in expectation, as a run of n < N samples does, later by the time the N - n extra samples
take at the steady rate. `converged_offline` simulates a prefix of n samples, grows it until its batch turned
over and the steady rate's 95% interval moves the reported figure by at most `TARGET_UNCERTAINTY`, and then
extends the prefix's summary by the skipped samples (`RunLength.extend`): their expected tokens (N - n times
the dataset's mean output length) at the steady rate, every instance busy as in the window. What decided the
length and the figure's uncertainty are in the summary (`run_length`); `run_length: full` simulates all N.

A Server (or Interactive) run is stationary in the same way once its batch has turned over: Poisson arrivals
at a fixed rate. A run of more than `MAX_SIMULATED` arrivals (a rack at a short-output benchmark's peak) is
simulated by `converged_server` as its first n of N arrivals (the same stream's), n grown until the p99 TTFT and
TPOT of the stationary requests are known to `LATENCY_TARGET` (batch means over `BATCHES` groups in arrival
order: the latencies of neighbouring requests move together, so the groups, not the requests, are the
independent samples) or n reaches `MAX_SIMULATED`; each stationary request then stands for
(N - warm-up) / (stationary) issued ones (`RunLength.weigh`): LoadGen's p99s and early-stopping counts of the
whole run, from the prefix. The skipped arrivals add their expected tokens and their (N - n) / QPS seconds of
arrivals, as above. A prefix that cannot turn stationary with enough left to skip gives way to the whole run, which
`gpusim.simulation` builds first where it can, judging each prefix from a forked copy of it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import TypeVar

import numpy as np
import pandas as pd

from gpusim.analysis.steady import WARMUP_QUANTILE, SteadyWindow, TokenCount, queue_empty_times, steady_window
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.metrics import WEIGHT_COLUMN, add_latency_columns, loadgen_percentile
from gpusim.specs.benchmark import BenchmarkSpec

TARGET_UNCERTAINTY = 0.01
"""The reported figure's relative 95% half-width that the skipped middle may add (±1%: about a full run's own
spread from seed to seed, 3,113-3,159 tokens/s/GPU over five seeds on 8x H200 Llama 2 70B)."""
FIRST_SHARE = 1 / 32
"""The first prefix: this share of the run's samples (75 of 2,400 s) ..."""
FIRST_BATCHES = 8
"""... and at least this many full batches (`in_flight` sequences): a run of a few batches is all warm-up and
drain (DeepSeek-R1 on a rack: 509,193 samples, 78,336 in flight)."""
MIN_SKIP_SHARE = 0.4
"""A prefix that would leave less than this share of the samples to skip is not worth it: simulate them all."""
BATCHES = 10
"""Sub-windows of the steady window whose rates give the interval (batch means)."""
T_975_9 = 2.262
"""Student's t for a two-sided 95% interval with BATCHES - 1 degrees of freedom."""
T_975_8 = 2.306
"""... and with BATCHES - 2 (a slope fitted to the groups)."""
TURNOVER_MARGIN = 1.3
"""A prefix too short to turn over is followed by one this much longer than the turn-over needs."""
LATENCY_TARGET = 0.03
"""A Server run's p99 TTFT and TPOT: relative 95% half-width at which they count as known. A full run's own spread
from seed to seed is wider: GB300 NVL72 DeepSeek-R1 at 170 QPS over 2,400 s, p99 TPOT 61-70 ms (5% standard
deviation) and TTFT 245-261 ms over five seeds. A Server run's tokens/s follows its arrivals, not its steady rate,
so the rate's interval is reported (`uncertainty`) but does not decide the length."""
STATIONARY_GAP = 0.01
"""A Server run is stationary once its requests in flight are within this share of their stationary count."""
MIN_GROUP_REQUESTS = 500
"""Stationary requests per group at least, so that each group's p99 is a tail and not its maximum."""
FIRST_SERVER_MOST = 250_000
"""A Server run's first prefix: `FIRST_SHARE` of its arrivals, at most this many (a rack at Llama 2's peak issues
23 million in 2,400 s; its batch is stationary within the first 100,000)."""
FORECAST_MARGIN = 2.0
"""A prefix forecasts when its run turns stationary low, its batch not yet full: GB300 NVL72 DeepSeek-R1 at 170
QPS, 424 s from its first 12,751 arrivals against 836 s from 191,052. A run the forecast times this says a prefix
could not skip `MIN_SKIP_SHARE` of is simulated whole (3 racks at 557 QPS: 1.34 million arrivals, 65 s)."""
WHOLE_MOST = 4_000_000
"""A Server run of at most this many arrivals is simulated whole when a prefix would not do (about two minutes and
1.6 GB); a longer one reports the prefix it has. Near the peak the whole run is the answer a prefix misses: GB300
NVL72 Llama 2 at its shipped peak of 4,011 QPS for 600 s (2.4 million arrivals) gave p99 TTFT 0.32 s (±16.5%)
from a million arrivals against 0.46 s whole (49 s wall)."""
MAX_SIMULATED = 1_000_000
"""A Server run of this many arrivals or fewer is simulated whole; a longer one simulates a prefix of at most this
many (Vera Rubin NVL72 Llama 2 at its peak: 1.25 million simulated of 23.4 million in 52 s and 0.63 GB) and
reports what it has with its uncertainty. Near its peak rate a rack's p99 TTFT climbs through bursts of queueing
rarer than a prefix sees: the same run's p99 TTFT came out at 0.11 s (±21%, `group_drift`) after 1 million
arrivals and at 0.56 s after 4 million, both within Llama 2's 2 s limit; the interval still understates there."""
T = TypeVar("T")


@dataclass(frozen=True)
class RunLength:
    """What a run simulated, what it skipped and how sure the reported figures are."""

    decided_by: str
    issued_requests: int
    simulated_requests: int
    skipped_requests: int = 0
    skipped_tokens: float = 0.0
    skipped_s: float = 0.0
    uncertainty: float = 0.0
    """Relative 95% half-width the skip adds to the reported tokens/s (0: every request simulated)."""
    latency_uncertainty: float = 0.0
    """Server-like runs: the larger relative 95% half-width of the p99 TTFT and TPOT (0: every request simulated)."""
    steady_from_s: float | None = None
    """Server-like runs: requests scheduled from here on stand for the skipped ones (`weigh`)."""

    def weigh(self, records: pd.DataFrame) -> None:
        """A Server prefix's `records` as the whole run's: each request scheduled in the stationary part gets the
        `WEIGHT_COLUMN` of the issued requests it stands for, the warm-up's count once."""
        if not self.skipped_requests or self.steady_from_s is None:
            return
        steady = records["scheduled_s"].to_numpy(np.float64) >= self.steady_from_s
        stationary = int(steady.sum())
        warm = len(records) - stationary
        records[WEIGHT_COLUMN] = np.where(steady, (self.issued_requests - warm) / max(stationary, 1), 1.0)

    def extend(self, summary: dict, busy_s: list[float]) -> None:
        """`summary` (the prefix's LoadGen fields) and the instances' `busy_s`, as the full run's: the skipped
        samples' tokens and time added, every instance busy at the window's fraction meanwhile."""
        if not self.skipped_requests:
            return
        rate = summary["output_tokens_per_s"]  # LoadGen's figure: Offline's last completion, Server's last-scheduled
        figure_s = (summary["output_tokens"] / rate if rate else summary["simulated_s"]) + self.skipped_s
        tokens = summary["output_tokens"] + self.skipped_tokens
        done = summary["completed_requests"] + self.skipped_requests
        summary.update(simulated_s=summary["simulated_s"] + self.skipped_s, output_tokens=round(tokens),
                       output_tokens_per_s=tokens / figure_s,
                       output_tokens_per_s_per_gpu=tokens / figure_s / summary["num_gpus"], completed_requests=done,
                       samples_per_s=done / figure_s)
        share = summary.get("steady_busy_fraction") or 1.0
        busy_s[:] = [b + self.skipped_s * share for b in busy_s]

    def as_dict(self) -> dict:
        return asdict(self)


def rate_interval(window: SteadyWindow, produced: TokenCount) -> float:
    """The steady rate's relative 95% half-width, from the rates of `BATCHES` equal sub-windows."""
    edges = np.linspace(window.start_s, window.end_s, BATCHES + 1)
    rates = np.array([produced(a, b) / (b - a) for a, b in itertools.pairwise(edges)])
    mean = float(rates.mean())
    return T_975_9 * float(rates.std(ddof=1)) / math.sqrt(BATCHES) / mean if mean > 0 else math.inf


def mean_output_tokens(bench: BenchmarkSpec, seed: int) -> float:
    """The dataset's mean output length: what a skipped sample produces in expectation."""
    return float(np.mean(dataset_lengths(bench, seed)[1]))


def converged_offline(bench: BenchmarkSpec, samples: int, seed: int, in_flight: int,
                      simulate: Callable[[int], tuple[pd.DataFrame, TokenCount, T]]) -> tuple[T, RunLength] | None:
    """The simulated prefix (`simulate(n)`: its records, the engine's token count and what the caller keeps) and
    how the rest of `samples` is skipped, `in_flight` sequences at a full batch; None when
    the whole run is what it takes. Each prefix that falls short tells how much longer the next must be: twice the
    p90 time in the engine for the batch to turn over, (uncertainty / target)^2 for the interval."""
    n = max(math.ceil(samples * FIRST_SHARE), FIRST_BATCHES * in_flight)
    while n <= samples * (1 - MIN_SKIP_SHARE):
        records, produced, result = simulate(n)
        window = steady_window(records, "offline", produced=produced)
        first = records["first_token_s"].to_numpy(np.float64)
        engine = records["completion_s"].to_numpy(np.float64) - first
        growth = TURNOVER_MARGIN * 2 * float(np.quantile(engine, WARMUP_QUANTILE)) / max(float(np.nanmax(first)),
                                                                                          1e-9)
        if window is not None and window.turned_over:
            how = skip(bench, seed, samples, records, window, rate_interval(window, produced))
            if how.uncertainty <= TARGET_UNCERTAINTY:
                return result, how
            growth = max(growth, (how.uncertainty / TARGET_UNCERTAINTY) ** 2)
        n = math.ceil(n * max(2.0, growth))
    return None


def skip(bench: BenchmarkSpec, seed: int, samples: int, records: pd.DataFrame, window: SteadyWindow, rel: float
         ) -> RunLength:
    """The skip of the samples after a prefix whose `records` had `window`'s steady rate, known to ±`rel`: their
    expected tokens at that rate, and the later end of the slowest instance. Each instance works through the
    requests it was given at t = 0, so when its queue empties wanders more the longer the run (its spread grows
    as the square root of the duration); the run ends with the slowest, the expected maximum of the instances'
    normal spread (Blom's approximation) above their mean."""
    n, end_s = len(records), float(np.nanmax(records["completion_s"]))
    tokens = (samples - n) * mean_output_tokens(bench, seed)
    seconds = tokens / window.tokens_per_s
    ends = queue_empty_times(records)
    if len(ends) > 1:
        k = len(ends)
        slowest = NormalDist().inv_cdf((k - 0.375) / (k + 0.25)) * float(np.std(ends, ddof=1))
        seconds += slowest * (math.sqrt((end_s + seconds) / end_s) - 1)
    uncertainty = rel * seconds / (end_s + seconds)
    return RunLength(f"steady rate converged (±{100 * rel:.1f}% over {window.seconds:,.0f} s)", samples, n,
                     samples - n, tokens, seconds, uncertainty)


def server_arrivals(min_count: int, qps: float, duration_s: float) -> int:
    """A Server run's expected arrivals: LoadGen schedules queries until one falls at or past `duration_s`."""
    return max(min_count, math.floor(qps * duration_s) + 1)


def p99_interval(records: pd.DataFrame, window: SteadyWindow) -> float:
    """The larger relative 95% half-width of the stationary requests' p99 TTFT and TPOT, from the p99s of
    `BATCHES` groups in arrival order (batch means); inf with fewer than `MIN_GROUP_REQUESTS` per group."""
    df = add_latency_columns(records)
    df = df[(df["scheduled_s"] >= window.start_s) & df["completion_s"].notna()].sort_values("scheduled_s")
    if len(df) < BATCHES * MIN_GROUP_REQUESTS:
        return math.inf
    widest = 0.0
    for col in ("ttft_s", "tpot_s"):
        values = df[col].to_numpy(np.float64)
        pooled = loadgen_percentile(values, 0.99)
        if not pooled > 0:
            continue
        groups = np.array([loadgen_percentile(g, 0.99) for g in np.array_split(values, BATCHES)])
        widest = max(widest, T_975_9 * float(np.std(groups, ddof=1)) / math.sqrt(BATCHES) / pooled,
                     group_drift(groups) / pooled)
    return widest


def group_drift(groups: np.ndarray) -> float:
    """How far the groups' values move from first to last along their least-squares line, where its slope is
    significant at 95% (else 0): a p99 still climbing is not known, however tight its batch means (GB300 NVL72
    Llama 2 at 4,011 QPS: group p99 TTFT 0.18 → 0.41 s over a million arrivals, batch means ±16.5%)."""
    k = np.arange(groups.size, dtype=np.float64)
    slope, intercept = np.polyfit(k, groups, 1)
    residual = groups - (slope * k + intercept)
    se = math.sqrt(float(residual @ residual) / (groups.size - 2) / float(((k - k.mean()) ** 2).sum()))
    return abs(float(slope)) * (groups.size - 1) if abs(slope) > T_975_8 * se else 0.0


def stationary_point(times: np.ndarray) -> float:
    """The t at which E[min(T, t)] reaches (1 - `STATIONARY_GAP`) · E[T] for the sample `times` of T."""
    t = np.sort(times[~np.isnan(times)])
    if not t.size:
        return math.inf
    n = t.size
    below = np.concatenate(([0.0], np.cumsum(t)[:-1]))  # Σ of the shorter times at each sorted t
    reached = (below + t * (n - np.arange(n))) / n  # E[min(T, t_k)]
    return float(t[min(int(np.searchsorted(reached, (1 - STATIONARY_GAP) * float(t.mean()))), n - 1)])


def stationary_from(records: pd.DataFrame) -> float:
    """When a Server run's requests in flight reach their stationary count to within `STATIONARY_GAP`: with
    arrivals at a constant rate since t0, those in flight at t0 + t number rate · E[min(T, t)] against rate · E[T]
    at stationarity (T: a request's time in the system, `stationary_point`). DeepSeek-R1's 20k-token tail keeps its
    batch growing for about as long as its slowest requests take, long after the p90 (`steady_window`'s turn-over)."""
    scheduled = records["scheduled_s"].to_numpy(np.float64)
    return float(scheduled.min()) + stationary_point(records["completion_s"].to_numpy(np.float64) - scheduled)


def stationary_forecast(bench: BenchmarkSpec, seed: int, records: pd.DataFrame) -> float:
    """`stationary_from`'s offset for the whole dataset's output lengths (a prefix holds few of its longest), at
    the prefix's seconds in the system per output token."""
    time = (records["completion_s"] - records["scheduled_s"]).sum() / max(float(records["output_tokens"].sum()), 1.0)
    return stationary_point(dataset_lengths(bench, seed)[1].astype(np.float64)) * float(time)


def converged_server(bench: BenchmarkSpec, qps: float, duration_s: float, seed: int,
                     simulate: Callable[[int], tuple[pd.DataFrame, TokenCount, bool, T]]) -> tuple[T, RunLength] | None:
    """The simulated prefix of a Server-like run (`simulate(n)`: its records, the engine's token count, whether it
    stopped once it could only be INVALID, and what the caller keeps) and how the rest of its arrivals is skipped;
    None when the whole run is what it takes: `MAX_SIMULATED` arrivals or fewer (a prefix's p99s miss the rare
    bursts of queueing that a longer run meets near its peak, and a peak search judges on them), or a run of at
    most `WHOLE_MOST` arrivals whose prefix would not turn stationary and converge with `MIN_SKIP_SHARE` of it
    left to skip. A stopped prefix is its own run (INVALID either way); a run too long to simulate whole
    reports its longest prefix, with what it lacked. The prefix's stationary part runs from `stationary_from`
    to its last arrival, and must be its second half at least."""
    total = server_arrivals(bench.server_min_query_count, qps, duration_s)
    if total <= MAX_SIMULATED:
        return None
    whole = total <= WHOLE_MOST  # the answer when a prefix would not skip enough
    n = max(min(math.ceil(total * FIRST_SHARE), FIRST_SERVER_MOST), 2 * BATCHES * MIN_GROUP_REQUESTS)
    while True:
        records, produced, stopped, result = simulate(n)
        if stopped:
            return result, RunLength("stopped once it could only be INVALID", n, n)
        start, end = stationary_from(records), float(records["scheduled_s"].max())
        offset = max(start - float(records["scheduled_s"].min()), stationary_forecast(bench, seed, records))
        growth = FORECAST_MARGIN * TURNOVER_MARGIN * 2 * offset / max(end, 1e-9)
        if 2 * start <= end:
            window = SteadyWindow(start, end, produced(start, end) if produced else 0.0, 1.0)
            rate, latency = (rate_interval(window, produced) if produced else math.inf), p99_interval(records, window)
            if latency <= LATENCY_TARGET or n >= MAX_SIMULATED:
                return result, server_skip(bench, seed, total, qps, records, window, rate, latency)
            growth = max(growth, (min(latency, 1e3) / LATENCY_TARGET) ** 2)
        if whole and (n >= MAX_SIMULATED or n * growth > total * (1 - MIN_SKIP_SHARE)):
            return None
        if n >= MAX_SIMULATED:
            return result, RunLength(f"the first {n:,} arrivals: the batch had not reached its stationary size", n, n)
        n = min(math.ceil(n * max(2.0, growth)), MAX_SIMULATED)


def server_skip(bench: BenchmarkSpec, seed: int, total: int, qps: float, records: pd.DataFrame,
                window: SteadyWindow, rate: float, latency: float) -> RunLength:
    """The skip of a Server run's arrivals after a prefix of `records`: their expected tokens, and (total - n) / QPS
    more seconds of arrivals; the steady rate known to ±`rate`, the p99s to ±`latency`."""
    n = len(records)
    seconds = (total - n) / qps
    end_s = float(np.nanmax(records["completion_s"]))
    known = "converged" if latency <= LATENCY_TARGET else f"not converged by {n:,} arrivals, the most a prefix runs"
    how = (f"p99 TTFT/TPOT {known} (±{100 * latency:.1f}%), steady rate ±{100 * rate:.1f}%, "
           f"over {window.seconds:,.0f} s")
    return RunLength(how, total, n, total - n, (total - n) * mean_output_tokens(bench, seed), seconds,
                     rate * seconds / (end_s + seconds), latency, window.start_s)


__all__ = ["LATENCY_TARGET", "TARGET_UNCERTAINTY", "RunLength", "converged_offline", "converged_server",
           "mean_output_tokens", "p99_interval", "rate_interval", "server_arrivals", "skip", "stationary_from"]
