"""The `gpusim` command: the JSON contract, and bad input as one line with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpusim.cli import main

SUMMARY_KEYS = {
    "hardware", "systems", "num_gpus", "benchmark", "model", "scenario", "target_qps", "deployment",
    "simulated_s", "output_tokens", "output_tokens_per_s", "output_tokens_per_s_per_gpu", "completed_requests",
    "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "valid",
}
SMALL = ["--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--samples", "200"]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_has_the_contract_keys(capsys):
    code, out, _ = run_cli(capsys, "run", *SMALL, "--scenario", "offline", "--json")
    assert code == 0
    summary = json.loads(out)
    assert set(summary) >= SUMMARY_KEYS
    assert summary["valid"] is None and summary["completed_requests"] == 200
    assert summary["num_gpus"] == 8 and summary["output_tokens_per_s"] > 0


def test_server_run_has_a_verdict(capsys):
    code, out, _ = run_cli(capsys, "run", *SMALL, "--scenario", "server", "--qps", "5", "--duration", "20",
                           "--json")
    assert code == 0
    assert json.loads(out)["valid"] in (True, False)


def test_an_overloaded_run_says_its_loadgen_figure_is_not_sustained(capsys):
    """LoadGen's Server figure of an overloaded run counts tokens to the last-scheduled query's completion, more
    than the deployment can serve: the throughput line says so, as the load line below it does; a run that keeps up
    has no such note."""
    base = ["run", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "server", "--duration", "10"]
    for qps, overloaded in (("3000", True), ("20", False)):
        code, out, _ = run_cli(capsys, *base, "--qps", qps)
        line = next(x for x in out.splitlines() if x.startswith("throughput"))
        assert code == 0 and ("overloaded, see load" in line) == overloaded == ("load        overloaded" in out)


def test_out_dir_gets_parquet_csv_and_summary(capsys, tmp_path):
    import pandas as pd

    code, _, _ = run_cli(capsys, "run", *SMALL, "--scenario", "offline", "--out", str(tmp_path / "o"))
    assert code == 0
    df = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    assert len(df) == 200 and len(pd.read_csv(tmp_path / "o" / "requests.csv")) == 200
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["completed_requests"] == 200


def test_experiment_yaml_runs_and_flags_override(capsys, tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text("hardware: b200-hgx\nbenchmark: llama2-70b\nscenario: offline\nsamples: 50\n")
    code, out, _ = run_cli(capsys, "run", str(exp), "--samples", "60", "--json")
    assert code == 0 and json.loads(out)["completed_requests"] == 60


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--hardware", "h900-hgx"], "valid: b200-hgx"),
        (["run", "--benchmark", "gpt-5"], "deepseek-r1, dlrm-v3"),
        (["run", "--hardware", "h100-hgx", "--benchmark", "deepseek-r1"], "short by"),
        (["run", *SMALL, "--scenario", "server", "--qps", "-3"], "qps"),
        (["run", *SMALL, "--scenario", "server", "--qps", "0"], "qps"),
        (["run", *SMALL, "--scenario", "server"], "needs qps"),
        (["run", *SMALL, "--scenario", "concurrency", "--concurrency", "4"], "needs isl"),
        (["show", "hardware", "nope"], "valid:"),
        (["run", "--hardware", "vr-nvl72", "--timing", "table"], "timing: no measured kernel tables"),
        (["run", *SMALL, "--software", "trtllm-v4"], "unknown 'trtllm-v4'; valid: sglang, trtllm, trtllm-v5.1"),
        (["run", "--hardware", "gb300-nvl72", "--software", "trtllm-v5.1", "--deployment",
          "experiments/deployments/gb300-deepseek-r1-wide-ep.yaml"], "ep: software trtllm-v5.1 does not run expert"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(capsys, args, needle):
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and out == ""


def test_software_replaces_the_deployments_own_and_keeps_its_layout(capsys):
    code, out, _ = run_cli(capsys, "run", *SMALL, "--scenario", "offline", "--json")
    v6 = json.loads(out)
    code, out, _ = run_cli(capsys, "run", *SMALL, "--scenario", "offline", "--software", "trtllm-v5.1", "--json")
    v51 = json.loads(out)
    assert code == 0 and v51["deployment"]["software"] == "trtllm-v5.1" and v6["deployment"]["software"] == "trtllm"
    assert {k: v for k, v in v51["deployment"].items() if k != "software"} == \
        {k: v for k, v in v6["deployment"].items() if k != "software"}
    assert v51["output_tokens_per_s"] < v6["output_tokens_per_s"]  # the older generation's kernels are slower


def test_deployment_errors_name_the_file_and_field(capsys, tmp_path):
    too_wide = tmp_path / "tp16.yaml"
    too_wide.write_text("tp: 16\n")
    code, _, err = run_cli(capsys, "run", *SMALL, "--deployment", str(too_wide))
    assert code == 2 and str(too_wide) in err and "tp" in err and "NVLink domain" in err
    fp4 = tmp_path / "fp4.yaml"
    fp4.write_text("weights: fp4\nactivations: fp4\ntp: 2\n")  # FP4 compute; weight-only fp4 would run
    code, _, err = run_cli(capsys, "run", "--hardware", "h100-hgx", "--benchmark", "llama2-70b",
                           "--deployment", str(fp4))
    assert code == 2 and "weights" in err and "valid: bf16, fp8" in err.replace("fp8, bf16", "bf16, fp8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tp: [1, 2\n")
    code, _, err = run_cli(capsys, "run", *SMALL, "--deployment", str(bad))
    assert code == 2 and "malformed YAML" in err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("tensor_parallel: 2\n")
    code, _, err = run_cli(capsys, "run", *SMALL, "--deployment", str(unknown))
    assert code == 2 and "tensor_parallel" in err


def test_trace_with_missing_columns_fails_cleanly_and_writes_nothing(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n")
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", *SMALL, "--scenario", "trace", "--trace", str(trace), "--out", str(out))
    assert code == 2 and "GeneratedTokens" in err
    assert not out.exists()


def test_console_script_exit_status_and_single_line():
    proc = subprocess.run([sys.executable, "-m", "gpusim.cli", "run", "--hardware", "nope"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "hardware" in proc.stderr


def test_list_and_show(capsys):
    code, out, _ = run_cli(capsys, "list", "hardware")
    assert code == 0 and "gb300-nvl72" in out and "vr-nvl72" in out
    code, out, _ = run_cli(capsys, "show", "hardware", "gb300-nvl72")
    assert code == 0 and "system_fp4_pflops" in out and "source" in out


def test_a_negative_seed_is_one_line_naming_the_field(capsys):
    code, _, err = run_cli(capsys, "run", *SMALL, "--seed", "-1")
    assert code == 2 and "seed: Input should be greater than or equal to 0" in err and err.count("\n") == 1


def test_a_misspelt_api_option_names_the_valid_one():
    import gpusim
    from gpusim.errors import InputError

    with pytest.raises(InputError, match="duration: unknown field; did you mean 'duration_s'"):
        gpusim.run("b200-hgx", "llama2-70b", "server", qps=5, duration=120)


def test_costs_file_on_run_replaces_the_price(capsys, tmp_path):
    costs = tmp_path / "costs.yaml"
    _, out, _ = run_cli(capsys, "run", *SMALL, "--json")
    base = json.loads(out)
    costs.write_text("capex_usd: 660000\n")  # twice the node price of hardware_profiles/costs.yaml
    _, out, _ = run_cli(capsys, "run", *SMALL, "--json", "--costs", str(costs))
    dear = json.loads(out)
    assert dear["usd_per_million_tokens"] > base["usd_per_million_tokens"]
    assert dear["energy_j_per_token"] == base["energy_j_per_token"]
    costs.write_text("capex: 1\n")
    code, _, err = run_cli(capsys, "run", *SMALL, "--costs", str(costs))
    assert code == 2 and f"{costs}: capex: unknown field; did you mean 'capex_usd'?" in err


def test_the_printed_deployment_shows_the_batch_and_token_limits(capsys):
    _, out, _ = run_cli(capsys, "run", *SMALL, "--json")
    dep = json.loads(out)["deployment"]
    _, out, _ = run_cli(capsys, "run", *SMALL)
    line = next(row for row in out.splitlines() if row.startswith("deployment"))
    assert f"batch ≤ {dep['max_batch_size']}," in line and f"≤ {dep['max_num_tokens']:,} tokens per step" in line


def test_a_deployment_that_recomputes_its_requests_says_so(tmp_path, capsys):
    """One GB200 TP8/EP8 instance with room for 1,024 sequences but KV for about 830 DeepSeek-R1 requests at their
    mean lengths: with every request queued, outputs outgrow the cache and the newest sequences are recomputed."""
    dep = tmp_path / "one.yaml"
    dep.write_text("tp: 8\nep: 8\nmax_batch_size: 1024\nmax_num_tokens: 8192\ninstances: 1\nweights: fp4\n"
                   "activations: fp4\nname: tp8-b1024-one\n")
    args = ["run", "--hardware", "gb200-nvl72", "--benchmark", "deepseek-r1", "--scenario", "offline",
            "--deployment", str(dep), "--samples", "4000"]
    assert main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["preemptions_per_request"] == s["preemptions"] / s["completed_requests"] > 0.1
    assert main(args) == 0
    assert f"preemption  {s['preemptions']:,} recomputes for 4,000 requests" in capsys.readouterr().out
