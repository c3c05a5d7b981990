"""Cost-model what-ifs of the serving features: precision of weights and KV, MTP, wide EP, redundancy."""

from __future__ import annotations

import pytest

from gpusim.perf.memory import plan_memory, weights_per_gpu
from gpusim.perf.ops import DTYPE_BYTES
from gpusim.perf.step import BatchShape, StepCostModel, expert_imbalance
from gpusim.specs.deployment import MTP, Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import LmHeadSplit, load_software
from gpusim.specs.sourced import Sourced

GB300 = load_hardware("gb300-nvl72")
R1 = load_model("deepseek-r1")
DEP = Deployment(tp=8, ep=8, attention_dp=True, weights="fp4", activations="fp4", kv_cache="fp8")


def test_fp4_kv_holds_more_tokens_and_reads_fewer_bytes():
    fp8, fp4 = DEP, DEP.model_copy(update={"kv_cache": "fp4"})
    ratio = plan_memory(GB300, R1, fp4).kv_capacity_tokens / plan_memory(GB300, R1, fp8).kv_capacity_tokens
    assert ratio == pytest.approx(DTYPE_BYTES["fp8"] / DTYPE_BYTES["fp4"], rel=1e-3)
    # GQA decode attention is bandwidth-bound: FP4 KV reads 0.5625/1 of FP8's bytes (MLA with 128
    # heads per rank is compute-bound, so there the KV precision changes capacity, not time)
    llama = load_model("llama3.1-70b")
    dense8, dense4 = Deployment(tp=4, kv_cache="fp8"), Deployment(tp=4, kv_cache="fp4")
    b = BatchShape(decode_seqs=64, decode_context=64 * 8000)
    t8 = StepCostModel(GB300, llama, dense8).breakdown(b).by_op["attention_decode"]
    t4 = StepCostModel(GB300, llama, dense4).breakdown(b).by_op["attention_decode"]
    launch = StepCostModel(GB300, llama, dense8).timer.attention_fixed().decode_launch
    assert (t4 - launch) / (t8 - launch) == pytest.approx(DTYPE_BYTES["fp4"] / DTYPE_BYTES["fp8"], rel=1e-6)


def test_fp4_weights_take_less_memory_than_fp8():
    fp8 = DEP.model_copy(update={"weights": "fp8", "activations": "fp8"})
    assert weights_per_gpu(R1, DEP) < 0.65 * weights_per_gpu(R1, fp8)


def test_mtp_verifies_depth_plus_one_tokens_and_pays_the_draft():
    mtp = DEP.model_copy(update={"mtp": MTP(depth=3, acceptance=[0.8, 0.6, 0.4])})
    plain, spec = StepCostModel(GB300, R1, DEP), StepCostModel(GB300, R1, mtp)
    b = BatchShape(decode_seqs=32, decode_context=32 * 4000)
    parts = spec.breakdown(b).by_op
    assert parts["mtp_draft"] > 0
    # the verification step computes 4 tokens per sequence: the same T-part as 128 plain decode tokens
    # (attention, LM head and host time follow the 32 sequences, not the tokens)
    wide = BatchShape(decode_seqs=128, decode_context=32 * 4000)
    wide_parts = plain.breakdown(wide).by_op
    per_seq = ("attention_decode", "lm_head", "host")
    assert spec.step_time(b) - parts["mtp_draft"] == pytest.approx(
        plain.step_time(wide) + sum(parts.get(k, 0.0) - wide_parts.get(k, 0.0) for k in per_seq), rel=1e-9)


def test_mtp_weights_are_counted():
    mtp = DEP.model_copy(update={"mtp": MTP(depth=1, acceptance=[0.9])})
    extra = weights_per_gpu(R1, mtp) - weights_per_gpu(R1, DEP)
    assert extra == pytest.approx(R1.mtp_params * DTYPE_BYTES["fp4"] / 8)


def test_redundant_experts_lower_the_imbalance_by_the_documented_rule():
    sw = load_software("trtllm")
    dep = DEP.model_copy(update={"expert_imbalance": 1.5, "redundant_experts": 32})
    assert expert_imbalance(R1, dep, sw) == pytest.approx(1 + 0.5 / (1 + 32 * 8 / 256))
    assert expert_imbalance(R1, DEP, sw) == sw.moe_imbalance.value
    more = StepCostModel(GB300, R1, DEP.model_copy(update={"expert_imbalance": 2.0}))
    b = BatchShape(decode_seqs=256, decode_context=256 * 2000)
    assert more.step_time(b) > StepCostModel(GB300, R1, DEP.model_copy(update={"expert_imbalance": 1.0})).step_time(b)


def test_wide_ep_across_racks_pays_the_scale_out_fabric():
    two_racks = load_hardware("gb300-nvl72", systems=2)
    inside = DEP.model_copy(update={"tp": 72, "ep": 72})
    across = DEP.model_copy(update={"tp": 144, "ep": 144})
    b = BatchShape(decode_seqs=2048, decode_context=2048 * 2000)
    # Bandwidth terms only (the fitted alphas would dominate at this batch): NICs instead of NVLink.
    zero = Sourced(value=0.0, source="test", grade="D")
    sw = load_software("trtllm").model_copy(update={"alltoall_hop_latency_us": zero,
                                                    "alltoall_scaleout_hop_latency_us": zero})
    comm_in = StepCostModel(two_racks, R1, inside, sw).breakdown(b).communication_s
    comm_out = StepCostModel(two_racks, R1, across, sw).breakdown(b).communication_s
    assert comm_out > 3 * comm_in  # 100 GB/s NICs instead of 900 GB/s NVLink


def _with_host(us: float):
    sw = load_software("trtllm")
    return sw.model_copy(update={"host_seq_us": Sourced(value=us, source="test", grade="D")})


def test_host_work_adds_per_sequence_and_does_not_shrink_with_tp():
    hw, model = load_hardware("b200-hgx"), load_model("gpt-oss-120b")
    b = BatchShape(decode_seqs=256, decode_context=256 * 1500)
    for tp in (1, 4):
        dep = Deployment(tp=tp, weights="fp4", activations="fp8", frontend="http")
        gpu, host = StepCostModel(hw, model, dep, _with_host(0.0)), StepCostModel(hw, model, dep, _with_host(20.0))
        assert host.step_time(b) - gpu.step_time(b) == pytest.approx(256 * 20e-6)  # 5.1 ms at TP1 and TP4
        br = host.breakdown(b)
        assert br.by_op["host"] == pytest.approx(256 * 20e-6)
        assert sum(br.by_op.values()) == pytest.approx(br.total_s)


def test_attention_dp_ranks_each_have_their_own_host():
    dep = DEP.model_copy(update={"max_batch_size": 4096, "frontend": "http"})
    gpu, host = StepCostModel(GB300, R1, dep, _with_host(0.0)), StepCostModel(GB300, R1, dep, _with_host(1000.0))
    b = BatchShape(decode_seqs=800, decode_context=800 * 2000)
    assert host.step_time(b) - gpu.step_time(b) == pytest.approx(100 * 1000e-6)  # 800 sequences over 8 ranks


def test_an_in_process_harness_pays_no_front_end_time():
    b = BatchShape(decode_seqs=256, decode_context=256 * 1500)
    hw, model = load_hardware("b200-hgx"), load_model("gpt-oss-120b")
    http = Deployment(weights="fp4", activations="fp8", frontend="http")
    loadgen = http.model_copy(update={"frontend": "loadgen"})
    sw = _with_host(20.0)
    assert StepCostModel(hw, model, loadgen, sw).step_time(b) == pytest.approx(
        StepCostModel(hw, model, http, sw).step_time(b) - 256 * 20e-6)


def test_an_unset_front_end_is_the_benchmarks():
    """DeepSeek-R1 is served through HTTP endpoints by its submissions, Llama 2 70B in process; a
    deployment that names its front end keeps it."""
    from gpusim.build import prepare

    assert prepare("b300-hgx", "deepseek-r1").deployment.frontend == "http"
    assert prepare("b300-hgx", "llama2-70b").deployment.frontend == "loadgen"
    own = Deployment(tp=8, ep=8, attention_dp=True, weights="fp4", activations="fp4", frontend="loadgen")
    setup = prepare("b300-hgx", "deepseek-r1", deployment=own)
    assert setup.deployment.frontend == "loadgen" and setup.pools[0].deployment.frontend == "loadgen"
    http = prepare("b300-hgx", "deepseek-r1", deployment=own.model_copy(update={"frontend": None}))
    b = BatchShape(decode_seqs=800, decode_context=800 * 2000)
    host = http.pools[0].cost.software.value("host_seq_us") * 1e-6
    assert http.pools[0].cost.step_time(b) - setup.pools[0].cost.step_time(b) == pytest.approx(100 * host)


def test_experts_with_an_activation_floor_compute_at_that_precision():
    from gpusim.perf.ops import build_ops

    oss = load_model("gpt-oss-120b")
    assert oss.moe.min_activations == "fp8"
    w4a4 = build_ops(oss, Deployment(tp=1, weights="fp4", activations="fp4"))
    w4a16 = build_ops(oss, Deployment(tp=1, weights="fp4", activations="bf16"))
    moe = {o.name: o for o in w4a4.token_ops}["moe_experts"]
    assert moe.dtype == "fp8" and {o.name: o for o in w4a4.token_ops}["qkv_proj"].dtype == "fp4"
    assert {o.name: o for o in w4a16.token_ops}["moe_experts"].dtype == "bf16"
    assert moe.expert_bytes == pytest.approx(oss.expert_params * DTYPE_BYTES["fp4"])  # weights stay 4-bit


def test_a_whole_lm_head_per_attention_dp_rank_costs_its_weights_in_time_and_memory():
    trt = load_software("trtllm")
    assert trt.lm_head.over == "attention_tp" and load_software("sglang").lm_head.over == "tp"
    split = trt.model_copy(update={"lm_head": LmHeadSplit(over="tp", source="what-if", grade="D")})
    extra_bytes = R1.vocab_size * R1.hidden_size * 2 * (1 - 1 / 8)  # bf16 head: whole vs an eighth of it
    # one decode row per rank keeps both heads memory-bound: the whole head reads 7/8 of V·h·2 more per step
    b = BatchShape(decode_seqs=8, decode_context=8 * 2000, attn_rank_seqs=1, attn_rank_context=2000)
    whole, shared = StepCostModel(GB300, R1, DEP, trt), StepCostModel(GB300, R1, DEP, split)
    bw = GB300.hbm_bandwidth * trt.for_architecture("blackwell").gemm_bandwidth_fraction("bf16")
    extra_s = whole.breakdown(b).by_op["lm_head"] - shared.breakdown(b).by_op["lm_head"]
    assert extra_s == pytest.approx(extra_bytes / bw, rel=1e-3)
    memory = plan_memory(GB300, R1, DEP, trt).weights_per_gpu - plan_memory(GB300, R1, DEP, split).weights_per_gpu
    assert memory == pytest.approx(extra_bytes)
    # without attention DP both engines split the head over the instance's tp
    tp8 = Deployment(tp=8, ep=8, weights="fp4", activations="fp4", kv_cache="fp8")
    assert StepCostModel(GB300, R1, tp8, trt).step_time(b) == StepCostModel(GB300, R1, tp8, split).step_time(b)
