"""LoadGen rules: early stopping as early_stopping.cc, min duration, min queries, verdict reasons."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpusim.loadgen import rules, scenarios
from gpusim.loadgen.rules import check, early_stopping_min_queries, verdict
from gpusim.specs.benchmark import load_benchmark

BENCH = load_benchmark("llama2-70b")  # Server limits: TTFT 2 s, TPOT 200 ms


@pytest.mark.parametrize(("t", "needed"), [(0, 459), (1, 662), (10, 2010), (100, 12571), (1000, 107569)])
def test_early_stopping_p99_matches_the_reference_table(t, needed):
    assert early_stopping_min_queries(t) == needed


@pytest.mark.parametrize(("t", "needed"), [(0, 44), (1, 64), (10, 197), (100, 1246), (1000, 10722)])
def test_early_stopping_p90_matches_the_reference_table(t, needed):
    assert early_stopping_min_queries(t, 0.90) == needed


def test_zero_overlatency_closed_form():
    """With t = 0, I(p; h, 1) = p^h, so h = ceil(ln(0.01) / ln(0.99))."""
    assert early_stopping_min_queries(0) == math.ceil(math.log(0.01) / math.log(0.99))


def _records(n: int, ttft: float, tpot: float, spacing: float = 1.0, tokens: int = 11) -> pd.DataFrame:
    sched = np.arange(n) * spacing
    first = sched + ttft
    return pd.DataFrame({"request_id": np.arange(n), "instance": 0, "scheduled_s": sched, "first_token_s": first,
                         "completion_s": first + tpot * (tokens - 1), "input_tokens": 100,
                         "output_tokens": tokens, "preemptions": 0})


def test_a_good_long_server_run_is_valid():
    valid, reason = verdict(_records(700, 0.5, 0.05), BENCH, "server")
    assert valid and reason is None


def test_min_duration_counts_the_last_scheduled_query():
    c = check(_records(700, 0.5, 0.05, spacing=0.5), BENCH, "server")  # last scheduled at 349.5 s
    assert not c.min_duration_met and not c.valid
    assert "min duration" in c.reason and "349.5" in c.reason
    assert check(_records(700, 0.5, 0.05, spacing=0.5), BENCH, "server", min_duration_s=300).valid


def test_too_few_queries_fail_early_stopping_not_perf():
    c = check(_records(300, 0.5, 0.05, spacing=3.0), BENCH, "server")  # 300 < 459
    assert c.perf_constraints_met and c.min_duration_met and not c.early_stopping_met
    assert [e.metric for e in c.early_stopping if not e.met] == ["TTFT", "TPOT"]
    assert "Need to process at least 459 queries" in c.early_stopping[0].message


def test_ttft_and_tpot_are_judged_separately():
    df = _records(1000, 0.5, 0.05)
    df.loc[990:, "first_token_s"] += 5.0  # 10 slow first tokens: p99 TTFT over 2 s, TPOT unchanged
    c = check(df, BENCH, "server")
    assert not c.ttft_met and c.tpot_met
    ttft_es = next(e for e in c.early_stopping if e.metric == "TTFT")
    assert ttft_es.overlatency == 10 and ttft_es.min_queries == 2010 and not ttft_es.met
    assert c.reason.startswith("TTFT constrain not met")
    assert "TPOT constrain" not in c.reason


def test_weighted_records_count_the_requests_they_stand_for():
    # a skipped run's 1,000 simulated requests standing for 3,000: 10 slow first tokens count as 30, and
    # early stopping needs the issued count that 30 over-latency queries demand
    df = _records(1000, 0.5, 0.05)
    df.loc[990:, "first_token_s"] += 5.0
    df["weight"] = 3.0
    c = check(df, BENCH, "server", queries_issued=3000)
    ttft_es = next(e for e in c.early_stopping if e.metric == "TTFT")
    assert ttft_es.overlatency == 30 and ttft_es.min_queries == early_stopping_min_queries(30)
    assert c.ttft_p99_s == pytest.approx(5.5)  # 30 of 3,000 past 0.5 s: index 2,970 is a slow one

def test_offline_min_duration_is_the_max_latency():
    n = BENCH.offline_min_query_count
    df = _records(n, 0.5, 0.05, spacing=0.0)
    df["completion_s"] = np.linspace(1.0, 650.0, n)
    assert check(df, BENCH, "offline").valid
    df["completion_s"] = np.linspace(1.0, 500.0, n)
    c = check(df, BENCH, "offline")
    assert not c.valid and "max latency" in c.reason


def test_offline_sample_count_follows_the_loadgen_formula():
    # max(min_query_count, 1.1 × 600 s × qps): 1.1 × 600 × 100 = 66,000 > 24,576
    assert scenarios.offline_sample_count(BENCH, 100.0) == 66_000
    assert scenarios.offline_sample_count(BENCH, 10.0) == 24_576


def test_server_percentile_is_p99():
    assert rules.SERVER_PERCENTILE == 0.99


def test_server_rates_use_the_final_scheduled_query_as_loadgen_does():
    """LoadGen divides by final_query_all_samples_done_time: the last-scheduled query's completion."""
    from gpusim.loadgen.metrics import loadgen_rates

    df = _records(3, 0.5, 0.05, spacing=1.0, tokens=11)  # scheduled 0, 1, 2; each done 1 s later
    df.loc[0, "completion_s"] = 10.0  # an early long request finishes last
    samples, tokens = loadgen_rates(df, "server")
    assert tokens == pytest.approx(33 / 3.0) and samples == pytest.approx(2 / 3.0)
    assert loadgen_rates(df, "offline")[1] == pytest.approx(33 / 10.0)


def test_expected_server_rate_averages_the_last_query_draw_by_hand():
    """300 queries scheduled 1 s apart, latencies alternating 1 and 101 s: the last 200 (at least MIN_DRAWS, more
    than the last 2% of the window) stand in for the last-scheduled one, as if issued at its 299 s, ending at 300
    or 400 s: tokens · (1/300 + 1/400) / 2, between tokens / 400 and tokens / 300; a skipped middle of 100 s after
    the records shifts every end by it. LoadGen's own figure is the one draw the run made."""
    from gpusim.loadgen.metrics import MIN_DRAWS, expected_completed_rate, loadgen_rates

    assert MIN_DRAWS == 200
    sched = np.arange(300.0)
    latency = np.where(np.arange(300) % 2 == 0, 1.0, 101.0)
    df = pd.DataFrame({"scheduled_s": sched, "first_token_s": sched + 0.5, "completion_s": sched + latency,
                       "output_tokens": 10})
    mean, low, high = expected_completed_rate(df, 3000.0)
    assert mean == pytest.approx(3000.0 * (1 / 300 + 1 / 400) / 2)
    assert (low, high) == (pytest.approx(3000.0 / 400), pytest.approx(3000.0 / 300))
    assert loadgen_rates(df, "server")[1] == pytest.approx(3000.0 / 400)  # query 299 drew 101 s
    assert expected_completed_rate(df, 3000.0, shift_s=100.0)[0] == pytest.approx(3000.0 * (1 / 400 + 1 / 500) / 2)


@pytest.mark.parametrize("queries", [500, 1_000, 24_000, 842_000])
def test_max_overlatency_is_the_most_early_stopping_allows(queries):
    t = rules.max_overlatency(queries)
    assert rules.early_stopping_min_queries(t) <= queries < rules.early_stopping_min_queries(t + 1)
    assert t < 0.01 * queries  # stricter than the p99 alone


def test_ttft_overlatency_counts_late_first_tokens_and_requests_still_waiting_past_the_limit():
    nan = float("nan")
    scheduled = np.array([0.0, 0.0, 1.0, 5.0, nan])
    first = np.array([0.5, 3.0, nan, nan, nan])  # on time, late, waiting 4 s, waiting 0 s, not issued
    assert rules.ttft_overlatency(scheduled, first, 5.0, 2.0) == 2


def test_tpot_overlatency_counts_completed_requests_over_the_limit_only():
    nan = float("nan")
    first = np.array([0.0, 0.0, 0.0, 0.0])
    done = np.array([1.0, 3.0, nan, 9.0])  # 10 tokens: TPOT 0.11, 0.33, running, single token
    tokens = np.array([10, 10, 10, 1])
    assert rules.tpot_overlatency(first, done, tokens, 0.2) == 1
