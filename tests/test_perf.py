"""The cost model (gpusim/perf) against hand-computed roofline values on tiny synthetic specs.

Every expected value below is worked out by hand in the test from the formulas (DESIGN §3, §8),
not by calling the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpusim.errors import InputError
from gpusim.perf.collectives import allreduce_time, alltoall_time, p2p_time
from gpusim.perf.memory import plan_memory
from gpusim.perf.ops import MoEOp, build_ops, expected_max_binomial, expected_max_normal, popularity_imbalance
from gpusim.perf.roofline import op_time
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import FabricSpec, GpuSpec, Hardware, SystemSpec
from gpusim.specs.model import MLA, ModelSpec, MoE
from gpusim.specs.software import CONSTANTS, OPTIONAL, SoftwareProfile, load_software
from gpusim.specs.sourced import Sourced

GiB = 2**30


def S(v: float) -> Sourced:
    return Sourced(value=v, source="test", grade="D")


def hardware(tflops: dict[str, float] | None = None, hbm_gib: float = 10.0, arch: str = "hopper") -> Hardware:
    """1 TB/s HBM, 100 GB/s NVLink (no SHARP), 8-GPU domain; bf16 100 / fp8 200 TFLOPS unless given."""
    tflops = tflops or {"bf16": 100, "fp8": 200}
    gpu = GpuSpec(
        id="toy", name="Toy", architecture=arch, dense_tflops={k: S(v) for k, v in tflops.items()},
        hbm_capacity_gib=S(hbm_gib), hbm_bandwidth_tbps=S(1.0), nvlink="nv", scaleout_nic="ib", tdp_w=S(100),
    )
    nv = FabricSpec(id="nv", name="NV", kind="nvlink", bandwidth_gbps_per_dir=S(100), latency_us=S(1))
    ib = FabricSpec(id="ib", name="IB", kind="infiniband", bandwidth_gbps_per_dir=S(10), latency_us=S(5))
    system = SystemSpec(
        id="toy8", name="Toy 8", gpu="toy", gpus=8, nvlink_domain_gpus=8, nvlink="nv", scaleout="ib",
        power_kw=S(1), form_factor="hgx",
    )
    return Hardware(system=system, gpu=gpu, nvlink=nv, scaleout=ib)


def software(launch_us: float = 0.0, step_us: float = 100.0, imbalance: float = 1.0) -> SoftwareProfile:
    """Round efficiencies: 0.5 everywhere, GEMM m_half 10 tokens, 1 µs NVLink hop."""
    half = S(0.5)
    return SoftwareProfile(
        id="t", name="test", hbm_bandwidth_fraction=half, gemm_efficiency_max=half, gemm_m_half=S(10),
        attention_prefill_flops_fraction=half, attention_decode_bandwidth_fraction=half,
        allreduce_busbw_fraction=half, nvlink_hop_latency_us=S(1), alltoall_efficiency=half,
        alltoall_hop_latency_us=S(1), alltoall_scaleout_hop_latency_us=S(1),
        moe_imbalance=S(imbalance), kernel_launch_us=S(launch_us), step_overhead_us=S(step_us),
    )


H, HEADS, D, FFN, VOCAB, LAYERS = 1024, 8, 128, 4096, 1024, 2


def dense_model(**kw: object) -> ModelSpec:
    """2 layers, hidden 1024, 8 heads of 128 (MHA), FFN 4096, vocab 1024."""
    base = dict(
        id="tiny", name="Tiny", hf_id="-", num_layers=LAYERS, hidden_size=H, num_attention_heads=HEADS,
        num_kv_heads=HEADS, head_dim=D, vocab_size=VOCAB, intermediate_size=FFN, source="test",
    )
    base.update(kw)
    return ModelSpec(**base)


def moe_model() -> ModelSpec:
    return dense_model(
        id="tiny-moe", intermediate_size=0,
        moe=MoE(num_experts=8, top_k=2, expert_intermediate_size=512, shared_experts=1),
    )


# ---- roofline ------------------------------------------------------------------------------
def test_gemm_compute_bound_and_memory_bound() -> None:
    hw = hardware()
    peak, bw = hw.peak_flops("fp8"), hw.hbm_bandwidth  # 200e12, 1e12
    k = n = 4096
    # Large M: 2·M·N·K FLOPs at fp8 vs (MK + KN + MN) bytes.
    m = 8192
    flops, nbytes = 2 * m * n * k, m * k + k * n + m * n
    t, bound = op_time(flops, nbytes, peak, bw, 0.5, 0.5, 2e-6)
    assert bound == "compute"
    assert t == pytest.approx(2 * 8192 * 4096 * 4096 / (200e12 * 0.5) + 2e-6)
    # M = 1: the weights dominate.
    flops, nbytes = 2 * n * k, k + k * n + n
    t, bound = op_time(flops, nbytes, peak, bw, 0.5, 0.5, 2e-6)
    assert bound == "memory"
    assert t == pytest.approx((4096 + 4096 * 4096 + 4096) / (1e12 * 0.5) + 2e-6)


# ---- whole steps -----------------------------------------------------------------------------
def test_decode_batch1_is_weight_bytes_over_bandwidth() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(tp=1), software(launch_us=0, step_us=100))
    layer_weights = (4 * H * H + 3 * H * FFN) * 1  # fp8
    lm_head = VOCAB * H * 2  # bf16
    expected = (LAYERS * layer_weights + lm_head) / (1e12 * 0.5) + 100e-6
    t = cm.step_time(BatchShape(decode_seqs=1, decode_context=10))
    assert t == pytest.approx(expected, rel=2e-3)


def test_launch_overhead_counts_kernels() -> None:
    b = BatchShape(decode_seqs=1, decode_context=10)
    t0 = StepCostModel(hardware(), dense_model(), Deployment(), software(launch_us=0)).step_time(b)
    t1 = StepCostModel(hardware(), dense_model(), Deployment(), software(launch_us=1)).step_time(b)
    # Per layer: qkv, o, ffn (2 kernels), decode attention = 5; plus embedding and LM head.
    assert t1 - t0 == pytest.approx((LAYERS * 5 + 2) * 1e-6)


def test_decode_attention_linear_in_context() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(kv_cache="fp8"), software())
    times = [cm.step_time(BatchShape(decode_seqs=4, decode_context=c)) for c in (1000, 2000, 3000)]
    per_1000 = 1000 * LAYERS * (2 * HEADS * D * 1) / (1e12 * 0.5)  # KV bytes read / (bw · eff)
    assert times[1] - times[0] == pytest.approx(per_1000)
    assert times[2] - times[1] == pytest.approx(per_1000)


def test_prefill_attention_quadratic_in_prompt() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(), software())

    def attn(length: int) -> float:
        b = BatchShape(prefill_tokens=length, prefill_attn_pairs=length * (length + 1) / 2, prefill_seqs=1)
        return cm.breakdown(b).by_op["attention_prefill"]

    # 4 · heads · head_dim FLOPs per causal pair per layer, at the fp8 peak (kv fp8, activations fp8).
    assert attn(1000) == pytest.approx(LAYERS * 4 * HEADS * D * 1000 * 1001 / 2 / (200e12 * 0.5))
    assert attn(2000) / attn(1000) == pytest.approx(2000 * 2001 / (1000 * 1001))


def test_prefill_attention_efficiency_rises_with_keys_per_query() -> None:
    """eff(L) = fraction · L / (L + keys_half), L = causal pairs / prompt tokens: a 1,000-token prompt sees
    500.5 keys per query, so keys_half 500.5 halves its efficiency and keys_half 5005 makes it 11x slower;
    a chunk of 100 tokens after 900 cached sees 950.5 keys per query."""
    flat = StepCostModel(hardware(), dense_model(), Deployment(), software())

    def attn(keys_half: float, tokens: int, cached: int = 0) -> float:
        sw = software().model_copy(update={"attention_prefill_keys_half": S(keys_half)})
        b = BatchShape(prefill_tokens=tokens, prefill_attn_pairs=tokens * cached + tokens * (tokens + 1) / 2,
                       prefill_seqs=1)
        return StepCostModel(hardware(), dense_model(), Deployment(), sw).breakdown(b).by_op["attention_prefill"]

    full = flat.breakdown(BatchShape(prefill_tokens=1000, prefill_attn_pairs=1000 * 1001 / 2,
                                     prefill_seqs=1)).by_op["attention_prefill"]
    assert attn(0, 1000) == pytest.approx(full)
    assert attn(500.5, 1000) == pytest.approx(2 * full)
    assert attn(5005, 1000) == pytest.approx(11 * full)
    assert attn(950.5, 100, cached=900) / attn(0, 100, cached=900) == pytest.approx(2.0)


def test_prefill_attention_has_its_own_fixed_time_per_kernel() -> None:
    base = software(launch_us=1)
    sw = base.model_copy(update={"attention_prefill_kernel_us": S(31)})
    prefill = BatchShape(prefill_tokens=100, prefill_attn_pairs=100 * 101 / 2, prefill_seqs=1)
    decode = BatchShape(decode_seqs=1, decode_context=10)
    for b, extra_us in ((prefill, 30), (decode, 0)):
        t0 = StepCostModel(hardware(), dense_model(), Deployment(), base).step_time(b)
        t1 = StepCostModel(hardware(), dense_model(), Deployment(), sw).step_time(b)
        assert t1 - t0 == pytest.approx(LAYERS * extra_us * 1e-6)


def test_sliding_window_caps_decode_context() -> None:
    model = dense_model(sliding_window=100, sliding_layers=1)
    cm = StepCostModel(hardware(), model, Deployment(), software())
    short = cm.breakdown(BatchShape(decode_seqs=1, decode_context=50)).by_op["attention_decode"]
    long = cm.breakdown(BatchShape(decode_seqs=1, decode_context=1000)).by_op["attention_decode"]
    kv = 2 * HEADS * D / (1e12 * 0.5)
    assert short == pytest.approx(2 * 50 * kv)  # both layers read 50 tokens
    assert long == pytest.approx((1000 + 100) * kv)  # full layer 1000, sliding layer 100


# ---- MoE -------------------------------------------------------------------------------------
def _moe_op(model: ModelSpec, dep: Deployment) -> MoEOp:
    return next(op for op in build_ops(model, dep).token_ops if isinstance(op, MoEOp))


def test_distinct_experts_formula() -> None:
    """E_local · (1 − (1 − k/E)^T): one token hits its k experts, many tokens all of them; EP divides E."""
    wide = dense_model(id="wide-moe", intermediate_size=0,
                       moe=MoE(num_experts=256, top_k=8, expert_intermediate_size=512))
    op = _moe_op(wide, Deployment())
    assert op.distinct_local(1) == pytest.approx(8)
    assert op.distinct_local(10_000) == pytest.approx(256)
    assert _moe_op(wide, Deployment(tp=4, ep=4)).distinct_local(10_000) == pytest.approx(64)
    assert _moe_op(moe_model(), Deployment()).distinct_local(2) == pytest.approx(8 * (1 - (6 / 8) ** 2))


def test_expected_max_binomial_by_hand() -> None:
    """Two Binomial(2, ½) counts: P(max ≥ 1) = 1 − ¼² and P(max = 2) = 1 − ¾², so E[max] = 1.375; one count: n·p;
    one expert per rank: 1 − (1 − p)^draws."""
    assert expected_max_binomial(2, 0.5, 2) == pytest.approx(0.9375 + 0.4375)
    assert expected_max_binomial(7, 0.3, 1) == pytest.approx(2.1)
    assert expected_max_binomial(1, 0.2, 5) == pytest.approx(1 - 0.8**5)


def test_busiest_ep_rank_reads_more_experts_than_the_mean() -> None:
    """With EP the step waits for the rank whose tokens hit the most of its experts: at one token of
    DeepSeek-R1's routing (8 of 256) on EP8 the mean rank holds 1 hit expert, the busiest about 2.5. Checked
    against routing real top-k choices (each token k distinct experts) rather than the binomial's assumption."""
    wide = dense_model(id="wide-moe", intermediate_size=0,
                       moe=MoE(num_experts=256, top_k=8, expert_intermediate_size=512))
    op = _moe_op(wide, Deployment(tp=8, ep=8))
    rng = np.random.default_rng(7)
    for t in (1, 4, 64):
        busiest = []
        for _ in range(2000):
            hit = np.zeros(256, bool)
            for _ in range(t):
                hit[rng.choice(256, 8, replace=False)] = True
            busiest.append(hit.reshape(8, 32).sum(axis=1).max())
        assert op.distinct_local(t) == pytest.approx(np.mean(busiest), rel=0.03)
    assert op.distinct_local(1) > 2 * op.experts_local * op.hit_fraction(1)
    assert op.distinct_local(10_000) == pytest.approx(32)


def test_moe_decode_reads_only_hit_experts() -> None:
    model = moe_model()
    cm = StepCostModel(hardware(), model, Deployment(), software())
    expert_bytes = 3 * H * 512 * 1  # fp8
    one = cm.breakdown(BatchShape(decode_seqs=1, decode_context=1)).by_op["moe_experts"]
    assert one == pytest.approx(LAYERS * 2 * expert_bytes / (1e12 * 0.5), rel=1e-2)  # k = 2 experts
    many = cm.breakdown(BatchShape(decode_seqs=64, decode_context=64)).by_op["moe_experts"]
    hit = 8 * (1 - (6 / 8) ** 64)
    activations = 64 * 2 * (H * (1 + 2) + 2 * 512 * 1)  # per (token, expert): in fp8, out bf16, intermediate
    assert many == pytest.approx(LAYERS * (hit * expert_bytes + activations) / (1e12 * 0.5))


def test_a_prompt_stays_on_its_attention_dp_rank() -> None:
    """Under attention DP a lone 4,096-token prefill runs its projections whole on one rank; eight or more
    prompts spread them evenly (the split the old model assumed for any step). Routed experts see every token
    either way, and without attention DP nothing depends on how many prompts share the step."""
    model = moe_model()

    def by_op(dep: Deployment, seqs: int) -> dict[str, float]:
        cm = StepCostModel(hardware(), model, dep, software())
        tokens = 4096
        chunk = tokens / seqs
        b = BatchShape(prefill_tokens=tokens, prefill_attn_pairs=seqs * chunk * (chunk + 1) / 2, prefill_seqs=seqs)
        return cm.breakdown(b).by_op

    dep = Deployment(tp=8, ep=8, attention_dp=True)
    one, eight, sixteen = (by_op(dep, s) for s in (1, 8, 16))
    projections = LAYERS * 2 * 4096 * (4 * H * H) / (200e12 * 0.5 * 4096 / (4096 + 10))  # fp8 math, eff(m)
    assert one["qkv_proj"] + one["o_proj"] == pytest.approx(projections, rel=0.02)
    assert one["qkv_proj"] > 6 * eight["qkv_proj"]
    assert eight["qkv_proj"] == pytest.approx(sixteen["qkv_proj"])
    assert one["ep_dispatch"] > eight["ep_dispatch"]
    assert one["moe_experts"] == pytest.approx(eight["moe_experts"])
    tp = Deployment(tp=8, ep=8)
    assert by_op(tp, 1)["qkv_proj"] == pytest.approx(by_op(tp, 8)["qkv_proj"])


# ---- collectives -----------------------------------------------------------------------------
def test_ring_allreduce_by_hand() -> None:
    assert allreduce_time(1e6, 4, 1e11, 1e-6) == pytest.approx(2 * 3 / 4 * 1e6 / 1e11 + 2 * 3 * 1e-6)
    assert allreduce_time(1e6, 4, 1e11, 1e-6, sharp=True) == pytest.approx(3 / 4 * 1e6 / 1e11 + 6e-6)
    assert allreduce_time(1e6, 1, 1e11, 1e-6) == 0.0
    assert alltoall_time(100, 8, 1024, 1, 1, 1e11, 1e-6) == 0.0
    assert alltoall_time(100, 8, 1024, 1, 4, 1e11, 1e-6, 1.5) == pytest.approx(
        100 * 8 * 1024 * 3 / 4 / 1e11 * 1.5 + 2e-6)
    assert p2p_time(1e6, 1e11, 1e-6) == pytest.approx(1e-5 + 1e-6)


def test_allreduce_two_rates_meet_at_the_knee() -> None:
    """Below the knee a message moves at the small-message rate, far above it at the large one; with no
    small rate or no knee it is the plain ring."""
    n, big, small, knee = 8, 4e11, 1e11, 1e7
    ring = 2 * (n - 1) / n

    def t(size: float) -> float:
        return allreduce_time(size, n, big, 0.0, small_bw=small, knee_bytes=knee)

    assert t(1e3) == pytest.approx(ring * 1e3 / small, rel=1e-3)
    by_hand = ring * (1e7 / big + (1 / small - 1 / big) * knee * 1e7 / (knee + 1e7))
    assert t(1e7) == pytest.approx(by_hand)
    assert t(2e10) - t(1e10) == pytest.approx(ring * 1e10 / big, rel=1e-3)  # the slope far above the knee
    assert allreduce_time(1e6, n, big, 1e-6, small_bw=small) == allreduce_time(1e6, n, big, 1e-6)
    assert allreduce_time(1e6, n, big, 1e-6, small_bw=small, knee_bytes=knee, sharp=True) == pytest.approx(
        allreduce_time(1e6, n, big, 1e-6, small_bw=small, knee_bytes=knee) - ring / 2 * (
            1e6 / big + (1 / small - 1 / big) * knee * 1e6 / (knee + 1e6)))


def test_tp_allreduce_in_step() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(tp=4), software())
    t = 100
    one = 2 * 3 / 4 * t * H * 2 / (100e9 * 0.5) + 2 * 3 * 1e-6
    bd = cm.breakdown(BatchShape(decode_seqs=t, decode_context=t))
    assert bd.by_op["tp_allreduce"] == pytest.approx(2 * LAYERS * one)


def test_tp_allreduce_in_step_uses_the_small_message_rate() -> None:
    """A profile with an all-reduce knee times a decode step's small all-reduces at its small-message rate."""
    sw = software().model_copy(update={"allreduce_small_busbw_fraction": S(0.1), "allreduce_knee_mb": S(100.0)})
    cm = StepCostModel(hardware(), dense_model(), Deployment(tp=4), sw)
    t = 100
    size, knee = t * H * 2, 100e6
    beta = size / (100e9 * 0.5) + (1 / (100e9 * 0.1) - 1 / (100e9 * 0.5)) * knee * size / (knee + size)
    one = 2 * 3 / 4 * beta + 2 * 3 * 1e-6
    bd = cm.breakdown(BatchShape(decode_seqs=t, decode_context=t))
    assert bd.by_op["tp_allreduce"] == pytest.approx(2 * LAYERS * one)


# ---- precision -------------------------------------------------------------------------------
def test_fp4_weights_read_time_vs_fp8() -> None:
    hw = hardware({"bf16": 100, "fp8": 200, "fp4": 400}, arch="blackwell")
    b = BatchShape(decode_seqs=1, decode_context=1)
    fp8 = StepCostModel(hw, dense_model(), Deployment(weights="fp8"), software()).breakdown(b).by_op["ffn"]
    fp4 = StepCostModel(hw, dense_model(), Deployment(weights="fp4"), software()).breakdown(b).by_op["ffn"]
    assert fp8 == pytest.approx(LAYERS * 3 * H * FFN / (1e12 * 0.5), rel=1e-3)
    assert fp4 / fp8 == pytest.approx(0.5 + 1 / 16, rel=1e-3)  # half, plus one fp8 scale per 16 values


def test_nvfp4_gemms_stream_at_their_own_bandwidth_fraction() -> None:
    """A profile's hbm_bandwidth_fraction_fp4 slows the weight reads of NVFP4 GEMMs alone: FP8 GEMMs, and
    FP4 weights computing at BF16 (W4A16), keep hbm_bandwidth_fraction."""
    hw = hardware({"bf16": 100, "fp8": 200, "fp4": 400}, arch="blackwell")
    b = BatchShape(decode_seqs=1, decode_context=1)
    slow = software().model_copy(update={"hbm_bandwidth_fraction_fp4": S(0.25)})

    def ffn(dep: Deployment, sw: SoftwareProfile) -> float:
        return StepCostModel(hw, dense_model(), dep, sw).breakdown(b).by_op["ffn"]

    nvfp4 = Deployment(weights="fp4", activations="fp4")
    assert ffn(nvfp4, slow) / ffn(nvfp4, software()) == pytest.approx(0.5 / 0.25, rel=1e-3)
    for dep in (Deployment(weights="fp8", activations="fp8"), Deployment(weights="fp4")):
        assert ffn(dep, slow) == pytest.approx(ffn(dep, software()))


def test_hopper_without_fp4_falls_back_to_fp8() -> None:
    hopper = hardware({"bf16": 100, "fp8": 200}, arch="hopper")
    blackwell = hardware({"bf16": 100, "fp8": 200, "fp4": 400}, arch="blackwell")
    assert hopper.peak_flops("fp4") == 200e12
    dep = Deployment(weights="fp4", activations="fp4")
    t = 8192
    b = BatchShape(prefill_tokens=t)
    hop = StepCostModel(hopper, dense_model(), dep, software()).breakdown(b).by_op["ffn"]
    bw = StepCostModel(blackwell, dense_model(), dep, software()).breakdown(b).by_op["ffn"]
    eff = 0.5 * t / (t + 10)
    assert hop == pytest.approx(LAYERS * 2 * 3 * H * FFN * t / (200e12 * eff))
    assert bw == pytest.approx(hop / 2)


def test_gemm_efficiency_per_compute_dtype() -> None:
    """A compute-bound FP8 GEMM slows by exactly eff_bf16 / eff_fp8 when the FP8 efficiency is set lower."""
    b = BatchShape(prefill_tokens=8192)
    base = software()
    fp8 = base.model_copy(update={"gemm_efficiency_fp8": S(0.25)})
    t0 = StepCostModel(hardware(), dense_model(), Deployment(), base).breakdown(b).by_op["ffn"]
    t1 = StepCostModel(hardware(), dense_model(), Deployment(), fp8).breakdown(b).by_op["ffn"]
    assert t1 == pytest.approx(2 * t0)
    bf16 = StepCostModel(hardware(), dense_model(), Deployment(weights="bf16", activations="bf16"), fp8)
    assert bf16.software.gemm_efficiency("bf16") == 0.5  # bf16 GEMMs keep gemm_efficiency_max


def test_grouped_moe_efficiency_per_compute_dtype() -> None:
    """Compute-bound MoE experts at FP8 run at gemm eff · moe_efficiency_fp8 (hand-computed roofline);
    FP4 experts take moe_efficiency_fp4 and fall back to moe_efficiency where it is absent."""
    hw = hardware({"bf16": 100, "fp8": 200, "fp4": 400}, arch="blackwell")
    t = 65536
    b = BatchShape(prefill_tokens=t)
    sw = software().model_copy(update={"moe_efficiency": S(0.8), "moe_efficiency_fp8": S(0.25)})
    fp8 = StepCostModel(hw, moe_model(), Deployment(), sw).breakdown(b).by_op["moe_experts"]
    m = t * 2 / 8  # tokens per expert (all 8 hit)
    eff = 0.5 * 0.25 * m / (m + 10)
    assert fp8 == pytest.approx(LAYERS * t * 2 * 2 * 3 * H * 512 / (200e12 * eff))
    dep4 = Deployment(weights="fp4", activations="fp4")
    fp4 = StepCostModel(hw, moe_model(), dep4, sw).breakdown(b).by_op["moe_experts"]
    assert fp4 == pytest.approx(fp8 * (200e12 * 0.25) / (400e12 * 0.8))  # moe_efficiency_fp4 absent: 0.8
    sw4 = sw.model_copy(update={"moe_efficiency_fp4": S(0.4)})
    assert StepCostModel(hw, moe_model(), dep4, sw4).breakdown(b).by_op["moe_experts"] == pytest.approx(2 * fp4)


def test_grouped_moe_efficiency_falls_with_expert_width() -> None:
    """moe_inter_half scales the grouped efficiency by i / (i + half), i the expert width on one GPU
    (intermediate · ep / tp): TP2 halves 512-wide experts to 256 (factor 2 at half 256), EP2 keeps them
    whole (factor 1.5); the shape-free time is the hand-computed one of the test above."""
    hw = hardware({"bf16": 100, "fp8": 200}, arch="blackwell")
    b = BatchShape(prefill_tokens=65536)
    flat = software().model_copy(update={"moe_efficiency": S(0.8)})
    shaped = flat.model_copy(update={"moe_inter_half": S(256.0)})

    def moe_time(sw: SoftwareProfile, ep: int) -> float:
        dep = Deployment(tp=2, ep=ep)
        return StepCostModel(hw, moe_model(), dep, sw).breakdown(b).by_op["moe_experts"]

    assert moe_time(shaped, 1) == pytest.approx(2 * moe_time(flat, 1))
    assert moe_time(shaped, 2) == pytest.approx(1.5 * moe_time(flat, 2))
    assert shaped.gemm_efficiency("fp8", 768.0) == pytest.approx(0.5 * 0.8 * 0.75)
    assert shaped.gemm_efficiency("fp8") == 0.5  # dense GEMMs have no expert width


def test_fixed_time_per_kernel_class() -> None:
    """gemm_kernel_us replaces the launch time of GEMM kernels, attention_kernel_us of attention kernels."""
    b = BatchShape(decode_seqs=1, decode_context=10)
    base = software(launch_us=1)
    t0 = StepCostModel(hardware(), dense_model(), Deployment(), base).step_time(b)
    cls = base.model_copy(update={"gemm_kernel_us": S(11), "attention_kernel_us": S(21)})
    t1 = StepCostModel(hardware(), dense_model(), Deployment(), cls).step_time(b)
    # Per layer: qkv, o, ffn (2 kernels) are GEMMs (+10 µs each), attention (+20 µs); the LM head is a GEMM.
    assert t1 - t0 == pytest.approx((LAYERS * (4 * 10 + 20) + 10) * 1e-6)


def test_request_overhead_delays_every_first_token_behind_an_http_front_end() -> None:
    from gpusim.build import make_setup
    from gpusim.loadgen.scenarios import closed_loop

    hw = hardware(hbm_gib=80)
    ttft = {}
    for frontend, ms in (("http", 0.0), ("http", 40.0), ("loadgen", 40.0)):
        sw = software().model_copy(update={"request_overhead_ms": S(ms)})
        dep = Deployment(frontend=frontend)
        setup = make_setup(hw, None, dense_model(), dep, "test")  # type: ignore[arg-type]
        pool = setup.pools[0]
        cost = StepCostModel(hw, dense_model(), dep, sw)
        setup = setup.__class__(hw, None, dense_model(), dep, (pool.__class__(
            pool.role, cost, pool.kv_capacity_tokens, pool.deployment, pool.count),))  # type: ignore[arg-type]
        assert setup.software_ms("request_overhead_ms") == pytest.approx(ms * 1e-3)
        records, _, _ = setup.simulate(closed_loop(1, 64, 8, 3))
        ttft[frontend, ms] = (records["first_token_s"] - records["scheduled_s"]).to_numpy()
    assert ttft["http", 40.0] == pytest.approx(ttft["http", 0.0] + 0.040)
    assert ttft["loadgen", 40.0] == pytest.approx(ttft["http", 0.0])  # an in-process harness has no front end


# ---- memory ----------------------------------------------------------------------------------
def test_memory_plan_by_hand_tp2() -> None:
    dep = Deployment(tp=2, weights="fp8", kv_cache="fp8", max_num_tokens=1024, max_batch_size=8)
    plan = plan_memory(hardware(hbm_gib=10), dense_model(), dep)
    per_layer = (4 * H * H + 3 * H * FFN) / 2  # fp8, split 2 ways
    embeddings = 2 * VOCAB * H * 2 / 2  # input embedding + LM head, bf16, split by tp
    assert plan.weights_per_gpu == pytest.approx(LAYERS * per_layer + embeddings)
    workspace = 1024 * (4 * H * 2 + 2 * FFN / 2 * 2) + 8 * VOCAB / 2 * 4
    assert plan.workspace_per_gpu == pytest.approx(workspace)
    kv = (10 * GiB - plan.weights_per_gpu - workspace) * 0.9
    assert plan.kv_per_gpu == pytest.approx(kv)
    per_token = LAYERS * 2 * (HEADS // 2) * D * 1
    assert plan.kv_bytes_per_token_per_gpu == per_token
    assert plan.kv_capacity_tokens == int(kv // per_token)
    dp = plan_memory(hardware(hbm_gib=10), dense_model(), dep.model_copy(update={"attention_dp": True}))
    assert dp.kv_bytes_per_token_per_gpu == 2 * per_token  # each rank keeps all heads of its sequences


def test_kv_pool_follows_each_engines_memory_rule() -> None:
    """TensorRT-LLM: 0.9 of what weights and workspace leave; vLLM: 0.9 of all HBM less both; a deployment's
    gpu_memory_fraction replaces the engine's default under its rule."""
    hw, model = hardware(hbm_gib=80), dense_model()
    dep = Deployment(tp=1, weights="bf16", max_num_tokens=8192, max_batch_size=8)
    trt = plan_memory(hw, model, dep)
    w, ws, hbm = trt.weights_per_gpu, trt.workspace_per_gpu, 80 * GiB
    assert trt.kv_per_gpu == pytest.approx((hbm - w - ws) * 0.9)
    vllm = plan_memory(hw, model, dep.model_copy(update={"software": "vllm"}))
    assert vllm.kv_per_gpu == pytest.approx(0.9 * hbm - w - ws)
    knob = dep.model_copy(update={"gpu_memory_fraction": 0.8})
    assert plan_memory(hw, model, knob).kv_per_gpu == pytest.approx((hbm - w - ws) * 0.8)
    assert plan_memory(hw, model, knob, load_software("vllm")).kv_per_gpu == pytest.approx(0.8 * hbm - w - ws)


def test_an_engine_rule_that_leaves_no_kv_cache_names_the_knob() -> None:
    """Weights fit in what TensorRT-LLM's rule leaves, but 0.5 of all HBM (vLLM's knob) is below them."""
    hw, model = hardware(hbm_gib=0.1), dense_model()
    dep = Deployment(tp=1, weights="bf16", software="vllm", gpu_memory_fraction=0.5, max_num_tokens=64,
                     max_batch_size=1)
    trt = plan_memory(hw, model, dep.model_copy(update={"software": "trtllm"}))
    assert trt.kv_per_gpu > 0 and trt.weights_per_gpu > 0.5 * 0.1 * GiB
    with pytest.raises(InputError) as err:
        plan_memory(hw, model, dep)
    assert err.value.field == "gpu_memory_fraction"


def test_mla_latent_replicated_across_tp() -> None:
    mla = MLA(q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
    model = dense_model(mla=mla)
    plan = plan_memory(hardware(hbm_gib=10), model, Deployment(tp=4, kv_cache="fp8"))
    assert plan.kv_bytes_per_token_per_gpu == LAYERS * (512 + 64)


def test_weights_that_do_not_fit_raise() -> None:
    with pytest.raises(InputError) as err:
        plan_memory(hardware(hbm_gib=0.01), dense_model(), Deployment(tp=1))
    assert "short by" in str(err.value)
    assert err.value.field == "tp"


# ---- interface ---------------------------------------------------------------------------------
BATCHES = [
    BatchShape(decode_seqs=1, decode_context=100),
    BatchShape(prefill_tokens=512, prefill_attn_pairs=512 * 513 / 2, prefill_seqs=1),
    BatchShape(prefill_tokens=300, prefill_attn_pairs=300 * 1000 + 300 * 301 / 2, prefill_seqs=1,
               decode_seqs=37, decode_context=37 * 900),
]


@pytest.mark.parametrize("dep", [
    Deployment(tp=1), Deployment(tp=2, pp=2), Deployment(tp=4, ep=4, attention_dp=True, weights="fp4"),
    Deployment(tp=4, ep=2),
])
@pytest.mark.parametrize("b", BATCHES)
def test_breakdown_sums_to_total(dep: Deployment, b: BatchShape) -> None:
    model = dense_model(sliding_window=64, sliding_layers=1) if dep.ep == 1 else moe_model()
    cm = StepCostModel(hardware(), model, dep, software(launch_us=2, imbalance=1.2))
    bd = cm.breakdown(b)
    assert cm.step_time(b) == bd.total_s
    assert bd.compute_s + bd.memory_s + bd.communication_s + bd.overhead_s == pytest.approx(bd.total_s)
    assert sum(bd.by_op.values()) == pytest.approx(bd.total_s)
    assert bd.total_s > 0


def test_empty_step_is_free() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(), software())
    assert cm.step_time(BatchShape()) == 0.0


def test_attention_dp_takes_the_busiest_rank() -> None:
    cm = StepCostModel(hardware(), dense_model(), Deployment(tp=4, attention_dp=True), software())
    a = cm.breakdown(BatchShape(decode_seqs=4, decode_context=4000)).by_op["attention_decode"]
    b = cm.breakdown(BatchShape(decode_seqs=5, decode_context=5000)).by_op["attention_decode"]
    per_seq = LAYERS * 1000 * 2 * HEADS * D / (1e12 * 0.5)  # all heads on each rank
    assert a == pytest.approx(per_seq)  # one sequence per rank
    assert b == pytest.approx(2 * per_seq)  # ceil(5 / 4) = 2 on the busiest


def test_trtllm_profile_loads_with_graded_constants() -> None:
    prof = load_software("trtllm")
    for name in CONSTANTS:
        c = getattr(prof, name)
        if c is None:  # an optional constant falls back to its documented default
            assert name in OPTIONAL
            continue
        assert c.grade in "ABCD" and c.source and c.value >= 0
    assert 0 < prof.hbm_bandwidth_fraction.value <= 1
    over = prof.model_copy(update={"overrides": {"hopper": {"gemm_efficiency_max": S(0.5)}}})
    assert over.for_architecture("hopper").gemm_efficiency_max.value == 0.5
    assert over.for_architecture("blackwell").gemm_efficiency_max.value == prof.gemm_efficiency_max.value
    assert math.isclose(prof.for_architecture("rubin").step_overhead_us.value, prof.step_overhead_us.value)


# ---- linear attention ---------------------------------------------------------------------------
def hybrid_model() -> ModelSpec:
    from gpusim.specs.model import LinearAttention

    la = LinearAttention(layers=1, num_key_heads=4, key_head_dim=64, num_value_heads=8, value_head_dim=64)
    return dense_model(id="tiny-hybrid", linear_attention=la)


@pytest.mark.parametrize("tp", [1, 2])
def test_linear_attention_decode_reads_and_writes_a_fixed_state_per_sequence(tp) -> None:
    model, hw = hybrid_model(), hardware()
    cm = StepCostModel(hw, model, Deployment(tp=tp), software())

    def attention(seqs: int) -> float:
        return cm.breakdown(BatchShape(decode_seqs=seqs, decode_context=0)).by_op["attention_decode"]

    la = model.linear_attention
    state = 8 // tp * 64 * 64 * 4 + (4 * 64 * 2 + 8 * 64) * 3 * 2 / tp  # this GPU's value heads; conv state
    per_seq = 2 * state / (1e12 * 0.5)  # read and write, at the attention decode bandwidth
    assert attention(3) - attention(2) == pytest.approx(per_seq)
    assert la.layers == 1 and model.full_attention_layers == LAYERS - 1


def test_linear_attention_state_slots_are_reserved_before_the_kv_cache() -> None:
    model, hw = hybrid_model(), hardware(hbm_gib=80)
    small, large = (plan_memory(hw, model, Deployment(max_batch_size=b)) for b in (8, 264))
    reserved = (264 - 8) * model.state_bytes_per_sequence
    logits = (large.workspace_per_gpu - small.workspace_per_gpu) * load_software("trtllm").kv_memory.fraction
    assert small.kv_per_gpu - large.kv_per_gpu == pytest.approx(reserved + logits)
    with pytest.raises(InputError, match="linear-attention state"):
        plan_memory(hardware(hbm_gib=1), model, Deployment(max_batch_size=65536))


def test_trtllm_all_to_all_has_a_fixed_time_per_call_inside_the_nvlink_domain() -> None:
    """TensorRT-LLM's one-sided NVLink dispatch and combine cost ~25 µs a call at one token from EP 8 to EP 64
    (its blog18 table on GB200 NVL72): alltoall_kernel_us + α·log2(EP) per call and MoE layer, by hand. Across
    systems the scale-out alpha stands for the whole call (no NVLink kernel time)."""
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model

    sw, model = load_software("trtllm"), load_model("deepseek-r1")
    k, alpha = sw.value("alltoall_kernel_us"), sw.alltoall_hop_latency_us.value
    layers = model.num_moe_layers
    one_token = BatchShape(decode_seqs=16, decode_context=16 * 1000.0)  # one token per attention-DP rank
    for ep, published in ((8, 25.0), (16, 24.8)):
        dep = Deployment(tp=ep, ep=ep, attention_dp=True, weights="fp4", activations="fp4")
        per_call = StepCostModel(load_hardware("gb300-nvl72"), model, dep).breakdown(
            BatchShape(decode_seqs=ep, decode_context=ep * 1000.0)).by_op["ep_dispatch"] / layers
        assert per_call == pytest.approx((k + alpha * math.log2(ep)) * 1e-6, rel=0.03)
        assert per_call == pytest.approx(published * 1e-6, rel=0.25)
    two = StepCostModel(load_hardware("b200-hgx", 2), model,
                        Deployment(tp=16, ep=16, attention_dp=True, weights="fp4", activations="fp4"))
    across = two.breakdown(one_token).by_op["ep_dispatch"] / layers
    assert across == pytest.approx(sw.alltoall_scaleout_hop_latency_us.value * 4 * 1e-6, rel=0.03)


@pytest.mark.parametrize("hw, model, dep", [
    ("gb300-nvl72", "deepseek-r1", Deployment(weights="fp4", tp=8, ep=8, attention_dp=True, software="trtllm-v5.1",
                                              mtp={"depth": 3, "acceptance": (0.85, 0.7, 0.6)},
                                              frontend="http")),
    ("b200-hgx", "llama2-70b", Deployment(weights="fp8", tp=2)),
    ("b200-hgx", "llama2-70b", Deployment(weights="fp4", mtp={"depth": 2, "acceptance": (0.8, 0.6)})),  # TDP binds
    ("h100-hgx", "gpt-oss-120b", Deployment(tp=4, frontend="http")),
])
def test_a_generation_step_costs_the_same_from_its_cached_parts_as_costed_whole(hw, model, dep) -> None:
    """`step_time` reads a generation-only step's context-free parts from a cache; the seconds must equal the
    whole step's (`_any_step_time`) to the bit, with CUDA-graph padding, MTP, attention DP, the power limit and
    host work, and the second call (from the cache) must equal the first."""
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model

    cm = StepCostModel(load_hardware(hw), load_model(model), dep)
    rng = __import__("random").Random(7)
    for _ in range(300):
        seqs = rng.randint(1, 2048)
        rank = rng.randint(1, seqs) if dep.attention_dp and rng.random() < 0.8 else 0
        b = BatchShape(decode_seqs=seqs, decode_context=seqs * rng.uniform(10, 9000),
                       attn_rank_context=rank * rng.uniform(10, 9000), attn_rank_seqs=rank)
        whole = cm._any_step_time(b)
        assert cm.step_time(b) == whole and cm.step_time(b) == whole
    assert cm._generation_cache  # the generation-only path was taken


def test_expected_max_normal_near_its_exact_values() -> None:
    """E[max of 2 standard normals] = 1/√π = 0.5642, of 8 = 1.4236 (tabulated order statistics)."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert expected_max_normal(8) == pytest.approx(1.4236, rel=0.01)


def test_popularity_imbalance_scales_the_measured_excess_by_width() -> None:
    """Measured 2.564 at EP32 over 256 experts (excess 1.564). At EP8 the excess scales by
    √(8/32) · E[max of 8] / E[max of 32] = 0.5 · 1.4336 / 2.0674 = 0.3467 (Blom's values): 1 + 1.564 · 0.3467 = 1.542.
    At the measured width it gives the measurement back, and one rank holds no imbalance."""
    from gpusim.specs.model import ExpertLoad
    from gpusim.specs.sourced import Sourced
    load = ExpertLoad(ep=32, busiest_over_mean=Sourced(value=2.564, source="test", grade="C"))
    assert popularity_imbalance(load, 256, 32) == pytest.approx(2.564)
    assert popularity_imbalance(load, 256, 8) == pytest.approx(1 + 1.564 * 0.5 * 1.4336 / 2.0674, rel=1e-3)
    assert popularity_imbalance(load, 256, 1) == pytest.approx(1.0)


def test_without_a_balancer_deepseek_r1_carries_its_measured_expert_popularity() -> None:
    """`expert_balancer: false` on DeepSeek-R1 (measured at EP32) at EP8: 1.54; with a balancer, the profile's
    1.2; an explicit `expert_imbalance` wins; a model without a measurement keeps the profile's either way."""
    from gpusim.perf.step import expert_imbalance
    from gpusim.specs.model import load_model
    from gpusim.specs.software import load_software
    sw = load_software("trtllm")
    r1, qwen = load_model("deepseek-r1"), load_model("qwen3-235b-a22b")
    dep = Deployment(tp=8, ep=8, expert_balancer=False)
    assert expert_imbalance(r1, dep, sw) == pytest.approx(1.54, abs=0.01)
    assert expert_imbalance(r1, dep.model_copy(update={"expert_balancer": True}), sw) == sw.moe_imbalance.value
    assert expert_imbalance(r1, dep.model_copy(update={"expert_imbalance": 1.3}), sw) == 1.3
    assert expert_imbalance(qwen, dep, sw) == sw.moe_imbalance.value
