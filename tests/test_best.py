"""`deployment: best`: the search's winner, cached on disk under a key of everything that decides it."""

from __future__ import annotations

import json

import pytest

import gpusim.best as best
from gpusim.build import prepare
from gpusim.cli import main
from gpusim.defaults import read_defaults, replica_peak, searched_default, searched_entry
from gpusim.specs.hardware import load_hardware

SMALL = prepare("b200-hgx", "llama2-70b")


def test_the_cache_key_changes_with_every_input_that_decides_a_search(monkeypatch):
    key = best.search_key(SMALL, "offline", 600.0, 0, None)
    assert best.search_key(prepare("b200-hgx", "llama2-70b"), "offline", 600.0, 0, None) == key
    changed = [
        best.search_key(SMALL, "server", 600.0, 0, None),
        best.search_key(SMALL, "offline", 2400.0, 0, None),
        best.search_key(SMALL, "offline", 600.0, 1, None),
        best.search_key(SMALL, "offline", 600.0, 0, 4),
        best.search_key(prepare("b200-hgx", "llama2-70b", systems=2), "offline", 600.0, 0, None),
        best.search_key(prepare("b300-hgx", "llama2-70b"), "offline", 600.0, 0, None),
        best.search_key(SMALL.with_deployment(SMALL.deployment.model_copy(update={"software": "vllm"})),
                        "offline", 600.0, 0, None),
    ]
    assert key not in changed and len(set(changed)) == len(changed)
    monkeypatch.setattr(best, "code_version", lambda: "another version")
    assert best.search_key(SMALL, "offline", 600.0, 0, None) != key


def test_a_repeated_search_comes_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path))
    first, result = best.find_best(SMALL, "offline", 60.0)
    assert result is not None and not first.cached
    assert list((tmp_path / "search").glob("*.json"))

    def no_search(*args, **kwargs):
        raise AssertionError("searched again")

    monkeypatch.setattr(best, "search_deployments", no_search)
    again, result = best.find_best(SMALL, "offline", 60.0)
    assert result is None and again.cached
    assert again.deployment == first.deployment and again.tokens_per_s == first.tokens_per_s
    with pytest.raises(AssertionError, match="searched again"):
        best.find_best(SMALL, "offline", 90.0)  # another run length misses


def test_the_cache_honours_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUSIM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert best.cache_dir() == tmp_path / "gpusim"


def test_mlperf_with_the_deployment_its_search_wrote_gives_the_same_result(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path / "cache"))
    common = ["mlperf", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "server",
              "--duration", "30", "--json", "--workers", "1"]
    assert main([*common, "--search", "--out", str(tmp_path / "found")]) == 0
    searched = json.loads(capsys.readouterr().out)
    assert main([*common, "--deployment", str(tmp_path / "found" / "deployment.yaml")]) == 0
    replayed = json.loads(capsys.readouterr().out)
    for key in ("peak_qps", "result_tokens_per_s", "ttft_p99_s", "tpot_p99_s", "valid"):
        assert replayed[key] == searched[key], key
    assert main(common) == 0  # a cached search: one confirming run, the same answer
    cached = json.loads(capsys.readouterr().out)
    assert cached["search_cached"] and cached["result_tokens_per_s"] == searched["result_tokens_per_s"]


def test_run_accepts_best_and_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path))
    args = ["run", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "offline",
            "--samples", "500", "--json", "--workers", "1"]
    assert main([*args, "--deployment", "default"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["run", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "concurrency",
                 "--concurrency", "4", "--isl", "64", "--osl", "8", "--deployment", "best"]) == 2
    assert "valid: offline, server or interactive" in capsys.readouterr().err
    searched = read_defaults("b200-hgx").entries["llama2-70b"]["offline"].deployment
    assert default["deployment"]["name"] == searched.name  # the shipped searched default


def test_the_shipped_defaults_answer_only_the_question_they_were_searched_for():
    hw = SMALL.hardware
    table = read_defaults("b200-hgx")
    entry = searched_entry(hw, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 0, 8)
    assert entry == table.entries["llama2-70b"]["server"]
    assert searched_entry(hw, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 0, None) == entry
    other = prepare("b200-hgx", "llama2-70b", systems=2).hardware
    bw = hw.gpu.hbm_bandwidth_tbps
    faster = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={
        "hbm_bandwidth_tbps": bw.model_copy(update={"value": bw.value * 1.1})})})
    misses = [
        (other, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 0, None),  # two systems
        (faster, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 0, None),  # another number
        (hw, "llama2-70b", "llama2-70b", "server", "vllm", table.duration_s, 0, None),
        (hw, "llama2-70b", "llama2-70b", "server", "trtllm", 600.0, 0, None),
        (hw, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 1, None),
        (hw, "llama2-70b", "llama2-70b", "server", "trtllm", table.duration_s, 0, 4),
        (hw, "llama2-70b", "llama3.1-8b", "server", "trtllm", table.duration_s, 0, None),  # another benchmark
    ]
    assert all(searched_entry(*m) is None for m in misses)


def test_a_shipped_question_re_measures_the_shipped_winner_and_no_cache_searches(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path))
    entry = read_defaults("b200-hgx").entries["llama2-70b"]["server"]
    calls = []

    def record(kind):
        def stop(setup, scenario, *args, **kwargs):
            calls.append((kind, setup.deployment, kwargs.get("hint", args[2] if len(args) > 2 else None)))
            raise StopIteration
        return stop

    monkeypatch.setattr(best, "confirm_winner", record("confirm"))
    monkeypatch.setattr(best, "search_deployments", record("search"))
    for use_cache in (True, False):
        with pytest.raises(StopIteration):
            best.find_best(SMALL, "server", None, use_cache=use_cache)
    assert calls[0] == ("confirm", entry.deployment, entry.peak_qps)
    assert calls[1][0] == "search"


def test_a_peak_walk_on_more_systems_starts_from_the_shipped_peak_per_gpu():
    shipped = read_defaults("gb300-nvl72")
    entry = shipped.entries["deepseek-r1"]["server"]
    hw = load_hardware("gb300-nvl72", systems=3)
    dep = searched_default(hw, "deepseek-r1", "server")
    # by hand: three racks of the rack's shipped deployment, searched on one rack's 72 GPUs
    assert entry.searched_gpus == 72
    assert replica_peak(hw, "deepseek-r1", "deepseek-r1", "server", dep, shipped.duration_s, 0) == \
        pytest.approx(3 * entry.peak_qps)
    # another question, another deployment or another run length: no start from it
    assert replica_peak(hw, "deepseek-r1", "deepseek-r1", "server", dep, 600.0, 0) is None
    assert replica_peak(hw, "deepseek-r1", "deepseek-r1", "server", dep, shipped.duration_s, 1) is None
    other = dep.model_copy(update={"name": "fp4-tp8-pp1-ep8-b256-t8192"})
    assert replica_peak(hw, "deepseek-r1", "deepseek-r1", "server", other, shipped.duration_s, 0) is None
