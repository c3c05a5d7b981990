"""`gpusim mlperf`: the JSON contract, the LoadGen-style summary, bad input, experiments, real LoadGen (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpusim.cli import main

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"result_tokens_per_s", "result_tokens_per_s_per_gpu", "valid", "peak_qps", "deployment", "ttft_p99_s",
        "tpot_p99_s", "num_gpus"}
B200 = ["--hardware", "b200-hgx", "--benchmark", "llama2-70b"]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_server_peak_is_valid_with_a_peak_qps(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "mlperf", *B200, "--scenario", "server", "--duration", "20", "--json",
                           "--out", str(tmp_path))
    assert code == 0
    r = json.loads(out)
    assert set(r) >= KEYS
    assert r["valid"] is True and r["peak_qps"] > 0 and r["num_gpus"] == 8
    assert r["ttft_p99_s"] <= 2.0 and r["tpot_p99_s"] <= 0.2
    assert r["lowest_invalid_qps"] > r["peak_qps"]
    text = (tmp_path / "mlperf_log_summary.txt").read_text()
    assert "Scenario : Server" in text and "Result is : VALID" in text
    assert "TTFT Early Stopping Result:" in text and "Completed tokens per second" in text
    assert json.loads((tmp_path / "summary.json").read_text())["peak_qps"] == r["peak_qps"]
    low, high = r["result_draw_range"]  # the figure in expectation over the last query's draw, and its spread
    assert r["result"] == r["result_tokens_per_s"] and low <= r["result"] <= high
    assert r["loadgen_tokens_per_s_this_draw"] > 0 and "expected tokens/s" in text


def test_offline_prints_a_loadgen_style_summary(capsys):
    code, out, _ = run_cli(capsys, "mlperf", *B200, "--scenario", "offline", "--duration", "30", "--quiet")
    assert code == 0
    assert "Scenario : Offline" in out and "Tokens per second:" in out and "Result is : VALID" in out
    assert "Early Stopping Result" not in out  # Offline has no latency bound


def test_an_overloaded_qps_is_invalid_for_ttft(capsys):
    code, out, _ = run_cli(capsys, "mlperf", *B200, "--scenario", "server", "--qps", "3000", "--duration", "10",
                           "--json")
    r = json.loads(out)
    assert code == 0 and r["valid"] is False and r["peak_qps"] == 3000
    assert r["invalid_reason"].startswith("TTFT constrain not met")
    assert r["early_stopping"]["TTFT"]["met"] is False


@pytest.mark.parametrize("args", [
    ["--scenario", "server"],                                             # no hardware
    [*B200, "--scenario", "server", "--duration", "-5"],
    ["--hardware", "nope", "--benchmark", "llama2-70b", "--scenario", "offline"],
    [*B200, "--scenario", "offline", "--qps", "10"],
    ["--hardware", "b200-hgx", "--benchmark", "mixtral-8x7b", "--scenario", "interactive"],
    ["--hardware", "vr-nvl72", "--benchmark", "deepseek-r1", "--scenario", "offline", "--timing", "table"],
])
def test_bad_input_is_one_line_and_exit_2(capsys, args):
    code, out, err = run_cli(capsys, "mlperf", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gpusim: error:")


def test_timing_table_times_kernels_from_the_measured_tables(capsys):
    """`--timing table` reaches the simulation: the summary says so and the result differs from the roofline's."""
    pytest.importorskip("aiconfigurator_core")
    args = ["mlperf", *B200, "--scenario", "offline", "--duration", "20", "--json"]
    results = {}
    for timing in ("roofline", "table"):
        code, out, _ = run_cli(capsys, *args, "--timing", timing)
        assert code == 0
        results[timing] = json.loads(out)
        assert results[timing]["timing"] == timing
    assert results["table"]["result_tokens_per_s"] != pytest.approx(results["roofline"]["result_tokens_per_s"],
                                                                    rel=0.01)


def test_experiment_prints_predicted_beside_published(capsys, shared_dir):
    exp = ROOT / "experiments" / "mlperf" / "b200-hgx-llama2-70b-offline.yaml"
    csv = shared_dir / "reference" / "mlperf_calibration.csv"
    code, out, _ = run_cli(capsys, "mlperf", str(exp), "--duration", "30", "--json", "--published", str(csv))
    assert code == 0
    (row,) = json.loads(out)
    assert row["valid"] and row["published"]["gpus"] == 8
    pub = pd.read_csv(csv)
    newest = pub[pub.accelerator.str.contains("B200") & pub.benchmark.str.startswith("llama2-70b")
                 & (pub.scenario == "Offline")].sort_values("round").iloc[-1]
    assert row["published"]["round"] == newest["round"]
    assert row["published"]["tokens_per_s_per_gpu"] == pytest.approx(newest["value"] / 8)
    assert row["ratio_per_gpu"] == pytest.approx(row["result_tokens_per_s_per_gpu"] * 8 / newest["value"])


def test_every_experiment_file_loads():
    from gpusim.submission import load_experiment

    paths = sorted((ROOT / "experiments" / "mlperf").glob("*.yaml"))
    assert len(paths) >= 14
    for p in paths:
        exp = load_experiment(p)
        assert exp.claim


@pytest.mark.slow
def test_full_duration_server_peak_is_valid(capsys):
    code, out, _ = run_cli(capsys, "mlperf", *B200, "--scenario", "server", "--json")
    r = json.loads(out)
    assert code == 0 and r["valid"] and r["conformant_duration"] and r["peak_qps"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("qps", [180.0, 120.0])
def test_real_loadgen_agrees_with_gpusim(tmp_path, qps):
    """The real LoadGen and gpusim judge the same real-time run: figures within 2%, same verdict.

    At 120 QPS for 3 s both say INVALID (too few queries for early stopping); at 180 QPS both VALID.
    TTFT may also differ by LoadGen's own issue delay (its scheduled time to the SUT's callback), ≤ 5 ms.
    """
    pytest.importorskip("mlperf_loadgen")
    from gpusim.build import prepare
    from gpusim.loadgen.real import run_loadgen
    from gpusim.specs.deployment import Deployment

    setup = prepare("h100-hgx", "llama3.1-8b", deployment=Deployment(tp=1, instances=2))
    run = run_loadgen(setup, "server", tmp_path, qps=qps, min_duration_s=3.0)
    lg, mine = run.loadgen, run.summary
    assert (tmp_path / "mlperf_log_summary.txt").is_file()
    assert lg["valid"] == run.checks.valid
    for key, gkey in (("tokens_per_s", "result_tokens_per_s"), ("ttft_p99_s", "ttft_p99_s"),
                      ("tpot_p99_s", "tpot_p99_s")):
        assert mine[gkey] == pytest.approx(lg[key], rel=0.02, abs=0.005 if key == "ttft_p99_s" else 0), key
