"""The workloads beyond token generation (docs/workloads.md): Qwen3-VL's vision encoder and end-to-end limits,
Wan 2.2 text-to-video, DLRMv3, edge agentic on Jetson AGX Thor, and the one result shape of every benchmark."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpusim.build import prepare
from gpusim.cli import main
from gpusim.errors import InputError
from gpusim.loadgen import rules
from gpusim.loadgen.agentic import agentic_workload
from gpusim.loadgen.result import early_stopping_latency, result_fields
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS
from gpusim.perf.diffusion import DiffusionCost
from gpusim.perf.step import BatchShape
from gpusim.perf.vision import VisionCost
from gpusim.search import searchable, trial
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import load_software


def run_cli(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def records(latencies: list[float], ttft: float = 0.1, tokens: int = 40) -> pd.DataFrame:
    """Server-like records scheduled one second apart with the given end-to-end latencies."""
    n = len(latencies)
    sched = np.arange(n, dtype=float)
    return pd.DataFrame({"request_id": np.arange(n), "instance": 0, "scheduled_s": sched,
                         "first_token_s": sched + ttft, "completion_s": sched + np.asarray(latencies),
                         "input_tokens": 100, "output_tokens": tokens, "preemptions": 0})


# ---- the result shape ------------------------------------------------------------------------------
def test_result_unit_follows_the_benchmarks_metric():
    s = {"samples_per_s": 2.0, "output_tokens_per_s": 300.0}
    empty = records([1.0])
    assert result_fields(load_benchmark("llama2-70b"), "offline", s, empty) == {"result": 300.0,
                                                                                "result_unit": "tokens/s"}
    assert result_fields(load_benchmark("qwen3-vl-235b-a22b"), "offline", s, empty)["result_unit"] == "samples/s"
    assert result_fields(load_benchmark("qwen3-vl-235b-a22b"), "server", s, empty) == {"result": 2.0,
                                                                                       "result_unit": "queries/s"}
    dlrm = load_benchmark("dlrm-v3")  # one engine request is a batch of user queries
    assert result_fields(dlrm, "offline", s, empty)["result"] == 2.0 * dlrm.samples_per_request
    assert result_fields(load_benchmark("wan-2.2-t2v-a14b"), "singlestream", s, records([3.0]))["result_unit"] == "s"


def test_singlestream_early_stopping_estimate_is_a_conservative_p90():
    lat = np.arange(1, 1001, dtype=float)  # 1000 queries, 1 s .. 1000 s
    est = early_stopping_latency(lat)
    assert np.percentile(lat, 90) < est < lat.max()  # above the plain p90 (confidence), below the max
    assert early_stopping_latency(lat[:30]) == 30.0  # too few queries to set any aside: the slowest
    assert early_stopping_latency(np.array([])) is None


# ---- Qwen3-VL ----------------------------------------------------------------------------------------
def test_vision_encoder_size_matches_the_published_config():
    v = load_model("qwen3-vl-235b-a22b").vision
    assert v.depth * v.block_params == pytest.approx(0.41e9, rel=0.05)  # "~0.41 B blocks" (model_specs)
    assert v.params == pytest.approx(0.58e9, rel=0.12)  # "~0.58 B" with patch embedding and mergers
    assert v.patches_per_token == 4  # 2x2 merge: 32x32 pixels per LM token


def test_vision_cost_is_superlinear_in_image_size():
    hw, model = load_hardware("b300-hgx"), load_model("qwen3-vl-235b-a22b")
    cost = VisionCost(hw, model.vision, load_software("vllm"))
    small, big = cost.seconds(1000), cost.seconds(8000)
    assert big > 8 * small  # full attention within an image grows with its patches squared
    assert cost.seconds(1000, images=4) == pytest.approx(cost.batch_seconds(4000, 4 * 1000**2, 4))


def test_colocated_encoder_adds_to_prefill_steps_only():
    setup = prepare("b300-hgx", "qwen3-vl-235b-a22b", scenario="offline")
    cost = setup.pools[0].cost
    prefill = BatchShape(prefill_tokens=4096, prefill_attn_pairs=4096 * 2048, prefill_seqs=2)
    decode = BatchShape(decode_seqs=64, decode_context=64 * 2000)
    assert cost.step_time(prefill) > cost.llm.step_time(prefill)
    assert cost.step_time(decode) == cost.llm.step_time(decode)


def test_encoder_pool_serves_images_before_the_language_model():
    base = prepare("b300-hgx", "qwen3-vl-235b-a22b", scenario="offline")
    setup = base.with_deployment(base.deployment.model_copy(update={"vision_encoder_gpus": 2}))
    assert [p.role for p in setup.pools] == ["encode", "aggregated"]
    assert setup.num_gpus == 8 and setup.pools[1].count == 6
    t = trial(setup, "offline", samples=300)
    done = t.result.requests
    assert len(done) == 300 and done["completion_s"].notna().all()
    assert (done["first_token_s"] > 0).all()
    lm = set(range(2, 8))
    assert set(done["instance"]) <= lm  # every request finished on a language-model instance


def test_encoder_pool_needs_a_vision_model():
    base = prepare("b300-hgx", "llama2-70b", scenario="offline")
    with pytest.raises(InputError, match="vision_encoder_gpus"):
        base.with_deployment(base.deployment.model_copy(update={"vision_encoder_gpus": 2}))


def test_qwen3_vl_server_is_judged_on_end_to_end_latency():
    bench = load_benchmark("qwen3-vl-235b-a22b")
    # TTFT of 5 s would fail any token-latency limit; Qwen3-VL judges only the 12 s end-to-end p99
    ok = rules.check(records([11.0] * 1000, ttft=5.0), bench, "server", min_duration_s=1.0)
    assert ok.perf_constraints_met and ok.valid
    late = rules.check(records([11.0] * 980 + [13.0] * 20, ttft=5.0), bench, "server", min_duration_s=1.0)
    assert not late.perf_constraints_met
    assert any("latency constrain not met" in r for r in late.reasons)
    interactive = rules.check(records([2.0] * 1000), bench, "interactive", min_duration_s=1.0)
    assert not interactive.valid  # 1.5 s end-to-end


def test_validation_runs_qwen3_vl_rows_with_vllm():
    from gpusim.analysis.published import map_row
    from gpusim.validate.mlperf import software_for_row

    row = map_row({"num_accelerators": 8, "accelerator": "NVIDIA B300-SXM-270GB", "benchmark": "qwen3-vl-235b-a22b",
                   "unit": "queries/s", "scenario": "Server", "round": "v6.1", "value": 104.578, "system": "x"})
    assert (row.hardware, row.benchmark, row.scenario) == ("b300-hgx", "qwen3-vl-235b-a22b", "server")
    assert software_for_row(row)[0] == "vllm"


def test_prompt_scale_moves_the_median_from_the_published_samples():
    from gpusim.calibrate.prompt_scale import scaled

    bench = load_benchmark("qwen3-vl-235b-a22b")
    log_mean = bench.input_tokens.fitted_to["log_mean"]
    assert log_mean == pytest.approx(np.log([809, 1366, 1520, 1677, 1946, 2355, 2436, 2922, 3145, 3738, 4398,
                                             4518, 4876, 5409, 6778, 6902, 9279, 11008, 16176, 61566]).mean(),
                                     abs=1e-4)
    assert math.exp(scaled(bench, 0.5).input_tokens.mu - log_mean) == pytest.approx(0.5)


# ---- Wan 2.2 -------------------------------------------------------------------------------------------
def test_wan_latent_and_expert_switch():
    model, gen = load_model_spec("wan-2.2-t2v-a14b")
    assert model.latent_tokens(gen) == 21 * 45 * 80  # (81-1)/4+1 frames, 720/16, 1280/16
    assert model.expert_params == pytest.approx(14.0e9, rel=0.05)  # ~14 B per expert (model_specs)
    # shifted timesteps t = 12 s / (1 + 11 s), s = 1 - i/20: t >= 0.875 while s >= 0.875/2.375
    assert model.high_noise_steps(gen) == sum(1 - i / 20 >= 0.875 / 2.375 for i in range(20))


def load_model_spec(benchmark: str):
    setup = prepare("gb300-nvl72", benchmark, scenario="offline")
    return setup.model, setup.bench.generation


def test_a_rack_serves_one_video_faster_than_a_node_and_more_at_once():
    rack = prepare("gb300-nvl72", "wan-2.2-t2v-a14b", scenario="singlestream")
    node = prepare("b300-hgx", "wan-2.2-t2v-a14b", scenario="singlestream")
    one = BatchShape(prefill_tokens=1, prefill_seqs=1)
    assert rack.pools[0].cost.step_time(one) < node.pools[0].cost.step_time(one)
    assert rack.deployment.tp == 72 and node.deployment.tp == 8
    many = prepare("gb300-nvl72", "wan-2.2-t2v-a14b", scenario="offline")
    assert many.expected_qps() > prepare("b300-hgx", "wan-2.2-t2v-a14b", scenario="offline").expected_qps()


def test_sequence_parallel_communication():
    hw = load_hardware("gb300-nvl72")
    model, gen = load_model_spec("wan-2.2-t2v-a14b")
    alone = DiffusionCost(hw, model, gen, Deployment(tp=1, weights="fp8", activations="fp8"))
    spread = DiffusionCost(hw, model, gen, Deployment(tp=16, weights="fp8", activations="fp8"))
    assert alone.pass_seconds()["communication"] == 0
    assert spread.cfg_groups == 2 and spread.sp == 8
    assert spread.pass_seconds()["communication"] > 0
    # 8-way sequence parallelism cuts a pass's compute about 8 ways
    compute = lambda c: c.pass_seconds()["gemm"] + c.pass_seconds()["attention"]  # noqa: E731
    assert compute(alone) / compute(spread) == pytest.approx(8, rel=0.2)


def test_wan_mlperf_singlestream_and_offline(capsys):
    ss = run_cli(capsys, "mlperf", "--hardware", "gb300-nvl72", "--benchmark", "wan-2.2-t2v-a14b",
                 "--scenario", "singlestream", "--duration", "600", "--json")
    assert ss["result_unit"] == "s" and ss["result"] > 0 and ss["num_gpus"] == 72
    off = run_cli(capsys, "mlperf", "--hardware", "gb300-nvl72", "--benchmark", "wan-2.2-t2v-a14b",
                  "--scenario", "offline", "--duration", "600", "--json")
    assert off["result_unit"] == "samples/s"
    assert off["result"] > 1 / ss["result"]  # 72 videos at once beat one video at a time


def test_wan_has_no_server_scenario(capsys):
    code = main(["mlperf", "--hardware", "b300-hgx", "--benchmark", "wan-2.2-t2v-a14b", "--scenario", "server",
                 "--json"])
    assert code == 2
    err = capsys.readouterr().err
    assert "no server scenario" in err and "Traceback" not in err


# ---- DLRMv3 --------------------------------------------------------------------------------------------
def test_dlrm_tables_need_several_gpus():
    setup = prepare("b300-hgx", "dlrm-v3", scenario="offline")
    assert setup.model.tables["item_id"].bytes == 1.024e12  # 1B x 512 x FP16
    assert setup.model.embedding_bytes == pytest.approx(1.034e12, rel=0.01)  # + the 10M-user table
    assert setup.deployment.tp * 268 * 2**30 * 0.9 >= setup.model.embedding_bytes
    with pytest.raises(InputError, match="tp"):
        setup.with_deployment(setup.deployment.model_copy(update={"tp": 1}))


def test_embedding_cache_removes_fabric_traffic():
    base = prepare("b300-hgx", "dlrm-v3", scenario="offline")
    cached = base.with_deployment(base.deployment.model_copy(update={"embedding_cache_hit_rate": 1.0}))
    b = BatchShape(prefill_tokens=5000, prefill_attn_pairs=5000 * 2500, prefill_seqs=1)
    assert base.pools[0].cost.parts(b)["embedding_alltoall"] > cached.pools[0].cost.parts(b)["embedding_alltoall"]
    assert cached.pools[0].cost.step_time(b) < base.pools[0].cost.step_time(b)


def test_dlrm_mlperf_offline_and_server(capsys):
    off = run_cli(capsys, "mlperf", "--hardware", "b300-hgx", "--benchmark", "dlrm-v3", "--scenario", "offline",
                  "--duration", "600", "--json")
    assert off["result_unit"] == "samples/s" and off["valid"]
    server = trial(prepare("b300-hgx", "dlrm-v3", scenario="server"), "server", off["samples_per_s"] / 4, 60.0)
    assert server.checks.latency_limit_s == 0.1
    assert server.result.summary["result_unit"] == "queries/s"


# ---- edge agentic on Jetson AGX Thor --------------------------------------------------------------------
def test_agentic_turns_grow_and_reuse_their_context():
    bench = load_benchmark("qwen3.6-27b")
    wl = agentic_workload(bench, seed=0, turns=16)
    turns = bench.agentic.turns
    prompts, out = wl.input_tokens, wl.output_tokens
    for t in range(1, turns):
        assert prompts[t] > prompts[t - 1] + out[t - 1]  # the previous answer and a new message
        shared = (prompts[t - 1] + out[t - 1]) // PREFIX_BLOCK_TOKENS  # the previous prompt's and answer's full blocks
        assert wl.prefix_hashes[t][:shared] == wl.prefix_hashes[t - 1][:shared]
        assert wl.prefix_hashes[t][shared] != wl.prefix_hashes[t - 1][shared]  # its partial block changed
        assert wl.answer_hashed
    assert wl.prefix_hashes[turns][0] != wl.prefix_hashes[0][0]  # a new session shares nothing
    assert wl.concurrency == 1


def test_thor_singlestream_run(capsys):
    r = run_cli(capsys, "run", "--hardware", "jetson-agx-thor", "--benchmark", "qwen3.6-27b",
                "--scenario", "singlestream", "--samples", "24", "--json")
    assert r["result_unit"] == "s" and r["num_gpus"] == 1
    assert r["prefix_hit_rate"] > 0.3  # later turns find their context cached
    weights = load_model("qwen3.6-27b").total_params * 0.5  # >= 4-bit weights read once per decode step
    assert r["tpot_p50_s"] > weights / 273e9


def test_item_workloads_skip_the_layout_search():
    assert not searchable(prepare("b300-hgx", "dlrm-v3", scenario="offline"), "offline")
    assert searchable(prepare("b300-hgx", "qwen3-vl-235b-a22b", scenario="offline"), "offline")
    assert not searchable(prepare("b300-hgx", "llama2-70b", scenario="offline"), "singlestream")


def test_plots_use_the_per_sample_result():
    from gpusim.analysis.plots import throughput

    df = pd.DataFrame({"result": [10.0, 20.0], "result_unit": ["samples/s", "samples/s"],
                       "output_tokens_per_s": [1.0, 2.0]})
    values, unit = throughput(df)
    assert unit == "samples/s" and list(values) == [10.0, 20.0]
    tokens = df.assign(result_unit="tokens/s")
    assert throughput(tokens)[1] == "tokens/s" and list(throughput(tokens)[0]) == [1.0, 2.0]


def test_qwen36_hybrid_sizes_match_the_reference():
    m = load_model("qwen3.6-27b")
    assert m.total_params == pytest.approx(26.9e9, rel=0.02)  # "~26.9 B text" (model_specs)
    assert m.kv_bytes_per_token(2) == 65536  # 16 full-attention layers x 2 x 4 KV heads x 256 x 2 B
    assert m.state_bytes_per_sequence == pytest.approx(153_944_064, rel=0.02)  # ~147 MiB of fp32 state


def test_show_model_reads_every_kind(capsys):
    for name in ("wan2.2-t2v-a14b", "dlrm-v3", "qwen3-vl-235b-a22b"):
        assert main(["show", "model", name]) == 0
        assert f"id: {name}" in capsys.readouterr().out


def test_a_sweep_over_item_workloads_plots_their_result(tmp_path):
    from gpusim import sweep
    from gpusim.analysis.plots import generations

    spec = tmp_path / "sweep.yaml"
    spec.write_text("benchmark: wan-2.2-t2v-a14b\nsamples: 16\nscenario: offline\n"
                    "grid:\n  hardware: [b300-hgx, gb300-nvl72]\n  deployment.tp: [1, 2]\n")
    sweep.run_sweep(spec, tmp_path / "out", workers=1, progress=False)
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert set(df["result_unit"]) == {"samples/s"} and len(df) == 4
    one_gpu = df[df["deployment.tp"] == 1].set_index("hardware")["result"]
    assert one_gpu["gb300-nvl72"] > one_gpu["b300-hgx"]  # 16 videos at once on 72 GPUs, in two rounds on 8
    generations(df, tmp_path)
