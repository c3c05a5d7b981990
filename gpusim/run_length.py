"""How much of an Offline run to simulate: until its steady rate is known, then skip the rest of its middle.

An Offline run issues every sample at once, and LoadGen reports all output tokens over the time to the last
completion: a warm-up while the batch fills, a long stationary middle where the queue feeds a full batch, and
a drain once the queue is empty. The middle is statistically the same from its first minute to its last, so a
run of N samples ends, in expectation, as a run of n < N samples does, later by the time the N - n extra samples
take at the steady rate. `converged_offline` simulates a prefix of n samples, grows it until its batch turned
over and the steady rate's 95% interval moves the reported figure by at most `TARGET_UNCERTAINTY`, and then
extends the prefix's summary by the skipped samples (`RunLength.extend`): their expected tokens (N - n times
the dataset's mean output length) at the steady rate, every instance busy as in the window. What decided the
length and the figure's uncertainty are in the summary (`run_length`); `run_length: full` simulates all N.
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
TURNOVER_MARGIN = 1.3
"""A prefix too short to turn over is followed by one this much longer than the turn-over needs."""
T = TypeVar("T")


@dataclass(frozen=True)
class RunLength:
    """What an Offline run simulated, what it skipped and how sure the reported figure is."""

    decided_by: str
    issued_requests: int
    simulated_requests: int
    skipped_requests: int = 0
    skipped_tokens: float = 0.0
    skipped_s: float = 0.0
    uncertainty: float = 0.0
    """Relative 95% half-width the skip adds to the reported tokens/s (0: every request simulated)."""

    def extend(self, summary: dict, busy_s: list[float]) -> None:
        """`summary` (the prefix's LoadGen fields) and the instances' `busy_s`, as the full run's: the skipped
        samples' tokens and time added, every instance busy at the window's fraction meanwhile."""
        if not self.skipped_requests:
            return
        duration = summary["simulated_s"] + self.skipped_s
        tokens = summary["output_tokens"] + self.skipped_tokens
        done = summary["completed_requests"] + self.skipped_requests
        summary.update(simulated_s=duration, output_tokens=round(tokens), output_tokens_per_s=tokens / duration,
                       output_tokens_per_s_per_gpu=tokens / duration / summary["num_gpus"], completed_requests=done,
                       samples_per_s=done / duration)
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


__all__ = ["TARGET_UNCERTAINTY", "RunLength", "converged_offline", "mean_output_tokens", "rate_interval", "skip"]
