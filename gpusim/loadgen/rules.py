"""MLPerf LoadGen run rules: early stopping, min duration, min query counts and the verdict.

Definitions follow MLPerf Inference `loadgen/early_stopping.cc` and `loadgen/results.cc`
(docs/mlperf.md):

- Early stopping (Server/Interactive, token-latency models): with `t` samples over a latency limit,
  the smallest `h` with `I(p − d; h, t + 1) ≤ 1 − c` (regularized incomplete beta, confidence
  c = 0.99, tolerance d = 0, p = 0.99) is found; the run passes if `queries_issued ≥ h + t`. It is
  evaluated twice, on the TTFT array against `ttft_latency` and on the TPOT array against `tpot_latency`.
- Min duration: Server — the last scheduled query time ≥ min_duration; Offline — the max latency
  (last completion from t = 0) ≥ min_duration.
- Min queries: Server — queries issued ≥ `server_min_query_count` (LoadGen's default 100);
  Offline — samples ≥ `offline_min_query_count` (the dataset size, as the submission checker demands).
- Perf constraints: p99 TTFT ≤ ttft_latency and p99 TPOT ≤ tpot_latency (LoadGen's percentile index).
- VALID = all four hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
import pandas as pd
from scipy.special import betainc

from gpusim.loadgen.metrics import SERVER_LIKE, add_latency_columns, loadgen_percentile, request_weights
from gpusim.loadgen.scenarios import SINGLESTREAM_MIN_QUERIES
from gpusim.specs.benchmark import BenchmarkSpec

CONFIDENCE = 0.99
"""LoadGen's early-stopping confidence (results.cc)."""
TOLERANCE = 0.0
"""LoadGen's early-stopping tolerance d."""
SERVER_PERCENTILE = 0.99
"""`*.Server.target_latency_percentile = 99` (mlperf.conf)."""
SUBMISSION_DURATION_S = 2400.0
"""How long submitters run (grade B): 600 s is LoadGen's minimum, and NVIDIA runs longer. Its v4.1 8xH100
Mixtral Server log sets min_duration 2,400 s; its v6.1 VR-NVL72 DeepSeek-R1 runs issued 1.6 M Offline,
600 k Server and 330 k Interactive samples (each run's report.txt in mlcommons/inference_results_v6.1),
hours of traffic. Long runs matter for reasoning outputs: a DeepSeek-R1 Offline run of LoadGen's minimum
count holds about one batch of 20k-token generations, so its drain, not the engine's steady rate, sets the
tokens/s it reports."""


@cache
def early_stopping_min_queries(overlatency: int, percentile: float = SERVER_PERCENTILE,
                               confidence: float = CONFIDENCE, tolerance: float = TOLERANCE) -> int:
    """Fewest queries (h + t) a run with `overlatency` (t) samples over the limit must have issued.

    h is the smallest integer with `I(percentile − tolerance; h, t + 1) ≤ 1 − confidence`, found by
    doubling then bisection as in `MinPassingQueriesFinder` (early_stopping.cc).
    """
    if overlatency < 0:
        raise ValueError(f"overlatency must be >= 0, got {overlatency}")
    t, x, threshold = overlatency, percentile - tolerance, 1.0 - confidence

    def passes(h: int) -> bool:
        return betainc(h, t + 1, x) <= threshold

    hi = max(1, t)
    while not passes(hi):
        hi *= 2
    lo = hi // 2  # passes(lo) is False unless lo == 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi + t


@cache
def max_overlatency(queries: int, percentile: float = SERVER_PERCENTILE) -> int:
    """Most samples over a latency limit that a run of `queries` queries can have and still pass early stopping:
    the largest t with `early_stopping_min_queries(t) ≤ queries` (-1 when not even t = 0 passes)."""
    if early_stopping_min_queries(0, percentile) > queries:
        return -1
    lo, hi = 0, max(1, queries)  # min_queries(t) > t, so t = queries never passes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if early_stopping_min_queries(mid, percentile) <= queries:
            lo = mid
        else:
            hi = mid
    return lo


def ttft_overlatency(scheduled_s: np.ndarray, first_token_s: np.ndarray, now_s: float, limit_s: float) -> int:
    """Requests whose TTFT is already known to exceed `limit_s` at time `now_s`: those whose first token came
    later than the limit, and those still waiting for it past the limit (their TTFT can only grow)."""
    waited = np.where(np.isnan(first_token_s), now_s, first_token_s) - scheduled_s
    return int(np.count_nonzero(waited > limit_s))


def tpot_overlatency(first_token_s: np.ndarray, completion_s: np.ndarray, output_tokens: np.ndarray,
                     limit_s: float) -> int:
    """Completed requests whose TPOT (LoadGen's: decode time over output tokens − 1) exceeds `limit_s`."""
    steps = output_tokens - 1
    done = ~np.isnan(completion_s) & (steps > 0)
    return int(np.count_nonzero((completion_s[done] - first_token_s[done]) / steps[done] > limit_s))


@dataclass(frozen=True)
class EarlyStopping:
    """Early stopping on one latency array (TTFT or TPOT)."""

    metric: str
    limit_s: float
    overlatency: int
    """Samples whose latency exceeds the limit (strictly, as LoadGen counts)."""
    queries_issued: int
    min_queries: int
    """h + t: queries needed for the p99 bound to hold at 99% confidence."""

    @property
    def met(self) -> bool:
        return self.queries_issued >= self.min_queries

    @property
    def message(self) -> str:
        """LoadGen's early-stopping result text."""
        if self.met:
            return " * Run successful."
        return (f" * Only processed {self.queries_issued} queries.\n"
                f" * Need to process at least {self.min_queries} queries for early stopping.")


@dataclass
class Checks:
    """Every LoadGen rule evaluated on one run."""

    scenario: str
    min_duration_s: float
    duration_s: float
    """Server: last scheduled time; Offline: max latency."""
    queries_issued: int
    min_query_count: int
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    limits: tuple[float, float] | None = None
    """(ttft_s, tpot_s) for Server/Interactive (inf where the benchmark judges end-to-end latency only)."""
    early_stopping: list[EarlyStopping] = field(default_factory=list)
    latency_p99_s: float | None = None
    latency_limit_s: float | None = None
    """The end-to-end p99 limit of a benchmark without token latencies (`use_token_latencies = 0`)."""
    stopped_s: float | None = None
    """A run stopped once its verdict could only be INVALID (`stopped`): when. Its percentiles are those of the
    requests completed by then."""

    @property
    def min_duration_met(self) -> bool:
        return self.duration_s >= self.min_duration_s

    @property
    def min_queries_met(self) -> bool:
        return self.queries_issued >= self.min_query_count

    @property
    def ttft_met(self) -> bool:
        return self.limits is None or (self.ttft_p99_s is not None and self.ttft_p99_s <= self.limits[0])

    @property
    def tpot_met(self) -> bool:
        return self.limits is None or (self.tpot_p99_s is not None and self.tpot_p99_s <= self.limits[1])

    @property
    def latency_met(self) -> bool:
        return self.latency_limit_s is None or (self.latency_p99_s is not None
                                                and self.latency_p99_s <= self.latency_limit_s)

    @property
    def perf_constraints_met(self) -> bool:
        return self.ttft_met and self.tpot_met and self.latency_met

    @property
    def latency_margin(self) -> float | None:
        """log of the binding p99 over its limit (TTFT or TPOT, whichever is nearer failing): negative while both
        hold, positive once one fails; None without limits or percentiles."""
        if self.limits is None or self.ttft_p99_s is None or self.tpot_p99_s is None:
            return None
        worst = max(self.ttft_p99_s / self.limits[0], self.tpot_p99_s / self.limits[1])
        if self.latency_limit_s is not None and self.latency_p99_s is not None:
            worst = max(worst, self.latency_p99_s / self.latency_limit_s)
        return math.log(worst) if worst > 0 else None

    @property
    def early_stopping_met(self) -> bool:
        return all(e.met for e in self.early_stopping)

    @property
    def valid(self) -> bool:
        return self.min_duration_met and self.min_queries_met and self.perf_constraints_met \
            and self.early_stopping_met

    @property
    def reasons(self) -> list[str]:
        """Why the run is INVALID, in LoadGen's words (empty when VALID)."""
        out = []
        if self.limits is not None:
            if not self.ttft_met:
                out.append(f"TTFT constrain not met: p99 {ms_text(self.ttft_p99_s)} > {ms_text(self.limits[0])} limit; "
                           "reduce target QPS to improve latency")
            if not self.tpot_met:
                out.append(f"TPOT constrain not met: p99 {ms_text(self.tpot_p99_s)} > {ms_text(self.limits[1])} limit; "
                           "reduce target QPS to improve latency")
            if not self.latency_met:
                out.append(f"latency constrain not met: p99 {ms_text(self.latency_p99_s)} > "
                           f"{ms_text(self.latency_limit_s)} limit; reduce target QPS to improve latency")
        if not self.min_duration_met:
            what = "last scheduled query" if self.scenario in SERVER_LIKE else "max latency"
            out.append(f"min duration not met: {what} at {self.duration_s:.1f} s < {self.min_duration_s:.1f} s")
        if not self.min_queries_met:
            out.append(f"min queries not met: {self.queries_issued} < {self.min_query_count}")
        out.extend(f"{e.metric} early stopping not met: {e.overlatency} samples over {ms_text(e.limit_s)}, "
                   f"{e.queries_issued} queries issued, {e.min_queries} needed"
                   for e in self.early_stopping if not e.met)
        if self.stopped_s is not None:
            out.append(f"run stopped at {self.stopped_s:,.0f} s, when no later query could make it VALID")
        return out

    @property
    def reason(self) -> str | None:
        return "; ".join(self.reasons) or None


def check(records: pd.DataFrame, bench: BenchmarkSpec, scenario: str, queries_issued: int | None = None,
          min_duration_s: float | None = None) -> Checks:
    """Evaluate the LoadGen rules on a run's per-request records (`REQUEST_COLUMNS`).

    `queries_issued` defaults to the rows; `min_duration_s` to the benchmark's (600 s). A shortened
    run passes `min_duration_s` equal to its own duration, as a LoadGen user.conf would.
    """
    scenario = scenario.lower()
    df = add_latency_columns(records)
    df = df[df["completion_s"].notna()]
    issued = len(df) if queries_issued is None else queries_issued
    min_duration = bench.min_duration_s if min_duration_s is None else min_duration_s
    if scenario not in SERVER_LIKE:
        duration = float(df["completion_s"].max()) if len(df) else 0.0
        least = bench.offline_min_query_count if scenario == "offline" else SINGLESTREAM_MIN_QUERIES
        return Checks(scenario, min_duration, duration, len(df), least)
    limits = bench.limits(scenario)
    if limits is None:
        raise ValueError(f"{bench.id} has no {scenario} latency limits")
    duration = float(df["scheduled_s"].max()) if len(df) else 0.0
    ttft, tpot, e2e = df["ttft_s"].to_numpy(), df["tpot_s"].to_numpy(), df["latency_s"].to_numpy()
    w = request_weights(df)
    judged = [("TTFT", ttft, limits.ttft_s), ("TPOT", tpot, limits.tpot_s), ("latency", e2e, limits.latency_s)]
    early = [_early_stopping(m, v, limit, issued, w) for m, v, limit in judged
             if limit is not None and limit < math.inf]
    return Checks(scenario, min_duration, duration, issued, bench.server_min_query_count,
                  ttft_p99_s=_none_if_nan(loadgen_percentile(ttft, SERVER_PERCENTILE, w)),
                  tpot_p99_s=_p99_or_unbounded(tpot, limits.tpot_s, w),
                  limits=(limits.ttft_s, limits.tpot_s), early_stopping=early,
                  latency_p99_s=_none_if_nan(loadgen_percentile(e2e, SERVER_PERCENTILE, w)),
                  latency_limit_s=limits.latency_s)


def stopped(checks: Checks, overlatency: dict[str, int], queries: int, last_arrival_s: float,
            stopped_s: float) -> Checks:
    """The verdict of a Server-like run stopped at `stopped_s`, when `overlatency[metric]` of its `queries`
    requests were already past that limit (TTFT, TPOT, end-to-end latency), one of them more than early stopping allows
    (`max_overlatency`): `checks` (of the requests completed by then) with those early-stopping counts, the run's
    own query count and its last arrival."""
    limit = {"TTFT": checks.limits[0], "TPOT": checks.limits[1], "latency": checks.latency_limit_s}
    early = [EarlyStopping(m, limit[m], t, queries, early_stopping_min_queries(t)) for m, t in overlatency.items()]
    early += [e for e in checks.early_stopping if e.metric not in overlatency]
    return replace(checks, queries_issued=queries, duration_s=last_arrival_s, early_stopping=early,
                   stopped_s=stopped_s)


def verdict(records: pd.DataFrame, bench: BenchmarkSpec, scenario: str, queries_issued: int | None = None,
            min_duration_s: float | None = None) -> tuple[bool, str | None]:
    """(valid, reason): LoadGen's `Result is : VALID|INVALID` and why."""
    c = check(records, bench, scenario, queries_issued, min_duration_s)
    return c.valid, c.reason


def _early_stopping(metric: str, values: np.ndarray, limit_s: float, issued: int,
                    weights: np.ndarray | None = None) -> EarlyStopping:
    """Queries past `limit_s` (each counted as the issued requests it stands for, `weights`)."""
    past = ~np.isnan(values) & (values > limit_s)
    over = int(np.count_nonzero(past)) if weights is None else round(float(weights[past].sum()))
    return EarlyStopping(metric, limit_s, over, issued, early_stopping_min_queries(over))


def _p99_or_unbounded(values: np.ndarray, limit_s: float, weights: np.ndarray | None = None) -> float | None:
    """p99 of a token latency; 0 where it is undefined (single-token items) and unbounded by the benchmark."""
    p99 = _none_if_nan(loadgen_percentile(values, SERVER_PERCENTILE, weights))
    return 0.0 if p99 is None and limit_s == math.inf else p99


def _none_if_nan(v: float) -> float | None:
    return None if v != v else v


def ms_text(v: float | None) -> str:
    """Seconds as milliseconds for messages (`-` for none)."""
    return "-" if v is None else f"{v * 1e3:,.1f} ms"
