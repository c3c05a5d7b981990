"""The one figure MLPerf reports for a run, and its unit, for every benchmark (`result`, `result_unit`).

- Token-generation LLMs: tokens/s (Offline `result_tokens_per_second`, Server/Interactive
  `result_completed_tokens_per_second`, in expectation over the last-scheduled query's draw:
  `metrics.expected_completed_rate`; the run's own draw stays in `output_tokens_per_s`).
- Benchmarks scored per sample (Qwen3-VL, Wan 2.2, DLRMv3): samples/s Offline and queries/s (completed
  samples per second) Server/Interactive (the submission checker's `RESULT_FIELD_BENCHMARK_OVERWRITE`).
- SingleStream: seconds, the early-stopping estimate of the 90th-percentile latency (LoadGen discards the
  t − 1 slowest of t samples over the estimate and reports the slowest of the rest).
- Anything else (closed-loop concurrency, traces): tokens/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpusim.loadgen.metrics import SERVER_LIKE, add_latency_columns
from gpusim.loadgen.rules import early_stopping_min_queries
from gpusim.specs.benchmark import BenchmarkSpec

SINGLESTREAM_PERCENTILE = 0.90
"""`*.SingleStream.target_latency_percentile = 90` (mlperf.conf)."""
PER_SAMPLE = ("vlm", "diffusion", "recsys")
"""Benchmark kinds whose MLPerf metric counts samples, not tokens."""


def early_stopping_latency(latencies: np.ndarray, percentile: float = SINGLESTREAM_PERCENTILE) -> float | None:
    """LoadGen's early-stopping estimate of the `percentile` latency: the largest t whose h + t queries the
    run has, then the slowest latency once the t − 1 slowest are set aside; None without latencies."""
    a = np.sort(np.asarray(latencies, dtype=np.float64)[~np.isnan(latencies)])
    n = a.size
    if n == 0:
        return None
    t = 0
    while t + 1 < n and early_stopping_min_queries(t + 1, percentile) <= n:
        t += 1
    return float(a[n - 1 - max(t - 1, 0)])


def result_fields(bench: BenchmarkSpec, scenario: str, summary: dict, records: pd.DataFrame) -> dict:
    """`result` and `result_unit` of a run from its summary (samples_per_s, output_tokens_per_s) and records."""
    if scenario == "singlestream":
        done = records[records["completion_s"].notna()]
        lat = add_latency_columns(done)["latency_s"].to_numpy() if len(done) else np.array([])
        return {"result": early_stopping_latency(lat), "result_unit": "s"}
    if bench.kind in PER_SAMPLE and scenario in ("offline", *SERVER_LIKE):
        unit = "samples/s" if scenario == "offline" else "queries/s"
        per_s = summary.get("samples_per_s")
        return {"result": None if per_s is None else per_s * bench.samples_per_request, "result_unit": unit}
    return {"result": reported_tokens_per_s(summary), "result_unit": "tokens/s"}


def reported_tokens_per_s(summary: dict) -> float | None:
    """The tokens/s a run reports as LoadGen's: Server-like runs in expectation over the last-scheduled query's draw
    (`expected_output_tokens_per_s`, set for them only), others their own (`output_tokens_per_s`)."""
    expected = summary.get("expected_output_tokens_per_s")
    return summary.get("output_tokens_per_s") if expected is None else expected


__all__ = ["PER_SAMPLE", "SINGLESTREAM_PERCENTILE", "early_stopping_latency", "reported_tokens_per_s",
           "result_fields"]
