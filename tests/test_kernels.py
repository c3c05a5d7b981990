"""Op-level calibration: the vectorised formulas equal the cost model's, and the AIC tables load (when installed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpusim.calibrate import kernels
from gpusim.perf.roofline import gemm_efficiency, op_time
from gpusim.specs.hardware import load_hardware
from gpusim.specs.software import load_software


def _setup():
    hw = load_hardware("gb300-nvl72")
    sw = load_software("trtllm").for_architecture(hw.gpu.architecture)
    return hw, sw, kernels.constants(sw)


def test_gemm_formula_matches_roofline() -> None:
    hw, sw, p = _setup()
    df = pd.DataFrame({"m": [1, 256, 8192], "n": [7168, 4096, 8192], "k": [2048, 4096, 8192], "dtype": ["fp8"] * 3})
    got = kernels._predict_gemm(df, kernels.Machine(hw), p)
    bw = hw.hbm_bandwidth * p["hbm_bandwidth_fraction"]
    for (m, n, k), t in zip(df[["m", "n", "k"]].itertuples(index=False), got, strict=True):
        eff = gemm_efficiency(m, sw.gemm_efficiency("fp8"), p["gemm_m_half"])
        want, _ = op_time(2 * m * n * k, n * k + m * (k + 2 * n), hw.peak_flops("fp8"), bw, eff, 1.0,
                          sw.value("gemm_kernel_us") * 1e-6)
        assert t == pytest.approx(want)


def _with_moe_kernel_times(sw, **us: float):
    from gpusim.specs.sourced import Sourced

    return sw.model_copy(update={k: Sourced(value=v, source="test", grade="D") for k, v in us.items()})


@pytest.mark.parametrize(("model", "tp", "weights", "compute"), [("gpt-oss-120b", 1, "fp4", "fp8"),
                                                              ("deepseek-r1", 8, "fp4", "fp4")])
def test_moe_formula_matches_the_step_model(model, tp, weights, compute) -> None:
    """The vectorised MoE row (weights and math precisions apart, e.g. MXFP4 x MXFP8) equals the step
    model's moe_experts op for the same tokens, shape and expert TP, each with the fixed kernel time of
    its compute precision."""
    from gpusim.perf.step import BatchShape, StepCostModel
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model

    hw, sw, _ = _setup()
    sw = _with_moe_kernel_times(sw, moe_kernel_us=5.0, moe_kernel_us_fp8=40.0, moe_kernel_us_fp4=9.0)
    p = kernels.constants(sw)
    spec = load_model(model)
    moe = spec.moe
    dep = Deployment(tp=tp, weights="fp4", activations="fp4")
    cm = StepCostModel(hw, spec, dep, sw)
    tokens = [16, 4096]
    df = pd.DataFrame({"num_tokens": tokens, "hidden_size": spec.hidden_size,
                       "inter_size": moe.expert_intermediate_size, "topk": moe.top_k,
                       "num_experts": moe.num_experts, "moe_tp_size": tp, "moe_ep_size": 1,
                       "dtype": compute, "weight_dtype": weights})
    got = kernels._predict_moe(df, kernels.Machine(hw), p, sw.moe_imbalance.value)
    for t, row in zip(tokens, got, strict=True):
        step = cm.breakdown(BatchShape(prefill_tokens=t)).by_op["moe_experts"]
        assert step == pytest.approx(spec.num_moe_layers * row)
    # the fixed part is two kernels of the compute precision's time per MoE layer
    bare = StepCostModel(hw, spec, dep, _with_moe_kernel_times(sw, moe_kernel_us=0.0, moe_kernel_us_fp8=0.0,
                                                                moe_kernel_us_fp4=0.0))
    b = BatchShape(prefill_tokens=16)
    fixed = cm.breakdown(b).by_op["moe_experts"] - bare.breakdown(b).by_op["moe_experts"]
    assert fixed == pytest.approx(spec.num_moe_layers * 2 * {"fp8": 40.0, "fp4": 9.0}[compute] * 1e-6)


def test_an_absent_precision_kernel_time_is_the_bf16_one() -> None:
    _, sw, _ = _setup()
    sw = _with_moe_kernel_times(sw, moe_kernel_us=12.0, moe_kernel_us_fp8=30.0)
    sw = sw.model_copy(update={"moe_kernel_us_fp4": None})
    assert sw.moe_kernel_s("bf16") == pytest.approx(12e-6)
    assert sw.moe_kernel_s("fp8") == pytest.approx(30e-6)
    assert sw.moe_kernel_s("fp4") == pytest.approx(12e-6)


def _moe_rows(dtypes: list[str], latency: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"moe_dtype": dtypes, "num_tokens": 8, "hidden_size": 4096, "inter_size": 1024, "topk": 8,
                         "num_experts": 128, "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced",
                         "kernel_source": [f"k{i}" for i in range(len(dtypes))], "latency": latency})


def test_fp8_experts_are_the_faster_of_per_tensor_and_block_scaled() -> None:
    """SGLang's tables measure only block-scaled FP8 experts: those are its fp8 family. Where both exist,
    the faster kernel for the shape stands (vLLM's block-scaled Triton on Hopper, TensorRT-LLM's per-tensor)."""
    sglang = kernels._prep_moe(_moe_rows(["bfloat16", "fp8_block"], [0.2, 0.1]))
    assert sorted(sglang["family"]) == ["moe_bf16", "moe_fp8"]
    for block_ms, source in ((0.05, "k1"), (0.3, "k0")):
        both = kernels._prep_moe(_moe_rows(["fp8", "fp8_block"], [0.1, block_ms]))
        assert list(both["family"]) == ["moe_fp8"] and list(both["kernel_source"]) == [source]


def test_context_attention_formula_matches_the_step_model() -> None:
    """One prompt of ISL tokens in the kernel formula and in step.py's prefill attention (per layer, one GPU)."""
    from gpusim.perf.step import BatchShape, StepCostModel
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model
    from gpusim.specs.sourced import Sourced

    hw = load_hardware("h100-hgx")
    sw = load_software("trtllm").for_architecture(hw.gpu.architecture)
    sw = sw.model_copy(update={"overrides": {}, **{k: Sourced(value=v, source="test", grade="D") for k, v in
                               (("attention_prefill_keys_half", 900.0), ("attention_prefill_kernel_us", 17.0))}})
    model = load_model("llama3.1-8b")
    dep = Deployment(weights="bf16", activations="bf16", kv_cache="bf16")
    cm = StepCostModel(hw, model, dep, sw)
    p = kernels.constants(sw)
    for isl in (256, 2048, 8192):
        df = pd.DataFrame({"batch_size": [1], "isl": [isl], "num_heads": [model.num_attention_heads],
                           "head_dim": [model.head_dim], "window_size": [0], "dtype": ["bf16"]})
        got = kernels._predict_context_attention(df, kernels.Machine(hw), p)[0]
        b = BatchShape(prefill_tokens=isl, prefill_attn_pairs=isl * (isl + 1) / 2, prefill_seqs=1)
        step = cm.breakdown(b).by_op["attention_prefill"] / model.num_layers
        assert got == pytest.approx(step)


def test_allreduce_formula_matches_collectives() -> None:
    from gpusim.perf.collectives import allreduce_time

    hw, _, p = _setup()
    df = pd.DataFrame({"num_gpus": [2, 4], "message_size": [1 << 20, 1 << 24]})
    alpha = p["nvlink_hop_latency_us"] * 1e-6
    got = kernels._predict_allreduce(df, kernels.Machine(hw), p, alpha)
    for (n, size), t in zip(df.itertuples(index=False), got, strict=True):
        want = allreduce_time(2.0 * size, n, hw.nvlink_bandwidth * p["allreduce_busbw_fraction"], alpha,
                              hw.nvlink.sharp, hw.nvlink_bandwidth * p["allreduce_small_busbw_fraction"],
                              p["allreduce_knee_mb"] * 1e6) + p["collective_kernel_us"] * 1e-6
        assert t == pytest.approx(want)


def test_allreduce_rows_keep_the_fastest_implementation_per_shape() -> None:
    """vLLM's and SGLang's tables time an eager and a CUDA-graph kernel per (GPUs, size): the faster stands."""
    rows = pd.DataFrame({"num_gpus": [2, 2, 8, 8], "message_size": [1024] * 4,
                         "kernel_source": ["eager", "graph", "eager", "graph"], "latency": [0.02, 0.004, 0.01, 0.03]})
    kept = kernels._prep_allreduce(rows).sort_values("num_gpus")
    assert list(kept["kernel_source"]) == ["graph", "eager"] and list(kept["latency"]) == [0.004, 0.01]


def test_kernel_tables_load_and_compare() -> None:
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    hw, sw, p = _setup()
    tables = kernels.load_tables(data, "gb300", max_rows=50)
    assert {"gemm_bf16", "gemm_fp8", "context_attention", "generation_attention", "moe_fp8", "moe_fp4",
            "allreduce"} <= set(tables)
    assert (tables["moe_fp4"]["moe_ep_size"] == 1).all()
    errors = kernels.family_errors(tables, kernels.predict(tables, hw, sw, p))
    assert all(e["rows"] > 0 and e["mape"] >= 0 for e in errors.values())


@pytest.mark.parametrize("system, profile", [("h100_sxm", "h100-hgx"), ("h200_sxm", "h200-hgx")])
def test_vllm_hopper_fp8_experts_are_the_triton_kernel_it_serves(system, profile) -> None:
    """vLLM on Hopper serves block-scaled FP8 experts with its Triton kernel: the fit reads only those rows, and
    the profile's constants time them within 20% (mixed with FlashInfer's per-tensor rows they came out 37-49%
    off, and twice too slow for MiniMax-M2.5's 16-token decode steps)."""
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    hw = load_hardware(profile)
    sw = load_software("vllm").for_architecture(hw.gpu.architecture)
    tables = {k: v for k, v in kernels.load_tables(data, system, max_rows=None, backend="vllm").items()
              if k == "moe_fp8"}
    rows = tables["moe_fp8"]
    assert rows["kernel_source"].str.endswith("tritonexperts").all()
    ratio = kernels.predict(tables, hw, sw, kernels.constants(sw))["moe_fp8"] / rows["latency"].to_numpy()
    assert np.mean(np.abs(ratio - 1)) < 0.2
    minimax = ((rows["hidden_size"] == 3072) & (rows["num_experts"] == 256) & (rows["num_tokens"] == 16)).to_numpy()
    assert minimax.any() and np.all(np.abs(ratio[minimax] - 1) < 0.35)


def test_saturated_gemm_efficiency_reads_compute_bound_shapes_only() -> None:
    """Compute-bound shapes timed at eff 0.5 on the shape curve give 0.5; memory-bound shapes and block-scaled
    FP8 (not gpusim's fp8) are left out, and a table of only those gives None."""
    hw, m_half = load_hardware("b200-hgx"), 64.0
    peak = hw.peak_flops("fp8")
    rows = [(m, n, k, "fp8", 2 * m * n * k / (peak * 0.5 * m / (m + m_half)) * 1e3)
            for m, n, k in [(8192, 8192, 8192), (16384, 8192, 8192), (8192, 16384, 16384)]]
    rows += [(1, 8192, 8192, "fp8", 1.0), (16, 4096, 4096, "fp8", 0.5), (8192, 8192, 8192, "fp8_block", 100.0)]
    df = pd.DataFrame(rows, columns=["m", "n", "k", "gemm_dtype", "latency"]).assign(dtype="fp8")
    assert kernels.saturated_gemm_efficiency(df, hw, m_half) == pytest.approx(0.5)
    assert kernels.saturated_gemm_efficiency(df.iloc[3:], hw, m_half) is None


def test_trtllm_nvfp4_gemms_keep_the_measured_ratio_of_blackwell_ultra_to_blackwell() -> None:
    """TensorRT-LLM's profile sets each architecture's NVFP4 GEMM efficiency so that Blackwell Ultra over
    Blackwell is the tables' measured saturated ratio (0.355 / 0.407 of peak), not 1: with one efficiency for
    both, B300's NVFP4 GEMMs would run at the spec sheets' 1.56x B200's."""
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    measured = kernels.saturated_by_architecture(data, ("b200_sxm", "gb200", "b300_sxm", "gb300"))
    sw = load_software("trtllm")
    profile = {a: sw.for_architecture(a).gemm_efficiency("fp4") for a in ("blackwell", "blackwell_ultra")}
    assert profile["blackwell_ultra"] / profile["blackwell"] == pytest.approx(
        measured["blackwell_ultra"]["gemm_efficiency_fp4"] / measured["blackwell"]["gemm_efficiency_fp4"], rel=0.02)


def test_gemm_formula_streams_nvfp4_at_its_own_fraction() -> None:
    hw, _, p = _setup()
    df = pd.DataFrame({"m": [1], "n": [8192], "k": [8192], "dtype": ["fp4"]})
    base = {**p, "gemm_kernel_us": 0.0}
    slow = {**base, "hbm_bandwidth_fraction_fp4": base["hbm_bandwidth_fraction_fp4"] / 2}
    mc = kernels.Machine(hw)
    assert kernels._predict_gemm(df, mc, slow)[0] / kernels._predict_gemm(df, mc, base)[0] == pytest.approx(2.0)


def test_streaming_rate_keeps_each_precisions_fixed_time_out() -> None:
    """Decode-sized GEMMs timed as t0 + bytes / rate give back the rate whatever t0; prefill-sized shapes
    and block-scaled FP8 are left out, and a table of only those gives None."""
    rate, t0 = 4e12, 8e-6
    shapes = pd.DataFrame([(1, 4096, 4096), (8, 8192, 8192), (16, 16384, 8192), (4, 28672, 8192)],
                          columns=["m", "n", "k"]).assign(dtype="fp4")
    _, _, bytes_ = kernels._gemm_work(shapes)
    decode = shapes.assign(gemm_dtype="nvfp4", latency=(t0 + bytes_ / rate) * 1e3)
    others = pd.DataFrame([(4096, 8192, 8192, "nvfp4", 1.0), (8, 8192, 8192, "fp8_block", 1.0)],
                          columns=["m", "n", "k", "gemm_dtype", "latency"]).assign(dtype="fp4")
    df = pd.concat([decode, others], ignore_index=True)
    assert kernels.streaming_rate(df) == pytest.approx(rate, rel=1e-6)
    assert kernels.streaming_rate(others) is None


def test_a_family_limited_fit_moves_only_their_constants() -> None:
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    r = kernels.calibrate_system(data, "b200_sxm", max_rows=30, backend="sglang", families=("moe",))
    assert set(r["before"]) == {"moe_bf16", "moe_fp8", "moe_fp4"}  # SGLang's FP8 experts: block-scaled rows
    assert set(r["fitted"]) == {"moe_efficiency", "moe_inter_half", "moe_kernel_us", "moe_efficiency_fp8",
                                "moe_inter_half_fp8", "moe_kernel_us_fp8", "moe_efficiency_fp4",
                                "moe_inter_half_fp4", "moe_kernel_us_fp4"}
    assert "joint fit: moe_" in kernels.format_result(r)


def test_a_pooled_fit_recovers_one_set_of_constants_from_two_systems() -> None:
    """All-reduce rows timed with known constants on two systems of different link rates (H100 HGX, B200
    HGX): the pooled fit, starting from the profile's single rate, finds those constants for both."""
    truth = {"allreduce_busbw_fraction": 0.4, "allreduce_small_busbw_fraction": 0.15, "allreduce_knee_mb": 8.0,
             "collective_kernel_us": 3.0}
    sizes = [1 << s for s in range(10, 29, 2)]
    sets = []
    for profile in ("h100-hgx", "b200-hgx"):
        hw = load_hardware(profile)
        sw = load_software("vllm").for_architecture(hw.gpu.architecture)
        df = pd.DataFrame([(n, s) for n in (2, 4, 8) for s in sizes], columns=["num_gpus", "message_size"])
        p = {**kernels.constants(sw), **truth}
        df = df.assign(latency=kernels._predict_allreduce(df, kernels.Machine(hw), p, kernels._alpha(p)) * 1e3,
                       op="allreduce")
        sets.append(({"allreduce": df}, hw, sw))
    fitted = kernels.fit_pooled(sets, kernels.RELEVANT["allreduce"])
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=1e-3)


def test_pooled_calibration_groups_systems_by_architecture() -> None:
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    out = kernels.calibrate_architectures(data, ("h100_sxm", "b200_sxm", "h200_sxm"), max_rows=30, backend="vllm",
                                          families=("allreduce",))
    assert {r["architecture"]: r["systems"] for r in out} == {"hopper": ["h100_sxm", "h200_sxm"],
                                                              "blackwell": ["b200_sxm"]}
    assert all(set(r["fitted"]) == set(kernels.RELEVANT["allreduce"]) for r in out)
    assert "pooled fit: allreduce_busbw_fraction" in kernels.format_architecture(out[0])


def _decode_per_layer(hw, model_id: str, dep, sw, batch: int, context: float) -> float:
    """step.py's decode attention of `batch` sequences at `context` KV tokens each, per layer, one GPU."""
    from gpusim.perf.step import BatchShape, StepCostModel
    from gpusim.specs.model import load_model

    model = load_model(model_id)
    cm = StepCostModel(hw, model, dep, sw)
    by_op = cm.breakdown(BatchShape(decode_seqs=batch, decode_context=batch * context)).by_op
    return by_op["attention_decode"] / model.num_layers


def _decode_profile(hw, flops_fraction: float | None):
    """The shipped profile on `hw`'s architecture; with `flops_fraction`, decode attention that slow in FLOPs
    (so that its compute side, not its memory side, sets the time)."""
    from gpusim.specs.sourced import Sourced

    sw = load_software("trtllm").for_architecture(hw.gpu.architecture).model_copy(update={"overrides": {}})
    if flops_fraction is None:
        return sw
    return sw.model_copy(update={"attention_decode_flops_fraction": Sourced(value=flops_fraction, source="test",
                                                                            grade="D")})


@pytest.mark.parametrize("flops_fraction", [None, 0.001])
def test_generation_attention_formula_matches_the_step_model(flops_fraction) -> None:
    """GQA decode rows (batch, context, heads, KV heads) in the kernel formula and in step.py (per layer),
    memory-bound as shipped and compute-bound with a tiny FLOPs fraction."""
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model

    hw = load_hardware("h100-hgx")
    sw = _decode_profile(hw, flops_fraction)
    p = kernels.constants(sw)
    model = load_model("llama3.1-8b")
    dep = Deployment(weights="bf16", activations="bf16", kv_cache="bf16")
    for batch, isl in ((1, 1024), (64, 4096), (256, 16384)):
        df = pd.DataFrame({"batch_size": [batch], "isl": [isl], "step": [0], "window_size": [0],
                           "num_heads": [model.num_attention_heads], "num_key_value_heads": [model.num_kv_heads],
                           "head_dim": [model.head_dim], "kv_dtype": ["bf16"], "dtype": ["bf16"]})
        got = kernels._predict_generation_attention(df, kernels.Machine(hw), p)[0]
        assert got == pytest.approx(_decode_per_layer(hw, "llama3.1-8b", dep, sw, batch, isl))


@pytest.mark.parametrize("tp", [1, 8])
def test_mla_formulas_match_the_step_model(tp) -> None:
    """DeepSeek-R1's MLA in FP8 on one GPU of a TP group (128 heads at tp 1: compute-bound decode; 16 at tp 8:
    memory-bound): prompt and decode rows in the kernel formulas and in step.py, per layer."""
    from gpusim.perf.step import BatchShape, StepCostModel
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model

    hw = load_hardware("b200-hgx")
    sw = _decode_profile(hw, None)
    p = kernels.constants(sw)
    model = load_model("deepseek-r1")
    dep = Deployment(tp=tp, ep=tp, weights="fp8", activations="fp8", kv_cache="fp8")
    cm = StepCostModel(hw, model, dep, sw)
    heads = model.num_attention_heads // tp
    for isl in (512, 4096):
        df = pd.DataFrame({"batch_size": [2], "isl": [isl], "step": [0], "num_heads": [heads],
                           "kv_dtype": ["fp8"], "dtype": ["fp8"]})
        mc = kernels.Machine(hw)
        prefill = cm.breakdown(BatchShape(prefill_tokens=2 * isl, prefill_attn_pairs=2 * isl * (isl + 1) / 2,
                                          prefill_seqs=2)).by_op["attention_prefill"] / model.num_layers
        assert kernels._predict_mla_context(df, mc, p)[0] == pytest.approx(prefill)
        decode = _decode_per_layer(hw, "deepseek-r1", dep, sw, 2, isl)
        assert kernels._predict_mla_generation(df, mc, p)[0] == pytest.approx(decode)


def test_alltoall_formula_matches_the_step_model() -> None:
    """Wide-EP dispatch and combine (DeepSeek-R1 on 8 GPUs, attention DP): the kernel formula per call equals
    the roofline timer's time of the step's all-to-all ops per layer."""
    from gpusim.perf.step import StepCostModel
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model

    hw, sw, p = _setup()
    model = load_model("deepseek-r1")
    cm = StepCostModel(hw, model, Deployment(tp=8, ep=8, attention_dp=True), sw)
    a2a = [op for op in cm.ops.comm_ops if op.kind == "alltoall"]
    assert {op.name for op in a2a} == {"ep_dispatch", "ep_combine"}
    for op in a2a:
        dtype = {1.0: "fp8", 2.0: "bf16"}[op.bytes_per_token / model.hidden_size]
        for tokens in (1, 128, 4096):
            df = pd.DataFrame({"num_tokens": [tokens], "topk": [op.top_k], "hidden_size": [model.hidden_size],
                               "comm_dtype": [dtype], "ep_size": [op.group]})
            got = kernels._predict_alltoall(df, kernels.Machine(hw), p, p["alltoall_hop_latency_us"] * 1e-6,
                                            sw.moe_imbalance.value)[0]
            timed = cm.timer.alltoall(op, tokens * op.split)
            assert got == pytest.approx((timed.seconds + timed.launch) / op.count)


def test_blackwell_ultra_gains_most_on_prompt_attention_with_the_fewest_flops_per_exponential() -> None:
    """NVIDIA's tables time B200's context attention against B300's at 1.33x for head_dim 64 and 1.10x for 512:
    the fewer FLOPs per softmax exponential, the more Blackwell Ultra's doubled SFU rate shows. The model's
    ratio must fall with head_dim as the measured one does, and stay within 12% of it per head_dim."""
    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    keys = ["kernel_source", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "dtype"]
    timed = {}
    for system in ("b200_sxm", "b300_sxm"):
        hw = load_hardware(kernels._profile(system))
        sw = load_software("trtllm").for_architecture(hw.gpu.architecture)
        df = kernels.load_tables(data, system, max_rows=None)["context_attention"]
        df = df[(df["isl"] >= 4096) & (df["window_size"] == 0) & (df["batch_size"] * df["num_heads"] >= 64)]
        df = df.assign(model=kernels.predict({"c": df}, hw, sw, kernels.constants(sw))["c"])
        timed[system] = df.set_index(keys)[["latency", "model"]]
    both = timed["b200_sxm"].join(timed["b300_sxm"].add_suffix("_b300"), how="inner")
    ratios = pd.DataFrame({"measured": both["latency"] / both["latency_b300"],
                           "model": both["model"] / both["model_b300"]})
    by_dim = ratios.groupby(level="head_dim").agg(lambda x: float(np.exp(np.log(x).mean())))
    assert by_dim["measured"].is_monotonic_decreasing
    assert by_dim["model"].is_monotonic_decreasing
    assert (by_dim["model"] / by_dim["measured"]).between(0.88, 1.12).all(), by_dim


def test_prompt_attention_spends_one_exponential_per_pair_and_head_at_the_sfu_rate() -> None:
    """Halving a GPU's exponential rate adds heads / rate / fraction seconds per causal pair and layer to its
    prompt attention; a GPU profile without the rate times the FLOPs alone."""
    from gpusim.perf.ops import build_ops
    from gpusim.perf.timer import RooflineTimer, TimingContext
    from gpusim.specs.deployment import Deployment
    from gpusim.specs.model import load_model
    from gpusim.specs.sourced import Sourced

    hw = load_hardware("b300-hgx")
    model = load_model("gpt-oss-120b")
    dep = Deployment(weights="fp4", activations="fp4")
    sw = load_software("trtllm").for_architecture(hw.gpu.architecture)
    ops = build_ops(model, dep, 1.0)

    def pair_s(exp_rate: float | None) -> float:
        rate = None if exp_rate is None else Sourced(value=exp_rate, source="test", grade="D", note="test")
        gpu = hw.gpu.model_copy(update={"exp_tera_per_s": rate})
        ctx = TimingContext(hw.model_copy(update={"gpu": gpu}), model, dep, sw, ops, 1.0)
        return RooflineTimer(ctx).saturated_pair_s

    fraction = sw.attention_prefill_flops_fraction.value
    heads = model.num_attention_heads
    assert pair_s(5.0) - pair_s(10.0) == pytest.approx(heads * (1 / 5e12 - 1 / 10e12) / fraction)
    flops_only = ops.attention.prefill_flops_per_pair / (hw.peak_flops(ops.attention.dtype) * fraction)
    assert pair_s(None) == pytest.approx(flops_only)
    assert pair_s(10.7) == pytest.approx(flops_only + heads / 10.7e12 / fraction)
