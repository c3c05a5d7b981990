"""The Python API end to end on real profiles: determinism, defaults, and the memory error."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.deploy import default_deployment
from gpusim.errors import InputError
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model


def small(qps: float = 4.0, **kw):
    return gpusim.run("h200-hgx", "llama2-70b", "server", qps=qps, duration_s=30, **kw)


def test_same_seed_same_result_other_seed_differs():
    a, b, c = small(seed=3), small(seed=3), small(seed=4)
    assert a.summary["output_tokens"] == b.summary["output_tokens"]
    assert a.requests["completion_s"].equals(b.requests["completion_s"])
    assert a.summary["output_tokens"] != c.summary["output_tokens"]


def test_result_has_summary_and_one_row_per_request():
    r = small()
    assert len(r.requests) == r.summary["completed_requests"] == r.summary["issued_requests"]
    assert r.requests["output_tokens"].sum() == r.summary["output_tokens"]


def test_deepseek_r1_does_not_fit_on_one_8x_h100_system():
    with pytest.raises(InputError, match="short by"):
        gpusim.run("h100-hgx", "deepseek-r1", "offline", samples=10)


def test_default_deployment_rule():
    dep = default_deployment(load_hardware("h100-hgx"), load_model("llama2-70b"))
    assert (dep.tp, dep.weights) == (2, "fp8")  # 69 GB of fp8 weights: over half of 80 GiB at tp1
    dep = default_deployment(load_hardware("gb300-nvl72"), load_model("deepseek-r1"))
    assert dep.weights == "fp4" and dep.ep == dep.tp and dep.attention_dp


def test_explicit_instances_count_only_the_gpus_they_use():
    r = gpusim.run("gb300-nvl72", "llama2-70b", "offline", samples=200,
                   deployment=Deployment(instances=2, tp=4, weights="fp4", activations="fp4"))
    assert r.summary["num_gpus"] == 8 and r.summary["hardware_gpus"] == 72
    assert r.summary["output_tokens_per_s_per_gpu"] == pytest.approx(r.summary["output_tokens_per_s"] / 8)


def test_more_load_means_more_latency():
    light, heavy = small(qps=2.0), small(qps=40.0)
    assert heavy.summary["ttft_p99_s"] > light.summary["ttft_p99_s"]
    assert heavy.summary["tpot_p50_s"] > light.summary["tpot_p50_s"]


def test_model_override_serves_another_model_with_the_benchmark_limits():
    r = gpusim.run("h200-hgx", "llama2-70b", "concurrency", model="llama3.1-8b", concurrency=8, isl=512, osl=64,
                   samples=24)
    assert r.summary["model"] == "llama3.1-8b" and r.summary["completed_requests"] == 24
    base = gpusim.run("h200-hgx", "llama2-70b", "concurrency", concurrency=8, isl=512, osl=64, samples=24)
    assert r.summary["tpot_p50_s"] < base.summary["tpot_p50_s"]  # 8B decodes faster than 70B


def test_a_deployment_file_that_states_only_its_layout_gets_the_defaults_for_the_rest(tmp_path):
    from gpusim.build import prepare

    path = tmp_path / "dep.yaml"
    path.write_text("tp: 4\nep: 4\nattention_dp: true\n")
    default = prepare("gb300-nvl72", "deepseek-r1", scenario="offline").deployment
    dep = prepare("gb300-nvl72", "deepseek-r1", deployment=str(path), scenario="offline").deployment
    assert (dep.tp, dep.ep, dep.attention_dp) == (4, 4, True)
    assert (dep.weights, dep.activations, dep.kv_cache) == (default.weights, default.activations, default.kv_cache)
    per_rank = default.max_batch_size // default.attention_ranks
    assert dep.max_batch_size == per_rank * 4 and dep.mtp is None


# ---- gpusim.mlperf and gpusim.search: the CLI's logic with typed options ---------------------------------------
def test_mlperf_gives_what_the_cli_prints_as_json(capsys):
    import json

    from gpusim.cli import main

    args = ["--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "server", "--qps", "40",
            "--duration", "10", "--seed", "2"]
    assert main(["mlperf", *args, "--json"]) == 0
    printed = capsys.readouterr().out
    sub = gpusim.mlperf("b200-hgx", "llama2-70b", "server", qps=40, duration_s=10, seed=2)
    assert json.dumps(sub.summary) + "\n" == printed
    assert sub.summary["peak_qps"] == 40 and "search" not in sub.summary  # a QPS given: judged, not searched
    assert "Scenario : Server" in sub.log_summary


@pytest.mark.parametrize(("call", "misspelt", "meant"), [
    (gpusim.mlperf, "qsp", "qps"), (gpusim.mlperf, "duration", "duration_s"), (gpusim.search, "worker", "workers"),
])
def test_a_misspelt_option_names_the_valid_ones(call, misspelt, meant):
    with pytest.raises(InputError) as info:
        call("b200-hgx", "llama2-70b", "server", **{misspelt: 1})
    assert info.value.source == f"gpusim.{call.__name__}" and info.value.field == misspelt
    assert f"did you mean {meant!r}?" in info.value.message and "valid: hardware, systems" in info.value.message


def test_search_asks_find_best_the_question_it_was_given(monkeypatch):
    from gpusim import submission

    asked = []

    def fake(setup, scenario, duration_s, seed, workers, log, use_cache):
        asked.append((setup.hardware.id, setup.hardware.systems, setup.bench.id, scenario, duration_s, seed, workers,
                      use_cache))
        return "found", None

    monkeypatch.setattr(submission, "find_best", fake)
    assert gpusim.search("b200-hgx", "llama2-70b", "server", systems=2, duration_s=60, workers=3) == "found"
    assert asked == [("b200-hgx", 2, "llama2-70b", "server", 60.0, 0, 3, True)]
    with pytest.raises(InputError, match="no interactive scenario"):
        gpusim.search("b200-hgx", "mixtral-8x7b", "interactive")


def test_the_api_search_is_the_function_and_the_module_still_imports():
    from gpusim.search import peak_qps

    assert callable(gpusim.search) and gpusim.search.__module__ == "gpusim.api" and callable(peak_qps)
