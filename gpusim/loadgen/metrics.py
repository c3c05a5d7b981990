"""Per-request records → LoadGen-style summary (MLPerf Inference `loadgen/results.cc` definitions).

Records are one row per request (`REQUEST_COLUMNS`), absolute simulated times in seconds. Latencies
are measured from the *scheduled* time, as LoadGen does, so queueing delay counts. Rows without a
completion time (NaN `completion_s`) are not completed and are left out of every statistic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from gpusim.errors import InputError
from gpusim.specs.benchmark import LatencyLimits

REQUEST_COLUMNS = [
    "request_id",
    "instance",
    "scheduled_s",
    "first_token_s",
    "completion_s",
    "input_tokens",
    "output_tokens",
    "preemptions",
]

SERVER_LIKE = ("server", "interactive")

WEIGHT_COLUMN = "weight"
"""Optional records column: how many issued requests a simulated one stands for (a Server run whose stationary
middle was skipped, `gpusim/run_length.py`); absent, every request counts once."""


def loadgen_percentile(values: Sequence[float] | np.ndarray | pd.Series, p: float,
                       weights: Sequence[float] | np.ndarray | pd.Series | None = None) -> float:
    """LoadGen's percentile: sort, take the value at index `int(n * p)` (clamped to n-1).

    NaNs are dropped first; no values → NaN. With `weights` (how many issued requests each value stands for,
    `WEIGHT_COLUMN`) the value where the sorted values' cumulative weight first exceeds int(W · p), W their
    total: the same index as without weights when every weight is 1.
    """
    a = np.asarray(values, dtype=np.float64)
    keep = ~np.isnan(a)
    if not keep.any():
        return math.nan
    if weights is None:
        a = np.sort(a[keep])
        return float(a[min(max(int(a.size * p), 0), a.size - 1)])
    order = np.argsort(a[keep], kind="stable")
    cum = np.cumsum(np.asarray(weights, dtype=np.float64)[keep][order])
    k = int(np.searchsorted(cum, math.floor(cum[-1] * p + 1e-9), side="right"))
    return float(a[keep][order][min(k, order.size - 1)])


def request_weights(df: pd.DataFrame) -> np.ndarray | None:
    """The records' `WEIGHT_COLUMN` (None when absent: every request stands for itself)."""
    return df[WEIGHT_COLUMN].to_numpy(np.float64) if WEIGHT_COLUMN in df else None


def add_latency_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` with ttft_s, latency_s (both from the scheduled time) and tpot_s.

    tpot_s = (latency_s - ttft_s) / (output_tokens - 1), LoadGen's per-request TPOT; NaN where
    output_tokens < 2 (LoadGen requires at least 2 tokens).
    """
    missing = [c for c in ("scheduled_s", "first_token_s", "completion_s", "output_tokens") if c not in df]
    if missing:
        raise ValueError(f"records lack columns {missing}; expected {REQUEST_COLUMNS}")
    out = df.copy()
    out["ttft_s"] = out["first_token_s"] - out["scheduled_s"]
    out["latency_s"] = out["completion_s"] - out["scheduled_s"]
    n = out["output_tokens"].astype(np.float64)
    out["tpot_s"] = ((out["latency_s"] - out["ttft_s"]) / (n - 1)).where(n >= 2, np.nan)
    return out


def loadgen_rates(requests: pd.DataFrame, scenario: str) -> tuple[float, float]:
    """(samples/s, tokens/s) as LoadGen reports them (results.cc; checked against mlcommons-loadgen 6.0.17).

    Server/Interactive: `Completed samples per second = (n − 1) / final_query_all_samples_done_time` and
    `Completed tokens per second = tokens / final_query_all_samples_done_time`, where that time is the
    completion of the *last-scheduled* query (not the last completion). Offline and the rest: n and
    tokens over the last completion (Offline: the max latency, every sample being scheduled at t = 0).
    """
    done = requests[requests["completion_s"].notna()]
    if done.empty:
        return 0.0, 0.0
    n, tokens = len(done), float(done["output_tokens"].sum())
    if scenario.lower() in SERVER_LIKE:
        t = float(done["completion_s"].to_numpy()[done["scheduled_s"].to_numpy().argmax()])
        return ((n - 1) / t, tokens / t) if t > 0 else (0.0, 0.0)
    t = float(done["completion_s"].max())
    return (n / t, tokens / t) if t > 0 else (0.0, 0.0)


LAST_STRETCH = 0.02
"""Share of a Server run's arrival window, at its end, whose queries stand in for the last-scheduled one."""
MIN_DRAWS = 200
"""... and at least this many of the last-scheduled queries."""
DRAW_RANGE = (0.05, 0.95)
"""Quantiles of the last query's draw that bound `expected_completed_rate`'s range."""


def expected_completed_rate(requests: pd.DataFrame, tokens: float, shift_s: float = 0.0
                            ) -> tuple[float, float, float] | None:
    """A Server run's completed tokens/s as LoadGen defines it (`loadgen_rates`), in expectation over the one
    draw it hangs on: (mean, low, high) of tokens / (s + L) over the latencies L of the queries scheduled in the
    run's last stretch (`LAST_STRETCH` of its arrival window, at least `MIN_DRAWS` queries), s the last arrival
    (later by `shift_s` where a skipped middle follows the records, `gpusim/run_length.py`); low and high at the
    `DRAW_RANGE` quantiles of L. The last-scheduled query's latency is one output length drawn from the dataset,
    decoded as the batch drains; the queries scheduled just before it are independent draws under the same
    drain. Where outputs are long this is the figure's largest spread: DeepSeek-R1 on 8x B300 at 16-18 QPS over
    2,400 s gave 55,500-67,300 tokens/s from one QPS to the next as the last query was short or long
    (docs/mlperf.md). None without completed queries."""
    done = requests[requests["completion_s"].notna()]
    if done.empty:
        return None
    sched = done["scheduled_s"].to_numpy(np.float64)
    latency = done["completion_s"].to_numpy(np.float64) - sched
    last = float(sched.max())
    k = max(sched.size - MIN_DRAWS, 0)
    cut = min(last - LAST_STRETCH * (last - float(sched.min())), float(np.partition(sched, k)[k]))
    end = last + shift_s + latency[sched >= cut]
    if not (end > 0).all():
        return None
    lo, hi = np.quantile(end, DRAW_RANGE)
    return float(tokens * np.mean(1.0 / end)), float(tokens / hi), float(tokens / lo)


def summarize(
    records: pd.DataFrame, scenario: str, limits: LatencyLimits | None, num_gpus: int
) -> dict[str, float | int | bool | str | None]:
    """Summary of one run, with LoadGen's definitions (throughput as `loadgen_rates`).

    token_count counts output tokens only; `simulated_s` is the last completion. `valid` is None without
    limits, else whether p99 TTFT and p99 TPOT are within them (min-duration and early-stopping checks
    belong to the MLPerf verdict, gpusim.loadgen.rules).
    """
    if num_gpus < 1:
        raise InputError("command line", "num_gpus", f"must be > 0, got {num_gpus}")
    if records.empty and not set(REQUEST_COLUMNS) <= set(records.columns):
        records = pd.DataFrame({c: pd.Series(dtype=np.float64) for c in REQUEST_COLUMNS})
    df = add_latency_columns(records)
    df = df[df["completion_s"].notna()]
    n = len(df)
    simulated_s = float(df["completion_s"].max()) if n else 0.0
    tokens = int(df["output_tokens"].sum()) if n else 0
    samples_per_s, tok_per_s = loadgen_rates(df, scenario)
    out: dict[str, float | int | bool | str | None] = {
        "simulated_s": simulated_s,
        "output_tokens": tokens,
        "output_tokens_per_s": tok_per_s,
        "output_tokens_per_s_per_gpu": tok_per_s / num_gpus,
        "completed_requests": n,
    }
    w = request_weights(df)
    for col, key in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
        for p in (50, 90, 99):
            out[f"{key}_p{p}_s"] = loadgen_percentile(df[col], p / 100, w)
    out["latency_p50_s"] = loadgen_percentile(df["latency_s"], 0.50, w)
    out["latency_p99_s"] = loadgen_percentile(df["latency_s"], 0.99, w)
    out["samples_per_s"] = samples_per_s
    out["valid"], out["invalid_reason"] = _verdict(out, limits)
    return out


def _verdict(s: dict, limits: LatencyLimits | None) -> tuple[bool | None, str | None]:
    if limits is None:
        return None, None
    ttft, tpot = s["ttft_p99_s"], s["tpot_p99_s"]
    reasons = []
    if s["completed_requests"] == 0:
        reasons.append("no completed requests")
    else:
        if math.isnan(ttft):
            reasons.append("TTFT undefined: no first-token times")
        elif ttft > limits.ttft_s:
            reasons.append(f"TTFT constraint not met: p99 {ttft:.2f} s > {limits.ttft_s:.2f} s limit")
        if math.isnan(tpot) and limits.tpot_s < math.inf:
            reasons.append("TPOT undefined: no request with >= 2 output tokens")
        elif tpot > limits.tpot_s:
            ms, limit_ms = tpot * 1e3, limits.tpot_s * 1e3
            reasons.append(f"TPOT constraint not met: p99 {ms:.1f} ms > {limit_ms:.1f} ms limit")
        if limits.latency_s is not None and s["latency_p99_s"] > limits.latency_s:
            p99, limit = s["latency_p99_s"], limits.latency_s
            reasons.append(f"latency constraint not met: p99 {p99:.2f} s > {limit:.2f} s limit")
    return (False, "; ".join(reasons)) if reasons else (True, None)
