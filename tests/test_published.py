"""Published MLPerf rows map to runs by rule; the spine's predictions stay within 2x of them (slow)."""

from __future__ import annotations

import pytest

from gpusim.analysis.published import benchmark_id, map_accelerator


@pytest.mark.parametrize(
    ("accelerator", "count", "expected"),
    [
        ("NVIDIA GB300", 288, ("gb300-nvl72", 4)),
        ("NVIDIA GB300", 8, ("gb300-nvl72", 1)),
        ("NVIDIA B300-SXM-270GB (1100W TGP)", 16, ("b300-hgx", 2)),
        ("NVIDIA GB200", 4, ("gb200-nvl72", 1)),
        ("NVIDIA Vera Rubin 288GB HBM4", 72, ("vr-nvl72", 1)),
        ("NVIDIA H100-SXM-80GB", 8, ("h100-hgx", 1)),
        ("AMD Instinct MI355X 288GB HBM3e", 72, ("mi355x-platform", 9)),
        ("Intel Gaudi 3", 8, None),
    ],
)
def test_accelerator_names_map_by_rule(accelerator, count, expected):
    assert map_accelerator(accelerator, count) == expected


def test_benchmark_names_drop_accuracy_targets():
    assert benchmark_id("llama2-70b-99/99.9") == benchmark_id("llama2-70b-99.9") == "llama2-70b"
    assert benchmark_id("deepseek-r1") == "deepseek-r1"


@pytest.mark.slow
def test_offline_predictions_within_a_factor_of_two_on_8_gpu_systems(shared_dir, benchmark_script):
    check = benchmark_script("mlperf_check")
    rows = check.comparisons(shared_dir / "reference" / "mlperf_calibration.csv", round_="v6.1", max_gpus=8)
    assert len(rows) >= 10
    bad = [r for r in rows if not 0.5 <= r["ratio"] <= 2.0]
    assert not bad, bad
