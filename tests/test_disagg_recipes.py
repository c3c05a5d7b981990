"""InferenceX's multi-node recipes (gpusim/validate/disagg_recipes.py): read from the search space's history,
looked up by a silicon row's setup and dump date, and the pools a row with unstated workers is read as."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess

import pandas as pd
import pytest

from gpusim.validate.disagg_recipes import (
    RecipeFile,
    _benchmarks,
    extract,
    find_recipes,
    read_recipe_file,
    recipes_table,
)
from gpusim.validate.silicon import predict_case, row_case

SPACE = """
dsr1-fp4-gb200-dynamo-trt:
  model-prefix: dsr1
  runner: gb200
  precision: fp4
  framework: dynamo-trt
  multinode: true
  disagg: true
  seq-len-configs:
  - isl: 1024
    osl: 1024
    search-space:
    - conc-list: [5, 9]
      prefill:
        num-worker: 1
        tp: 4
        ep: 4
        dp-attn: true
        additional-settings:
        - "CONFIG_FILE=recipes/trtllm/gb200-fp4/1k1k/stp/ctx1_gen4_tep8_batch1_eplb0_mtp0.yaml"
      decode: {num-worker: 4, tp: 8, ep: 8, dp-attn: false}
    - spec-decoding: mtp
      conc-list: [5]
      prefill:
        num-worker: 1
        tp: 4
        ep: 4
        dp-attn: true
        additional-settings:
        - "CONFIG_FILE=recipes/trtllm/gb200-fp4/1k1k/mtp/ctx1_gen4_tep8_batch{B}_eplb0_mtp3.yaml"
      decode: {num-worker: 4, tp: 8, ep: 8, dp-attn: false}
dsr1-fp4-b200-trt:
  runner: b200
  precision: fp4
  framework: trt
  multinode: false
  seq-len-configs: []
"""


def test_search_space_benchmarks_one_per_concurrency_with_batch_and_mtp_from_the_recipe_name() -> None:
    import yaml

    rows = _benchmarks(yaml.safe_load(SPACE.replace("{B}", "8")))
    assert [(r["concurrency"], r["spec"], r["decode_batch"], r["mtp_depth"]) for r in rows] == [
        (5, "none", 1, None), (9, "none", 1, None), (5, "mtp", 8, 3)]
    assert {(r["model"], r["system"], r["decode_workers"], r["decode_dp_attn"]) for r in rows} == {
        ("dsr1", "gb200", 4, False)}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_history_spans_and_the_revision_in_force_on_the_dump_date(tmp_path) -> None:
    """Two revisions: the MTP recipe's batch is 8 from 2026-02-01, 16 from 2026-03-01. A row dumped on
    2026-02-15 ran batch 8, one dumped on 2026-03-10 batch 16; the plain recipe spans both."""
    repo, path = tmp_path / "ix", tmp_path / "ix" / ".github" / "configs" / "nvidia-master.yaml"
    path.parent.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for batch, date in ((8, "2026-02-01T12:00:00"), (16, "2026-03-01T12:00:00")):
        path.write_text(SPACE.replace("{B}", str(batch)))
        env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"batch {batch}"], check=True, env=env)
    table = extract(repo, since="2026-01-01", until="2026-04-01")
    assert len(table) == 4  # conc 5 and 9 plain (one span each), the MTP recipe twice (batch 8, batch 16)
    plain = table[(table.spec == "none") & (table.concurrency == 5)].iloc[0]
    assert plain.listed_from == "2026-02-01" and pd.isna(plain.listed_until)  # still listed by the last revision
    eight = table[table.decode_batch == 8].iloc[0]
    assert (eight.listed_from, eight.listed_until) == ("2026-02-01", "2026-03-01")

    def found(dump: str | None) -> set[tuple[bool, int | None]]:
        hits = find_recipes("deepseek-r1", "gb200", "trtllm", "fp4", 1024, 1024, 5, dump, (4, 4), 8, table)
        return {(r.mtp, r.decode_batch) for r in hits}

    assert found("2026-02-15") == {(False, 1), (True, 8)}
    assert found("2026-03-10") == {(False, 1), (True, 16)}
    assert found("2026-01-15") == set()  # before the first revision
    assert find_recipes("deepseek-r1", "gb200", "trtllm", "fp4", 1024, 1024, 5, None, (4, 4), 16, table) == []


def _gb200_row(concurrency: int, decode_tp: int, osl: int = 1024) -> dict:
    """A disaggregated DeepSeek-R1 row as the 2026-03-25 dump has them: worker counts empty."""
    return {"id": f"2026_03_25_deepseek_r1_gb200_trtllm_fp4_disagg_1024x{osl}_c{concurrency}_tp4_0_ep4_0_1",
            "silicon_data_source": f"source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency={concurrency}",
            "backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1", "system": "gb200", "precision": "fp4",
            "mode": "disagg", "isl": 1024, "osl": osl, "gemm_quant_mode": "fp4", "moe_quant_mode": "fp4",
            "prefill_tp_size": 4, "prefill_pp_size": 1, "prefill_attention_dp_size": 1, "prefill_moe_tp_size": 1,
            "prefill_moe_ep_size": 4, "decode_tp_size": decode_tp, "decode_pp_size": 1,
            "decode_attention_dp_size": 1, "decode_moe_tp_size": 1, "decode_moe_ep_size": 4}


TRT_FILE = """
frontend:
  type: dynamo
{FRONT}
backend:
  trtllm_config:
    decode:
      enable_attention_dp: {ADP}
      tensor_parallel_size: 8
      max_batch_size: 16
"""
SGLANG_FILE = """
backend:
  sglang_config:
    decode:
      max-running-requests: 128
      tensor-parallel-size: 4
"""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_recipe_file_names_its_front_ends_and_its_decode_cap(tmp_path) -> None:
    """srt-slurm stands up ten Dynamo frontends behind nginx unless the file sets enable_multiple_frontends
    false, or num_additional_frontends + 1 where it names them; the decode cap is TensorRT-LLM's max_batch_size
    per attention-DP rank times the ranks, SGLang's max-running-requests per worker. A file the revision before
    the date lacks reads as nothing, and one deleted before the date as it stood before its deletion."""
    repo = tmp_path / "srt"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    files = {"one.yaml": TRT_FILE.format(FRONT="  enable_multiple_frontends: false", ADP="false"),
             "ten.yaml": TRT_FILE.format(FRONT="", ADP="true"),
             "four.yaml": TRT_FILE.format(FRONT="  num_additional_frontends: 3", ADP="false"),
             "sglang.yaml": SGLANG_FILE}
    for name, text in files.items():
        (repo / name).write_text(text)
    env = {**os.environ, "GIT_COMMITTER_DATE": "2026-02-01T12:00:00", "GIT_AUTHOR_DATE": "2026-02-01T12:00:00"}
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "recipes"], check=True, env=env)
    read = {name: read_recipe_file(repo, name, "2026-03-01") for name in files}
    assert read == {"one.yaml": RecipeFile(1, 16), "ten.yaml": RecipeFile(10, 16 * 8), "four.yaml": RecipeFile(4, 16),
                    "sglang.yaml": RecipeFile(10, 128)}
    assert read_recipe_file(repo, "one.yaml", "2026-01-15") == RecipeFile(None, None, read=False)
    assert read_recipe_file(repo, "absent.yaml", "2026-03-01") == RecipeFile(None, None, read=False)
    env = {**os.environ, "GIT_COMMITTER_DATE": "2026-02-15T12:00:00", "GIT_AUTHOR_DATE": "2026-02-15T12:00:00"}
    subprocess.run([*git, "rm", "-q", "ten.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "drop"], check=True, env=env)
    assert read_recipe_file(repo, "ten.yaml", "2026-03-01") == RecipeFile(10, 16 * 8)  # as it stood before deletion


def test_shipped_recipes_read_a_gb200_row_as_the_benchmark_inferencex_ran() -> None:
    """InferenceX's search space (2026-03-25) runs DeepSeek-R1 FP4 1k/1k on GB200 at concurrency 5 as
    ctx1_gen4_tep8_batch1_eplb0_mtp0: one DEP4 context worker, four TEP8 generation workers of batch 1;
    at 563 (1k/8k) as ctx1_gen1_dep32_batch16: one DEP32 worker of 16 sequences per rank."""
    assert len(recipes_table()) > 500
    case = row_case(_gb200_row(5, 8))
    p, d = case.deployment.prefill, case.deployment.decode
    assert (p.instances, p.tp, p.attention_dp) == (1, 4, True)
    assert (d.instances, d.tp, d.ep, d.attention_dp, d.max_batch_size) == (4, 8, 8, False, 1)
    assert case.deployment.mtp is None
    assert len(case.notes) == 1 and case.notes[0].startswith("InferenceX recipe: ctx1_gen4_tep8_batch1_eplb0_mtp0")
    wide = row_case(_gb200_row(563, 32, osl=8192)).deployment.decode
    assert (wide.instances, wide.tp, wide.attention_dp, wide.max_batch_size) == (1, 32, True, 32 * 16)
    assert case.deployment.expert_balancer is False  # eplb0: TensorRT-LLM's expert load balancer is off
    assert case.deployment.router == "round_robin"  # Dynamo's frontend, which srt-slurm starts with its default
    assert case.deployment.front_ends == 10  # the file leaves srt-slurm's ten frontends behind nginx on


def test_a_row_stating_its_workers_takes_its_recipes_decode_batch_cap() -> None:
    """The export's decode batch column is the concurrency per decode rank (concurrency 5 over four workers:
    1.25), not the engine's cap: InferenceX ran concurrency 5 as ctx1_gen4_tep8_batch1, one sequence per worker,
    so one request always waits for a slot. A row whose setup has no recipe keeps its own column."""
    stated = {**_gb200_row(5, 8), "prefill_num_workers": 1, "decode_num_workers": 4, "decode_batch_size": 2}
    case = row_case(stated)
    assert case.deployment.decode.max_batch_size == 1
    assert any(n.startswith("decode batch cap from the InferenceX recipe: ctx1_gen4_tep8_batch1") for n in case.notes)
    elsewhere = row_case({**stated, "system": "h100_sxm", "id": stated["id"].replace("gb200", "h100")})
    assert elsewhere.deployment.decode.max_batch_size == 2  # no recipe for the setup: the column stands


def test_the_recipe_file_names_the_expert_load_balancer() -> None:
    """`eplb0`: no balancer; `eplb288`: 288 slots per layer, 32 of them replicas of DeepSeek-R1's 256 experts;
    a file without the token (SGLang's recipes) says nothing, and the profile's balanced default stays."""
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model
    from gpusim.validate.disagg_recipes import DisaggRecipe
    from gpusim.validate.silicon import _recipe_deployment

    def recipe(name: str) -> DisaggRecipe:
        return DisaggRecipe(1, 4, 4, True, 1, 32, 32, True, False, None, 16, f"recipes/{name}.yaml", "abc",
                            "2026-03-01")

    names = ("ctx1_gen1_dep32_batch16_eplb0_mtp0", "ctx1_gen1_dep32_batch16_eplb288_mtp0", "low-latency-dep4-1p-tep8")
    assert [recipe(n).eplb_slots for n in names] == [0, 288, None]
    r1, hw = load_model("deepseek-r1"), load_hardware("gb200-nvl72")
    deps = [_recipe_deployment(recipe(n), r1, hw, 512, 1, {})[0] for n in names]
    assert [(d.expert_balancer, d.redundant_experts) for d in deps] == [(False, 0), (True, 32), (True, 0)]


def test_mtp_recipe_runs_its_depth_at_the_acceptance_measured_on_inferencex_prompts() -> None:
    """Concurrency 4 on GB200 1k/1k: ctx1_gen4_tep8_batch8_eplb0_mtp3, speculative decoding MTP, on InferenceX's
    random prompts under the chat template: 2.50 tokens per step at 3 drafts (deepseek-r1.yaml's mtp_measured),
    not the 2.8 of the default acceptance (0.85, 0.7, 0.6) measured on real text."""
    case = row_case(_gb200_row(4, 8))
    assert case.notes[0].startswith("InferenceX recipe with MTP: ctx1_gen4_tep8_batch8_eplb0_mtp3")
    mtp = case.deployment.mtp
    assert mtp.depth == 3
    assert mtp.expected_tokens_per_step == pytest.approx(2.50, abs=1e-6)
    assert "InferenceX PR 649" in mtp.source


def test_a_full_decode_pool_delays_the_first_token_by_littles_law() -> None:
    """Five requests in a closed loop over four decode slots of one sequence each (the recipe above). A slot
    frees every G/4 on average (G: a request's generation time) and the fifth request takes it, so with the
    slots always busy Little's law gives a mean time to the first token (streamed once the decode worker
    takes the request) of G/4; it is at least that, and at most G/4 plus the pipeline's own latency (the
    same pools with room for two sequences per worker). One front end: with several, a request may wait at a busy
    worker while another is free (`test_front_ends_route_on_their_own_turns`)."""
    case = row_case(_gb200_row(5, 8))
    case = dataclasses.replace(case, deployment=case.deployment.model_copy(update={"front_ends": 1}))
    pred = predict_case(case, waves=20)
    quarter = 0.9 * 1023 * pred.tpot_ms / 4  # the client's output lengths are uniform in [0.8, 1] x OSL
    roomy = dataclasses.replace(case, deployment=case.deployment.model_copy(update={
        "decode": case.deployment.decode.model_copy(update={"max_batch_size": 2})}))
    own = predict_case(roomy, waves=20).ttft_steady_ms
    assert own < quarter / 3
    assert quarter <= pred.ttft_steady_ms <= quarter + own


def test_recipes_differing_only_in_a_batch_cap_the_row_does_not_reach_are_one_layout(monkeypatch) -> None:
    """Concurrency 5 on four TEP8 workers: caps of 8 and 16 sequences per worker both hold every request (one
    layout, read); caps of 1 and 16 do not agree on whether a request waits (several layouts, the rule)."""
    import gpusim.validate.silicon as silicon
    from gpusim.validate.disagg_recipes import DisaggRecipe

    def recipe(batch: int) -> DisaggRecipe:
        return DisaggRecipe(1, 4, 4, True, 4, 8, 8, False, False, None, batch, f"ctx1_gen4_tep8_batch{batch}.yaml",
                            "abc", "2026-03-01")

    monkeypatch.setattr(silicon, "find_recipes", lambda *a, **k: [recipe(8), recipe(16)])
    assert row_case(_gb200_row(5, 8)).notes[0].startswith("InferenceX recipe: ctx1_gen4_tep8_batch8")
    monkeypatch.setattr(silicon, "find_recipes", lambda *a, **k: [recipe(1), recipe(16)])
    assert any(n.startswith("InferenceX recipes disagree") for n in row_case(_gb200_row(5, 8)).notes)
