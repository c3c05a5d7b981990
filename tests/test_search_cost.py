"""benchmarks/search_cost.py: the search and `gpusim mlperf --deployment` on the file it wrote agree, and the
table gives the search's cost over each baseline."""

from __future__ import annotations


def test_a_searched_deployment_file_reproduces_the_search(benchmark_script):
    """H200 DeepSeek-R1 Server (a few seconds): three cold commands; the search's `deployment.yaml` run on its own
    reports the same result, peak QPS and verdict, and each wall time is measured."""
    row = benchmark_script("search_cost").measure("h200-hgx", "deepseek-r1", "server")
    assert row["same_result"] and row["tokens_per_s_per_gpu"] > 0
    assert row["search_s"] > 0 and row["mlperf_s"] > 0 and row["run_s"] > 0


def test_the_table_divides_the_search_by_each_baseline(benchmark_script):
    row = {"hardware": "x", "benchmark": "m", "scenario": "server", "deployment": "d", "tokens_per_s_per_gpu": 1234,
           "search_s": 30.0, "mlperf_s": 20.0, "run_s": 6.0, "same_result": False}
    line = benchmark_script("search_cost").table([row]).splitlines()[-1]
    assert line == "| x | m | server | d | 1,234 | 30.0 | 20.0 | 1.5 | 6.0 | 5.0 | no |"
