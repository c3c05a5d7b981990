"""The stationary part of a run: the output rate after the warm-up and before the drain.

LoadGen's tokens/s divides all output tokens by the time the run ends (the last completion, or the
completion of the last-scheduled query), so a run's ramp-up and, above all, its drain weigh in: with
DeepSeek-R1's 20k-token outputs one long request decides when a short run ends. The steady rate counts
only the tokens produced inside a window [start, end] where the engine runs at its operating point:

- end: the moment the offered work stops growing — the last scheduled time (Server, Interactive, traces,
  closed loop), or for Offline the first moment an instance's queue is empty (its last first token; from there
  it drains, faster per token than the steady batch, while the others still run full);
- start: the first scheduled time plus the p90 of the requests' time in the engine (first token to
  completion), so the batch has turned over before the window opens; at most half-way to `end`. A run too
  short for that (`turned_over` false: DeepSeek-R1's long outputs at 600 s) still has its batch growing in
  the window, so its rate is not yet the stationary one.

Inside the window the tokens are those the engine produced there, from its timeline (`Timeline`, per step).
Without one, each request contributes its first token at `first_token_s` and the rest spread evenly up to
`completion_s` (its own mean TPOT): exact in total, but it carries a request's faster tokens after the window
back into it, by up to a request's time in the engine (+6.6% on a 350 s Offline run of Llama 2 70B on H200 whose
timeline counts 3,259 tokens/s/GPU, +0.6% at 2,700 s). Instance
busy time in the window is the union of its requests' [scheduled, completion] intervals (an engine runs
steps while it holds a request; in disaggregated serving a prefill instance holds it until its first token and
the decode instance from then on), weighted by the instances' GPUs, which the energy and cost per steady token use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpusim.loadgen.metrics import SERVER_LIKE

STEADY_KEYS = ("steady_window_s", "steady_output_tokens_per_s", "steady_output_tokens_per_s_per_gpu",
               "steady_busy_fraction", "steady_turned_over")
"""The run summary's steady-rate keys (every run carries them; None without a stationary window)."""
TokenCount = Callable[[float, float], float]
"""Output tokens an engine produced in [start_s, end_s] (`Timeline.output_tokens_between`)."""
WARMUP_QUANTILE = 0.9
"""The window opens after this quantile of the requests' time in the engine."""


@dataclass(frozen=True)
class SteadyWindow:
    """The stationary window of a run and what happened inside it."""

    start_s: float
    end_s: float
    output_tokens: float
    busy_fraction: float
    """Mean over GPUs of the share of the window their instance held a request."""
    turned_over: bool = True
    """Whether the warm-up (the p90 time in the engine) ended before half-way: if not, the window opened while
    the batch was still filling with the run's long requests."""

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def steady_window(records: pd.DataFrame, scenario: str, instances: int | None = None,
                  instance_gpus: Sequence[int] | None = None, produced: TokenCount | None = None
                  ) -> SteadyWindow | None:
    """The window of the module docstring for a finished run's records; None when nothing completed. `instances`
    counts every instance (those that held no request were idle), `instance_gpus` their GPUs (default one each),
    `produced` the engine's output tokens in an interval (its timeline's)."""
    done = records[records["completion_s"].notna() & records["first_token_s"].notna()]
    if done.empty:
        return None
    scheduled = done["scheduled_s"].to_numpy(np.float64)
    first = done["first_token_s"].to_numpy(np.float64)
    last = done["completion_s"].to_numpy(np.float64)
    tokens = done["output_tokens"].to_numpy(np.float64)
    t0 = float(scheduled.min())
    end = float(queue_empty_times(done).min() if scenario == "offline" else scheduled.max())
    if end <= t0:  # a single arrival instant without queueing: the whole run
        end = float(last.max())
    warmup, half = t0 + float(np.quantile(last - first, WARMUP_QUANTILE)), t0 + (end - t0) / 2
    start = min(warmup, half)
    if end <= start:
        return None
    made = window_tokens(first, last, tokens, start, end) if produced is None else produced(start, end)
    instance = done["instance"].to_numpy() if "instance" in done else np.zeros(len(done), np.int64)
    spans = [(instance, scheduled, last)]
    if "prefill_instance" in done and (done["prefill_instance"] >= 0).any():
        prefill = done["prefill_instance"].to_numpy()
        split = prefill >= 0  # prefill instance until the first token, the decode instance after it
        spans = [(instance[~split], scheduled[~split], last[~split]), (prefill[split], scheduled[split], first[split]),
                 (instance[split], first[split], last[split])]
    ids, lo, hi = (np.concatenate(parts) for parts in zip(*spans, strict=True))
    count = instances or int(ids.max()) + 1
    weights = np.asarray(instance_gpus if instance_gpus is not None else np.ones(count), np.float64)
    busy = _busy_fraction(ids, lo, hi, start, end, weights)
    return SteadyWindow(start, end, made, busy, turned_over=warmup <= half)


def queue_empty_times(done: pd.DataFrame) -> np.ndarray:
    """Offline: when each instance that holds a queue (the prefill instance where serving is disaggregated) gives
    its last request its first token."""
    first = done["first_token_s"].to_numpy(np.float64)
    column = "prefill_instance" if "prefill_instance" in done and (done["prefill_instance"] >= 0).all() else "instance"
    if column not in done:
        return np.array([np.nanmax(first)])
    return pd.Series(first).groupby(done[column].to_numpy()).max().to_numpy(np.float64)


def window_tokens(first: np.ndarray, last: np.ndarray, tokens: np.ndarray, start: float, end: float) -> float:
    """Output tokens produced in [start, end]: one at the first token, the rest evenly until completion."""
    first_in = np.count_nonzero((first >= start) & (first <= end))
    span = last - first
    overlap = np.clip(np.minimum(last, end) - np.maximum(first, start), 0.0, None)
    share = np.divide(overlap, span, out=np.zeros_like(span), where=span > 0)
    return float(first_in + np.sum(np.maximum(tokens - 1, 0.0) * share))


def _busy_fraction(instance: np.ndarray, begin: np.ndarray, finish: np.ndarray, start: float, end: float,
                   weights: np.ndarray) -> float:
    """Share of [start, end] each instance held at least one request (the union of its requests' intervals
    [begin, finish]), averaged with `weights` (per instance index)."""
    lo, hi = np.maximum(begin, start), np.minimum(finish, end)
    keep = hi > lo
    busy = 0.0
    for i in np.unique(instance[keep]):
        mine = keep & (instance == i)
        order = np.argsort(lo[mine])
        a, b = lo[mine][order], hi[mine][order]
        reach = np.maximum.accumulate(b)
        gaps = np.maximum(a[1:] - reach[:-1], 0.0).sum() if len(a) > 1 else 0.0
        busy += weights[i] * float(reach[-1] - a[0] - gaps)
    return min(busy / (weights.sum() * (end - start)), 1.0)


def steady_summary(records: pd.DataFrame, scenario: str, num_gpus: int, instances: int | None = None,
                   instance_gpus: Sequence[int] | None = None, produced: TokenCount | None = None) -> dict:
    """The steady-rate keys of a run summary (None where the run has no stationary window)."""
    w = steady_window(records, scenario, instances, instance_gpus, produced)
    if w is None:
        return dict.fromkeys(STEADY_KEYS)
    return dict(zip(STEADY_KEYS, ([w.start_s, w.end_s], w.tokens_per_s, w.tokens_per_s / num_gpus, w.busy_fraction,
                                  w.turned_over), strict=True))


def started_share(records: pd.DataFrame, scenario: str) -> float | None:
    """Server-like runs: requests that got their first token over those that arrived, in the second half of
    the arrivals. Near 1 when the engine keeps up; well below 1 when the queue grows without bound."""
    if scenario not in SERVER_LIKE or records.empty:
        return None
    scheduled = records["scheduled_s"].to_numpy(np.float64)
    first = records["first_token_s"].to_numpy(np.float64)
    end = float(scheduled.max())
    mid = end / 2
    arrived = np.count_nonzero((scheduled >= mid) & (scheduled <= end))
    started = np.count_nonzero((first >= mid) & (first <= end))
    return started / arrived if arrived else None


__all__ = ["SteadyWindow", "queue_empty_times", "started_share", "steady_summary", "steady_window", "window_tokens"]
