"""Metrics: LoadGen percentile rule, TTFT/TPOT, throughput and the latency verdict on hand-built records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpusim.loadgen.metrics import REQUEST_COLUMNS, add_latency_columns, loadgen_percentile, summarize
from gpusim.specs.benchmark import LatencyLimits


def records(rows: list[tuple[float, float, float, int]]) -> pd.DataFrame:
    """(scheduled, first token, completion, output tokens) per request."""
    return pd.DataFrame(
        {
            "request_id": range(len(rows)),
            "instance": 0,
            "scheduled_s": [r[0] for r in rows],
            "first_token_s": [r[1] for r in rows],
            "completion_s": [r[2] for r in rows],
            "input_tokens": 100,
            "output_tokens": [r[3] for r in rows],
            "preemptions": 0,
        },
        columns=REQUEST_COLUMNS,
    )


# TTFT 0.5, 0.2, 1.0; latency 2.5, 1.0, 2.0; TPOT 2.0/4 = 0.5, 0.8/2 = 0.4, undefined (1 token)
THREE = [(0.0, 0.5, 2.5, 5), (1.0, 1.2, 2.0, 3), (2.0, 3.0, 4.0, 1)]


def limits(ttft: float, tpot: float) -> LatencyLimits:
    return LatencyLimits(ttft_s=ttft, tpot_s=tpot, source="test")


def test_latency_columns() -> None:
    df = add_latency_columns(records(THREE))
    assert df["ttft_s"].tolist() == pytest.approx([0.5, 0.2, 1.0])
    assert df["latency_s"].tolist() == pytest.approx([2.5, 1.0, 2.0])
    assert df["tpot_s"].iloc[:2].tolist() == pytest.approx([0.5, 0.4])
    assert math.isnan(df["tpot_s"].iloc[2])


def test_loadgen_percentile_index_rule() -> None:
    values = np.random.default_rng(0).permutation(np.arange(1, 101, dtype=float))
    # index int(100 * p) of the sorted values 1..100, i.e. value int(100 * p) + 1 (no interpolation)
    assert loadgen_percentile(values, 0.50) == 51.0
    assert loadgen_percentile(values, 0.90) == 91.0
    assert loadgen_percentile(values, 0.99) == 100.0
    assert loadgen_percentile(values, 0.0) == 1.0
    assert loadgen_percentile(values, 1.0) == 100.0  # clamped
    assert loadgen_percentile(np.arange(10.0), 0.99) == 9.0
    assert math.isnan(loadgen_percentile([], 0.5))


@pytest.mark.parametrize("p", [0.0, 0.02, 0.5, 0.9, 0.99, 1.0])
def test_a_weighted_percentile_is_the_percentile_of_the_values_repeated_by_their_weights(p) -> None:
    rng = np.random.default_rng(1)
    values, weights = rng.permutation(np.arange(1.0, 41.0)), rng.integers(1, 30, size=40)
    values[3] = math.nan  # dropped with its weight
    expanded = np.repeat(values, weights)
    assert loadgen_percentile(values, p, weights) == loadgen_percentile(expanded, p)
    assert loadgen_percentile(values, p, np.ones(40)) == loadgen_percentile(values, p)
    # by hand: 1, 2, 3 once and 4 standing for 97: index int(100 * 0.02) = 2 of the expanded list is 3
    assert loadgen_percentile([4.0, 1.0, 3.0, 2.0], 0.02, [97, 1, 1, 1]) == 3.0


def test_summary_offline() -> None:
    s = summarize(records(THREE), "offline", None, num_gpus=2)
    assert s["simulated_s"] == pytest.approx(4.0)
    assert s["output_tokens"] == 9
    assert s["output_tokens_per_s"] == pytest.approx(9 / 4.0)
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(9 / 4.0 / 2)
    assert s["completed_requests"] == 3
    assert s["samples_per_s"] == pytest.approx(3 / 4.0)
    # sorted TTFT [0.2, 0.5, 1.0]: indices int(3 p) = 1, 2, 2
    assert (s["ttft_p50_s"], s["ttft_p90_s"], s["ttft_p99_s"]) == pytest.approx((0.5, 1.0, 1.0))
    # sorted TPOT [0.4, 0.5] (1-token request excluded): indices 1, 1, 1
    assert (s["tpot_p50_s"], s["tpot_p90_s"], s["tpot_p99_s"]) == pytest.approx((0.5, 0.5, 0.5))
    assert (s["latency_p50_s"], s["latency_p99_s"]) == pytest.approx((2.0, 2.5))
    assert s["valid"] is None and s["invalid_reason"] is None


def test_summary_server_counts_completed_samples_like_loadgen() -> None:
    s = summarize(records(THREE), "server", None, num_gpus=1)
    assert s["samples_per_s"] == pytest.approx((3 - 1) / 4.0)
    assert s["output_tokens_per_s"] == pytest.approx(9 / 4.0)


def test_incomplete_requests_are_left_out() -> None:
    df = records([*THREE, (3.0, 3.5, float("nan"), 50)])
    s = summarize(df, "offline", None, num_gpus=1)
    assert s["completed_requests"] == 3 and s["output_tokens"] == 9


def test_verdicts() -> None:
    s = summarize(records(THREE), "server", limits(ttft=0.8, tpot=1.0), num_gpus=1)
    assert s["valid"] is False
    assert s["invalid_reason"].startswith("TTFT constraint not met")
    assert "1.00 s > 0.80 s" in s["invalid_reason"] and "TPOT" not in s["invalid_reason"]
    s = summarize(records(THREE), "server", limits(ttft=2.0, tpot=0.45), num_gpus=1)
    assert s["valid"] is False and s["invalid_reason"].startswith("TPOT constraint not met")
    s = summarize(records(THREE), "interactive", limits(ttft=1.0, tpot=0.5), num_gpus=1)
    assert s["valid"] is True and s["invalid_reason"] is None


def test_empty_records() -> None:
    for df in (records([]), pd.DataFrame()):
        s = summarize(df, "server", None, num_gpus=8)
        assert s["completed_requests"] == 0 and s["output_tokens"] == 0
        assert s["output_tokens_per_s"] == 0.0 and s["simulated_s"] == 0.0
        assert math.isnan(s["ttft_p99_s"]) and math.isnan(s["tpot_p99_s"])
        assert s["valid"] is None
    s = summarize(records([]), "server", limits(2.0, 0.08), num_gpus=8)
    assert s["valid"] is False
