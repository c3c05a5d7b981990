"""benchmarks/power_limit.py (docs/power-limit.md): the runs without the limit have none, and the page's ratios."""

from __future__ import annotations

import pytest

from gpusim.build import prepare
from gpusim.perf.step import BatchShape


def test_without_the_limit_a_compute_bound_step_is_no_longer_stretched(benchmark_script):
    pl = benchmark_script("power_limit")
    shipped = prepare("b300-hgx", "llama2-70b", scenario="offline")
    free = pl.without_limit(shipped)
    assert not free.hardware.gpu.tensor_pj_per_flop and free.deployment == shipped.deployment
    prefill = BatchShape(prefill_tokens=16384, prefill_attn_pairs=16 * 1024 * 1025 / 2, prefill_seqs=16)
    limited, unlimited = (s.pools[0].cost.breakdown(prefill) for s in (shipped, free))
    assert limited.by_op.get("power_limit", 0.0) > 0 and "power_limit" not in unlimited.by_op
    assert unlimited.total_s == pytest.approx(limited.total_s - limited.by_op["power_limit"])


def test_the_page_divides_each_pair_with_and_without_the_limit(benchmark_script):
    pl = benchmark_script("power_limit")
    rate = {("b300-hgx", True): 150.0, ("b300-hgx", False): 160.0, ("b200-hgx", True): 120.0,
            ("b200-hgx", False): 125.0, ("gb300-nvl72", True): 90.0, ("gb300-nvl72", False): 90.0,
            ("gb200-nvl72", True): 100.0, ("gb200-nvl72", False): 100.0}
    runs = {pl.Job(hw, "llama2-70b", None, limited): pl.Run("d", r, 0.1, None) for (hw, limited), r in rate.items()}
    text = pl.page(runs)
    assert "| b300-hgx / b200-hgx | llama2-70b | trtllm | 1.25 | 1.28 |" in text  # 150/120, 160/125
    assert "| gb300-nvl72 / gb200-nvl72 | llama2-70b | trtllm | 0.90 | 0.90 |" in text
    assert "| b300-hgx | llama2-70b | trtllm | d | 150 | 160 | +6.7% | 0.100 |" in text
