"""MLPerf LoadGen scenarios and closed-loop concurrency, as `Workload` builders.

All builders are deterministic for a seed: `numpy.random.default_rng(seed)` is split into separate
streams for the sample order and for the arrival times, and the dataset lengths come from
`dataset_lengths(bench, seed)`, so one seed means one dataset across scenarios.
Interactive is a Server run with other latency limits (LoadGen has no Interactive scenario): use
`server`.
"""

from __future__ import annotations

import math

import numpy as np

from gpusim.errors import InputError
from gpusim.loadgen.datasets import dataset_lengths, equal_issue_order
from gpusim.loadgen.workload import Workload
from gpusim.specs.benchmark import BenchmarkSpec

_SOURCE = "command line"
_CHUNK = 1 << 16  # exponential draws per chunk: a fixed size keeps arrivals a prefix across durations


def _positive(field: str, value: float | None, required: bool = False) -> None:
    """InputError unless `value` > 0; None is allowed (meaning "default") unless `required`."""
    if value is None:
        if required:
            raise InputError(_SOURCE, field, "must be > 0, got nothing (required)")
        return
    if not value > 0:
        raise InputError(_SOURCE, field, f"must be > 0, got {value}")


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    order_rng, arrival_rng = np.random.default_rng(seed).spawn(2)
    return order_rng, arrival_rng


def _from_dataset(
    bench: BenchmarkSpec, seed: int, count: int, order_rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    isl, osl = dataset_lengths(bench, seed)
    idx = equal_issue_order(bench.dataset_samples, count, order_rng)
    return isl[idx], osl[idx]


OFFLINE_SLACK = 1.1
"""LoadGen's kSlack: Offline issues 1.1 × min_duration × target_qps samples (test_settings_internal.cc)."""


def offline_sample_count(bench: BenchmarkSpec, expected_qps: float, min_duration_s: float | None = None) -> int:
    """Samples of an Offline run: max(min_query_count, 1.1 · min_duration · expected QPS), as LoadGen sizes it
    (min duration: the benchmark's unless given)."""
    duration = bench.min_duration_s if min_duration_s is None else min_duration_s
    return max(bench.offline_min_query_count, math.ceil(OFFLINE_SLACK * duration * expected_qps))


def offline(bench: BenchmarkSpec, seed: int, samples: int | None = None) -> Workload:
    """Offline: every sample scheduled at t=0 (one query). Default count: `bench.offline_min_query_count`."""
    _positive("samples", samples)
    count = samples if samples is not None else bench.offline_min_query_count
    order_rng, _ = _streams(seed)
    isl, osl = _from_dataset(bench, seed, count, order_rng)
    return Workload.create(np.zeros(count), isl, osl, name=f"{bench.id} offline", source=_SOURCE)


def poisson_arrivals(qps: float, rng: np.random.Generator, duration_s: float, min_count: int) -> np.ndarray:
    """LoadGen Server schedule: first query at t=0, then exponential(rate=qps) gaps, generated until the
    last scheduled time is >= `duration_s` (so the run meets LoadGen's min-duration check, which looks
    at the final scheduled time) and at least `min_count` queries exist."""
    chunks: list[np.ndarray] = []
    t0, n = 0.0, 0
    while not chunks or n < min_count or chunks[-1][-1] < duration_s:
        gaps = rng.exponential(1.0 / qps, _CHUNK)
        chunk = t0 + np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        chunks.append(chunk)
        n += len(chunk)
        t0 = chunk[-1] + gaps[-1]
    times = np.concatenate(chunks)
    end = max(int(np.searchsorted(times, duration_s, side="left")) + 1, min_count)
    return times[:end]


def server(
    bench: BenchmarkSpec, qps: float, seed: int, duration_s: float = 600.0, samples: int | None = None
) -> Workload:
    """Server (and Interactive): Poisson arrivals at `qps`, in equal-issue sample order.

    Without `samples`: LoadGen's count — queries until one is scheduled at or past `duration_s`, and at
    least `bench.server_min_query_count`. With `samples`: exactly that many arrivals (duration ignored).
    """
    _positive("qps", qps, required=True)
    _positive("duration_s", duration_s, required=True)
    _positive("samples", samples)
    order_rng, arrival_rng = _streams(seed)
    if samples is not None:
        arrivals = poisson_arrivals(qps, arrival_rng, 0.0, samples)
    else:
        arrivals = poisson_arrivals(qps, arrival_rng, duration_s, bench.server_min_query_count)
    isl, osl = _from_dataset(bench, seed, len(arrivals), order_rng)
    return Workload.create(arrivals, isl, osl, name=f"{bench.id} server {qps:g} qps", source=_SOURCE)


SINGLESTREAM_MIN_QUERIES = 100
"""LoadGen's default min_query_count (test_settings.h); mlperf.conf sets none for SingleStream."""


def single_stream_count(expected_qps: float, min_duration_s: float) -> int:
    """Queries of a SingleStream run: enough one after another to pass the min duration, and at least 100."""
    return max(SINGLESTREAM_MIN_QUERIES, math.ceil(min_duration_s * expected_qps))


def single_stream(bench: BenchmarkSpec, seed: int, samples: int) -> Workload:
    """SingleStream: closed loop with one request outstanding, in equal-issue sample order."""
    _positive("samples", samples, required=True)
    order_rng, _ = _streams(seed)
    isl, osl = _from_dataset(bench, seed, samples, order_rng)
    return Workload.create(np.zeros(samples), isl, osl, concurrency=1, name=f"{bench.id} single-stream", source=_SOURCE)


def closed_loop(concurrency: int, isl: int, osl: int, samples: int, range_ratio: float = 1.0,
                seed: int = 0) -> Workload:
    """Fixed concurrency and ISL/OSL: how the silicon sample (and InferenceX) measure. With
    `range_ratio` r < 1 each request's lengths are drawn uniformly from [r·L, L], as vLLM's
    benchmark_serving (`--random-range-ratio`) and InferenceX (r = 0.8) do."""
    for field, value in (("concurrency", concurrency), ("isl", isl), ("osl", osl), ("samples", samples)):
        _positive(field, value, required=True)
    if not 0 < range_ratio <= 1:
        raise InputError(_SOURCE, "range_ratio", f"must be in (0, 1], got {range_ratio}")
    rng = np.random.default_rng(seed)

    def lengths(n: int) -> np.ndarray:
        return rng.integers(max(1, math.ceil(range_ratio * n)), n + 1, samples, dtype=np.int64)

    return Workload.create(
        np.zeros(samples),
        lengths(isl),
        lengths(osl),
        concurrency=concurrency,
        name=f"closed-loop c={concurrency} isl={isl} osl={osl}",
        source=_SOURCE,
    )
