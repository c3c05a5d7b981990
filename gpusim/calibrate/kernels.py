"""Op-level ground truth: gpusim's op-time formulas against NVIDIA's measured kernel tables.

The tables ship in the optional PyPI package `aiconfigurator-core==0.12.0` (Apache-2.0) as parquet files
`aiconfigurator_core/systems/data/<system>/<family>/<backend>/<version>/*_perf.parquet`; they are read
here with pyarrow by path, never through AIC's API. For each system and op family the measured kernel
latency is compared with the time gpusim's cost model gives the same op, and a few constants of the
software profile are fitted per system by least squares on log time:

    python -m gpusim.calibrate.kernels [--systems gb300 h100_sxm] [--max-rows 2000] [--json]
    python -m gpusim.calibrate.kernels --saturated   # eff_max per GEMM precision and architecture
    python -m gpusim.calibrate.kernels --pooled --families allreduce   # one fit per architecture

The formulas are vectorised copies of what the roofline timer (`gpusim/perf/timer.py`, composed by
`gpusim/perf/step.py`) does per op kind (see each `_predict_*`); `tests/test_kernels.py` checks every family
(GEMM, MoE, context and generation attention, MLA context and generation, all-reduce, all-to-all) against the
scalar code. Fitted values are printed, not written into hardware_profiles/software/*.yaml.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpusim.analysis.published import map_system
from gpusim.perf.collectives import allreduce_seconds
from gpusim.perf.kernel_tables import aic_data_dir, table_path
from gpusim.perf.ops import DTYPE_BYTES
from gpusim.perf.roofline import prompt_attention_seconds
from gpusim.specs.hardware import Hardware, load_hardware
from gpusim.specs.software import SoftwareProfile, load_software, precision_constant

SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300")

PARAMS = ("gemm_efficiency_max", "gemm_efficiency_fp8", "gemm_efficiency_fp4", "gemm_m_half",
          "hbm_bandwidth_fraction", "hbm_bandwidth_fraction_fp4", "gemm_kernel_us",
          "attention_prefill_flops_fraction", "attention_prefill_keys_half",
          "attention_prefill_kernel_us", "attention_decode_flops_fraction",
          "attention_decode_bandwidth_fraction", "attention_kernel_us", "moe_efficiency", "moe_efficiency_fp8",
          "moe_efficiency_fp4", "moe_inter_half", "moe_inter_half_fp8", "moe_inter_half_fp4", "moe_kernel_us",
          "moe_kernel_us_fp8", "moe_kernel_us_fp4",
          "allreduce_busbw_fraction", "allreduce_small_busbw_fraction", "allreduce_knee_mb", "nvlink_hop_latency_us",
          "collective_kernel_us", "alltoall_efficiency",
          "alltoall_hop_latency_us", "alltoall_kernel_us")
"""The constants fitted, by their software-profile names."""
_PRECISIONS = ("bf16", "fp8", "fp4")
_MOE_EFF, _MOE_HALF, _MOE_KERNEL, _GEMM_EFF = ({d: precision_constant(name, d) for d in _PRECISIONS} for name in
                                             ("moe_efficiency", "moe_inter_half", "moe_kernel_us", "gemm_efficiency"))
_FIXED = ("gemm_kernel_us", "attention_kernel_us", "attention_prefill_kernel_us", *_MOE_KERNEL.values(),
          "collective_kernel_us", "alltoall_kernel_us")
BOUNDS = {"gemm_m_half": (1.0, 4096.0), "allreduce_knee_mb": (0.01, 2000.0),
          "attention_prefill_keys_half": (0.0, 1e5), "nvlink_hop_latency_us": (0.01, 20.0),
          "alltoall_hop_latency_us": (0.1, 50.0),
          **{k: (0.0, 60.0) for k in _FIXED}, **{k: (0.0, 20000.0) for k in _MOE_HALF.values()}}
"""Bounds of the non-fraction constants; fractions lie in [0.02, 1]."""
_ATTN = ("attention_prefill_flops_fraction", "attention_prefill_keys_half", "attention_prefill_kernel_us")
_DECODE = ("attention_decode_flops_fraction", "attention_decode_bandwidth_fraction", "attention_kernel_us")
RELEVANT = {
    "gemm_bf16": ("gemm_efficiency_max", "gemm_m_half", "hbm_bandwidth_fraction", "gemm_kernel_us"),
    "gemm_fp8": ("gemm_efficiency_fp8", "gemm_kernel_us"),
    "gemm_fp4": ("gemm_efficiency_fp4", "hbm_bandwidth_fraction_fp4", "gemm_kernel_us"),
    **{f"moe_{d}": (_MOE_EFF[d], _MOE_HALF[d], _MOE_KERNEL[d]) for d in _PRECISIONS},
    "context_attention": _ATTN, "mla_context": _ATTN,
    "generation_attention": _DECODE, "mla_generation": _DECODE,
    "allreduce": ("allreduce_busbw_fraction", "allreduce_small_busbw_fraction", "allreduce_knee_mb",
                  "collective_kernel_us"),
    "alltoall": ("alltoall_efficiency", "alltoall_hop_latency_us", "alltoall_kernel_us"),
}
"""The constants each op family's time depends on (for the per-family fit); the others stay fixed.
GEMM shape (m_half) and achievable bandwidth come from BF16 GEMMs; the FP8/FP4 fits move only their own
peak fraction (NVFP4 also its own bandwidth) and the shared per-kernel time, so the per-dtype efficiencies
stay comparable."""


def relevant_constants(tables: dict[str, pd.DataFrame]) -> tuple[str, ...]:
    """The constants the families of `tables` depend on (`RELEVANT`, by family name or else by op), in order."""
    return tuple(dict.fromkeys(c for name, df in tables.items()
                               for c in RELEVANT.get(name) or RELEVANT[df["op"].iloc[0]]))


_DTYPE = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "fp4": "fp4"}
_MOE_PRECISION = {"bfloat16": ("bf16", "bf16"), "fp8": ("fp8", "fp8"), "nvfp4": ("fp4", "fp4"),
                  "w4a8_mxfp4_mxfp8": ("fp4", "fp8")}
"""MoE quantisation → (weight, compute) precision: MXFP4 experts with MXFP8 activations compute at FP8
(ops.py: the wider of weights and activations) and read 4-bit weights (MXFP4 counted as NVFP4's bytes).
Block-scaled FP8 (`fp8_block`, 128x128 scales: DeepGEMM on Hopper runs it at about 0.6 of per-tensor
FP8) is not a gpusim precision for dense GEMMs, whose `fp8` is per-tensor FP8. FP8 experts are, per shape,
the faster of the per-tensor and the block-scaled kernel (`_prep_moe`). The engines run the released
FP8 MoE checkpoints (DeepSeek, Qwen3, MiniMax: 128x128 block scales) with whichever they have: SGLang's
tables measure only block-scaled experts, and on Hopper vLLM's block-scaled Triton kernel is 4-6x faster
than its per-tensor CUTLASS one; TensorRT-LLM's per-tensor kernel is the faster one."""
# DeepSeek-V3 MLA head dimensions: the MLA tables are measured for this architecture.
_MLA_QK_NOPE, _MLA_ROPE, _MLA_V, _MLA_LORA = 128, 64, 128, 512


# ---- gpusim's formulas, vectorised ----------------------------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """The hardware peaks the formulas need (FLOP/s by dtype, bytes/s)."""

    hw: Hardware

    def peak(self, dtypes: pd.Series) -> np.ndarray:
        return np.array([self.hw.peak_flops(d) for d in dtypes], dtype=float)


def _roofline(flops: np.ndarray, bytes_: np.ndarray, peak: np.ndarray, bw: float | np.ndarray, eff_c,
              launch_s: float | np.ndarray, kernels: float = 1.0) -> np.ndarray:
    """roofline.op_time: max(flops / (peak · eff_c), bytes / bw) + launches, in seconds."""
    return np.maximum(flops / (peak * eff_c), bytes_ / bw) + kernels * launch_s




def _per_dtype(dtypes: pd.Series, p: dict, names: dict[str, str]) -> np.ndarray:
    """The constant `names[dtype]` of each row's compute precision."""
    return dtypes.map(lambda d: p[names[d]]).to_numpy(float)


def _eff_max(dtypes: pd.Series, p: dict) -> np.ndarray:
    """SoftwareProfile.gemm_efficiency per row: eff_max of the row's compute precision."""
    return _per_dtype(dtypes, p, _GEMM_EFF)


def _gemm_eff(m: np.ndarray, p: dict, dtypes: pd.Series, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """roofline.gemm_efficiency: eff_max(dtype) · scale · m / (m + m_half)."""
    return _eff_max(dtypes, p) * scale * m / (m + p["gemm_m_half"])


def _gemm_work(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, FLOPs, HBM bytes) per GEMM row as step.py's GemmOp counts them: 2mnk FLOPs; weights n·k and
    input m·k at the GEMM precision, output m·n bf16."""
    wb = df["dtype"].map(DTYPE_BYTES).to_numpy(float)
    m, n, k = (df[c].to_numpy(float) for c in ("m", "n", "k"))
    return m, 2 * m * n * k, n * k * wb + m * (k * wb + n * 2.0)


def _predict_gemm(df: pd.DataFrame, mc: Machine, p: dict) -> np.ndarray:
    """step.py GemmOp on the roofline (`_gemm_work`)."""
    m, flops, bytes_ = _gemm_work(df)
    fp4 = (df["dtype"] == "fp4").to_numpy()
    bw = mc.hw.hbm_bandwidth * np.where(fp4, p["hbm_bandwidth_fraction_fp4"], p["hbm_bandwidth_fraction"])
    return _roofline(flops, bytes_, mc.peak(df["dtype"]), bw, _gemm_eff(m, p, df["dtype"]), p["gemm_kernel_us"] * 1e-6)


def _causal_pairs(isl: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Causal query-key pairs of a prompt of `isl`, each query seeing at most `window` keys (0: all)."""
    full = isl * (isl + 1) / 2
    w = np.where(window > 0, np.minimum(window, isl), isl)
    return np.where(window > 0, isl * w - w * (w - 1) / 2, full)


def _prefill_attention(flops: np.ndarray, exps: np.ndarray, keys_per_query: np.ndarray, dtypes: pd.Series,
                       mc: Machine, p: dict) -> np.ndarray:
    """step.py prefill attention: FLOPs at peak and exponentials at the SFU rate
    (`roofline.prompt_attention_seconds`), at fraction · L / (L + keys_half) of that (L keys per query), plus
    the fixed time per kernel."""
    eff = p["attention_prefill_flops_fraction"] * keys_per_query / (keys_per_query + p["attention_prefill_keys_half"])
    full_rate = prompt_attention_seconds(flops, exps, mc.peak(dtypes), mc.hw.exp_per_s)
    return full_rate / eff + p["attention_prefill_kernel_us"] * 1e-6


def _predict_context_attention(df: pd.DataFrame, mc: Machine, p: dict) -> np.ndarray:
    """step.py prefill attention: pairs · 4·heads·head_dim FLOPs and pairs · heads exponentials on the length
    curve (`_prefill_attention`)."""
    isl, window = df["isl"].to_numpy(float), df["window_size"].to_numpy(float)
    pairs = df["batch_size"].to_numpy(float) * _causal_pairs(isl, window)
    heads = df["num_heads"].to_numpy(float)
    flops = pairs * 4 * heads * df["head_dim"].to_numpy(float)
    return _prefill_attention(flops, pairs * heads, pairs / (df["batch_size"].to_numpy(float) * isl), df["dtype"],
                              mc, p)


def _decode_attention(kv: np.ndarray, flops_per_kv: np.ndarray, bytes_per_kv: np.ndarray, dtypes: pd.Series,
                      mc: Machine, p: dict) -> np.ndarray:
    """step.py decode attention: max(KV·FLOPs / attention FLOPS, KV·bytes / attention bandwidth) + launch."""
    t_c = kv * flops_per_kv / (mc.peak(dtypes) * p["attention_decode_flops_fraction"])
    t_m = kv * bytes_per_kv / (mc.hw.hbm_bandwidth * p["attention_decode_bandwidth_fraction"])
    return np.maximum(t_c, t_m) + p["attention_kernel_us"] * 1e-6


def _predict_generation_attention(df: pd.DataFrame, mc: Machine, p: dict) -> np.ndarray:
    """KV tokens read = batch · (isl + step), capped by the window; 2·kv_heads·head_dim·kv bytes each."""
    ctx = df["isl"].to_numpy(float) + df["step"].to_numpy(float)
    win = df["window_size"].to_numpy(float)
    kv = df["batch_size"].to_numpy(float) * np.where(win > 0, np.minimum(ctx, win), ctx)
    hd = df["head_dim"].to_numpy(float)
    kvb = df["kv_dtype"].map(DTYPE_BYTES).to_numpy()
    return _decode_attention(kv, 4 * df["num_heads"].to_numpy(float) * hd,
                             2 * df["num_key_value_heads"].to_numpy(float) * hd * kvb, df["dtype"], mc, p)


def _predict_mla_context(df: pd.DataFrame, mc: Machine, p: dict) -> np.ndarray:
    """MLA prefill: pairs · 2·heads·(qk_nope + rope + v) FLOPs and pairs · heads exponentials (ops.py
    `_attention`)."""
    isl, batch = df["isl"].to_numpy(float), df["batch_size"].to_numpy(float)
    pairs = batch * _causal_pairs(isl, np.zeros(len(df)))
    heads = df["num_heads"].to_numpy(float)
    flops = pairs * 2 * heads * (_MLA_QK_NOPE + _MLA_ROPE + _MLA_V)
    return _prefill_attention(flops, pairs * heads, pairs / (batch * isl), df["dtype"], mc, p)


def _predict_mla_generation(df: pd.DataFrame, mc: Machine, p: dict) -> np.ndarray:
    """MLA decode (absorbed): 2·heads·(2·kv_lora + rope) FLOPs and (kv_lora + rope) bytes per KV token."""
    kv = df["batch_size"].to_numpy(float) * (df["isl"].to_numpy(float) + df["step"].to_numpy(float))
    kvb = df["kv_dtype"].map(DTYPE_BYTES).to_numpy()
    return _decode_attention(kv, 2 * df["num_heads"].to_numpy(float) * (2 * _MLA_LORA + _MLA_ROPE),
                             (_MLA_LORA + _MLA_ROPE) * kvb, df["dtype"], mc, p)


def _predict_moe(df: pd.DataFrame, mc: Machine, p: dict, imbalance: float) -> np.ndarray:
    """ops.MoEOp on a group of tp = moe_tp·moe_ep GPUs: distinct experts hit, busiest-rank load, 2 kernels;
    weights at `weight_dtype`, activations and math at `dtype`, grouped-GEMM efficiency of that dtype and
    expert width (SoftwareProfile.gemm_efficiency with expert_inter)."""
    t = df["num_tokens"].to_numpy(float)
    h, inter = df["hidden_size"].to_numpy(float), df["inter_size"].to_numpy(float)
    k, e = df["topk"].to_numpy(float), df["num_experts"].to_numpy(float)
    ep = df["moe_ep_size"].to_numpy(float)
    tp = df["moe_tp_size"].to_numpy(float) * ep
    wb = df["weight_dtype"].map(DTYPE_BYTES).to_numpy()
    ab = df["dtype"].map(DTYPE_BYTES).to_numpy()
    params = 3 * h * inter
    load = np.where(ep > 1, imbalance, 1.0)
    hit = 1 - (1 - k / e) ** t
    bytes_ = (e / ep) * hit * params * wb * ep / tp + (t * k / ep * load) * (h * (ab + 2) + 2 * inter * ep / tp * ab)
    flops = t * k * 2 * params / tp * load
    m = t * k / (e * hit)
    bw = mc.hw.hbm_bandwidth * p["hbm_bandwidth_fraction"]
    inter_local = inter * ep / tp
    grouped = _per_dtype(df["dtype"], p, _MOE_EFF) * inter_local / (inter_local + _per_dtype(df["dtype"], p, _MOE_HALF))
    return _roofline(flops, bytes_, mc.peak(df["dtype"]), bw, _gemm_eff(m, p, df["dtype"], grouped),
                     _per_dtype(df["dtype"], p, _MOE_KERNEL) * 1e-6, 2)


def _predict_allreduce(df: pd.DataFrame, mc: Machine, p: dict, alpha_s: float) -> np.ndarray:
    """collectives.allreduce_seconds on NVLink (two rates joined at the knee, halved with SHARP) plus the
    fixed time per call."""
    n = df["num_gpus"].to_numpy(float)
    size = df["message_size"].to_numpy(float) * 2.0  # bf16 elements
    bw = mc.hw.domain_bandwidth(n - 1)
    return allreduce_seconds(size, n, bw * p["allreduce_busbw_fraction"], alpha_s, mc.hw.nvlink.sharp,
                             bw * p["allreduce_small_busbw_fraction"], p["allreduce_knee_mb"] * 1e6) + \
        p["collective_kernel_us"] * 1e-6


def _predict_alltoall(df: pd.DataFrame, mc: Machine, p: dict, alpha_s: float, imbalance: float) -> np.ndarray:
    """collectives.alltoall_time: T·k·hidden·bytes·(EP−1)/EP / (B·eff) · imbalance + α·log2(EP), plus the fixed
    time per call."""
    ep = df["ep_size"].to_numpy(float)
    sent = (df["num_tokens"].to_numpy(float) * df["topk"].to_numpy(float) * df["hidden_size"].to_numpy(float)
            * df["comm_dtype"].map(DTYPE_BYTES).to_numpy() * (ep - 1) / ep)
    bw = mc.hw.domain_bandwidth(ep - 1, alltoall=True) * p["alltoall_efficiency"]
    return sent / bw * imbalance + alpha_s * np.log2(ep) + p["alltoall_kernel_us"] * 1e-6


# ---- the measured tables ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """One op family: where its table lives, how to normalise it, and gpusim's prediction."""

    name: str
    folder: str
    file: str
    prepare: Callable[[pd.DataFrame], pd.DataFrame]
    predict: Callable[[pd.DataFrame, Machine, dict, SoftwareProfile], np.ndarray]


def _dtypes(df: pd.DataFrame, col: str, out: str = "dtype") -> pd.DataFrame:
    df = df.assign(**{out: df[col].map(_DTYPE)})
    return df[df[out].notna()]


def _wider_attention(df: pd.DataFrame) -> pd.DataFrame:
    """ops.py: attention runs at the wider of KV and activation precision (no FP4 attention)."""
    df = _dtypes(_dtypes(df, "kv_cache_dtype", "kv_dtype"), "attn_dtype")
    wide = (df["dtype"] == "bf16") | (df["kv_dtype"] == "bf16")
    return df.assign(dtype=np.where(wide, "bf16", "fp8"))


def _prep_gemm(df: pd.DataFrame) -> pd.DataFrame:
    df = _dtypes(df, "gemm_dtype")
    return df.assign(family="gemm_" + df["dtype"])


def _prep_mla(df: pd.DataFrame) -> pd.DataFrame:
    return _wider_attention(df.rename(columns={"mla_dtype": "attn_dtype"}))


def _prep_moe(df: pd.DataFrame) -> pd.DataFrame:
    """Balanced routing on one expert-parallel rank (moe_ep_size 1), one family per compute precision;
    gated (SwiGLU) experts, as ops.py models them, and per shape the fastest kernel the tables measured
    (an engine's autotuner picks it, e.g. TRTLLM-gen over CUTLASS for NVFP4 on Blackwell; FP8 per-tensor
    or block-scaled, see `_MOE_PRECISION`).
    The collector feeds a rank every token of the step, so its EP > 1 rows also carry the routing of
    tokens a dispatching (all-to-all) deployment never sends there; EP enters gpusim through its
    all-to-all and imbalance terms instead."""
    df = df[(df["distribution"] == "balanced") & (df["moe_ep_size"] == 1)
            & ~df["kernel_source"].str.endswith("nongated")]
    df = df.assign(moe_dtype=df["moe_dtype"].replace("fp8_block", "fp8"))  # FP8: per-tensor or block-scaled
    shape = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size"]
    df = df.loc[df.groupby(shape)["latency"].idxmin()]
    df = df[df["moe_dtype"].isin(_MOE_PRECISION)]
    precision = df["moe_dtype"].map(_MOE_PRECISION)
    df = df.assign(weight_dtype=precision.str[0], dtype=precision.str[1])
    return df.assign(family="moe_" + df["dtype"])


def _prep_a2a(df: pd.DataFrame) -> pd.DataFrame:
    df = df[(df["node_num"] == 1) & (df["comm_backend"].str.endswith("_ll"))]
    df = df.assign(comm_dtype=df["comm_dtype"].map({**_DTYPE, "fp4": "fp4"}), latency=df["latency"] / 1e3)
    return df[df["comm_dtype"].notna()]  # latency in µs in this table


def _prep_allreduce(df: pd.DataFrame) -> pd.DataFrame:
    """Per GPU count and message size the fastest implementation measured: vLLM's and SGLang's tables hold
    an eager and a CUDA-graph kernel, and serving decode steps run in CUDA graphs."""
    return df.loc[df.groupby(["num_gpus", "message_size"])["latency"].idxmin()]


def _alpha(p: dict) -> float:
    return p["nvlink_hop_latency_us"] * 1e-6


FAMILIES = (
    Family("gemm", "gemm", "gemm_perf.parquet", _prep_gemm, lambda d, mc, p, sw: _predict_gemm(d, mc, p)),
    Family("context_attention", "attention", "context_attention_perf.parquet", _wider_attention,
           lambda d, mc, p, sw: _predict_context_attention(d, mc, p)),
    Family("generation_attention", "attention", "generation_attention_perf.parquet", _wider_attention,
           lambda d, mc, p, sw: _predict_generation_attention(d, mc, p)),
    Family("mla_context", "mla", "context_mla_perf.parquet", _prep_mla,
           lambda d, mc, p, sw: _predict_mla_context(d, mc, p)),
    Family("mla_generation", "mla", "generation_mla_perf.parquet", _prep_mla,
           lambda d, mc, p, sw: _predict_mla_generation(d, mc, p)),
    Family("moe", "moe", "moe_perf.parquet", _prep_moe,
           lambda d, mc, p, sw: _predict_moe(d, mc, p, sw.moe_imbalance.value)),
    Family("allreduce", "comm", "custom_allreduce_perf.parquet", _prep_allreduce,
           lambda d, mc, p, sw: _predict_allreduce(d, mc, p, _alpha(p))),
    Family("alltoall", "comm", "moe_a2a_perf.parquet", _prep_a2a,
           lambda d, mc, p, sw: _predict_alltoall(d, mc, p, p["alltoall_hop_latency_us"] * 1e-6,
                                                  sw.moe_imbalance.value)),
)


SERVED_MOE_KERNELS: dict[tuple[str, str], str] = {("vllm", "hopper"): "tritonexperts"}
"""(backend, architecture) → the MoE kernel (`kernel_source` suffix) the engine runs there, where the tables
also measure kernels of a checkpoint format it does not serve. vLLM on Hopper runs its Triton experts for
block-scaled FP8 checkpoints (`Fp8MoEMethod`: DeepSeek, Qwen3, MiniMax-M2.5, GLM); the tables' FlashInfer
CUTLASS FP8 rows are ModelOpt per-tensor checkpoints, faster per shape at some sizes and up to 2x slower at
others, so the fastest of the two fits neither (FP8 MAPE 36-44% against 14-15% on the Triton rows alone)."""


def load_tables(data: Path, system: str, max_rows: int | None = 2000, seed: int = 0,
                backend: str = "trtllm", moe_kernel: str | None = None) -> dict[str, pd.DataFrame]:
    """Measured rows per family (GEMM split by dtype), `latency` in ms, at most `max_rows` each (seeded);
    a family whose table is missing or shaped differently for `backend` is left out. `moe_kernel` keeps
    only the MoE rows of that kernel (`kernel_source` ending with it, e.g. `cutlass`): the kernel an older
    round's MoE backend ran. Without it, the kernel the engine serves on the system's architecture
    (`SERVED_MOE_KERNELS`), else the fastest one measured per shape."""
    hw = load_hardware(_profile(system))
    moe_kernel = moe_kernel or SERVED_MOE_KERNELS.get((backend, hw.gpu.architecture))
    out: dict[str, pd.DataFrame] = {}
    for fam in FAMILIES:
        path = table_path(data, system, fam.folder, fam.file, backend)
        if path is None:
            continue
        try:
            raw = pd.read_parquet(path)
            if moe_kernel and fam.name == "moe":
                raw = raw[raw["kernel_source"].str.endswith(moe_kernel)]
            df = fam.prepare(raw)
        except (KeyError, ValueError, AttributeError):
            continue
        if "dtype" in df:
            df = df[df["dtype"].map(hw.supports)]
        if "num_gpus" in df:
            df = df[df["num_gpus"] <= hw.domain_gpus]
        df = df[df["latency"] > 0]
        groups = df.groupby("family") if "family" in df else [(fam.name, df)]
        for name, g in groups:
            if max_rows is not None and len(g) > max_rows:
                g = g.sample(n=max_rows, random_state=seed)
            out[str(name)] = g.assign(family=str(name), op=fam.name).reset_index(drop=True)
    return out


def _profile(system: str) -> str:
    mapped = map_system(system)
    if mapped is None:
        raise ValueError(f"system {system!r}: no gpusim hardware profile")
    return mapped[0]


# ---- errors and the fit ------------------------------------------------------------------------------------
def constants(sw: SoftwareProfile) -> dict[str, float]:
    """The fitted constants' current values in a software profile."""
    return {name: sw.value(name) for name in PARAMS}


def predict(tables: dict[str, pd.DataFrame], hw: Hardware, sw: SoftwareProfile, p: dict) -> dict[str, np.ndarray]:
    """Predicted latency (ms) per family with constants `p`."""
    mc = Machine(hw)
    by_op = {f.name: f for f in FAMILIES}
    return {name: by_op[df["op"].iloc[0]].predict(df, mc, p, sw) * 1e3 for name, df in tables.items()}


def family_errors(tables: dict[str, pd.DataFrame], pred: dict[str, np.ndarray]) -> dict[str, dict]:
    """Per family: rows, MAPE, median APE and the geometric-mean ratio predicted/measured."""
    out = {}
    for name, df in tables.items():
        meas = df["latency"].to_numpy(float)
        ratio = pred[name] / meas
        ape = np.abs(ratio - 1)
        out[name] = {"rows": len(df), "mape": float(ape.mean()), "median_ape": float(np.median(ape)),
                     "geo_ratio": float(np.exp(np.mean(np.log(ratio))))}
    return out


def fit(tables: dict[str, pd.DataFrame], hw: Hardware, sw: SoftwareProfile,
        params: tuple[str, ...] = PARAMS) -> dict[str, float]:
    """Least squares on log(predicted / measured) over `tables`, each family weighted equally; only
    `params` move, the others keep the profile's values. Returns every constant."""
    return fit_pooled([(tables, hw, sw)], params)


def fit_pooled(sets: list[tuple[dict[str, pd.DataFrame], Hardware, SoftwareProfile]],
               params: tuple[str, ...] = PARAMS) -> dict[str, float]:
    """`fit` over several systems at once (one value per constant for all of them): each system's tables
    timed on its own hardware, each family of each system weighted equally. Returns every constant, the
    ones not fitted from the first system's profile."""
    from scipy.optimize import least_squares

    start = constants(sets[0][2])
    lo = np.array([BOUNDS.get(n, (0.02, 1.0))[0] for n in params])
    hi = np.array([BOUNDS.get(n, (0.02, 1.0))[1] for n in params])
    x0 = np.clip(np.array([start[n] for n in params]), lo + 1e-9, hi - 1e-9)

    bases = [constants(sw) for _, _, sw in sets]

    def residuals(x: np.ndarray) -> np.ndarray:
        out = []
        for (tables, hw, sw), base in zip(sets, bases, strict=True):
            pred = predict(tables, hw, sw, {**base, **dict(zip(params, x, strict=True))})
            out += [np.log(pred[n] / df["latency"].to_numpy(float)) / np.sqrt(len(df)) for n, df in tables.items()]
        return np.concatenate(out)

    res = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac")
    return {**start, **dict(zip(params, (float(v) for v in res.x), strict=True))}


def fit_per_family(tables: dict[str, pd.DataFrame], hw: Hardware, sw: SoftwareProfile) -> dict[str, dict]:
    """Each family fitted alone on the constants it depends on: what each op class asks of the profile."""
    out = {}
    for name, df in tables.items():
        one = {name: df}
        params = relevant_constants(one)
        fitted = fit(one, hw, sw, params)
        out[name] = {"fitted": {k: fitted[k] for k in params},
                     **family_errors(one, predict(one, hw, sw, fitted))[name]}
    return out


SATURATION = 4.0
"""A GEMM is compute-bound when its arithmetic intensity is this many times the roofline's ridge point."""


def saturated_gemm_efficiency(gemm: pd.DataFrame, hw: Hardware, m_half: float) -> float | None:
    """eff_max of one GEMM table (one precision): over its compute-bound shapes (`SATURATION`), the median
    of the achieved fraction of the tensor-core peak divided by the shape curve m / (m + m_half). Neither
    the per-kernel time nor the memory roofline enters there, so this is what a prefill-sized GEMM gets;
    a joint fit over all shapes lets small memory-bound shapes pull the efficiency down instead. A
    diagnostic: the profiles keep faster dense GEMMs, as the MLPerf results require (README)."""
    got = _saturated(gemm, hw)
    if got is None:
        return None
    achieved, m, _ = got
    return float(np.median(achieved / (m / (m + m_half))))


def saturated_gemm_rate(gemm: pd.DataFrame, hw: Hardware) -> float | None:
    """The median FLOP/s one GEMM table (one precision) measures over its compute-bound shapes (`SATURATION`)."""
    got = _saturated(gemm, hw)
    return None if got is None else float(np.median(got[0] * got[2]))


def _saturated(gemm: pd.DataFrame, hw: Hardware) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(achieved fraction of the tensor-core peak, m, that peak) of a GEMM table's compute-bound rows, or None."""
    df = gemm[gemm["gemm_dtype"] != "fp8_block"]  # block-scaled FP8 is not gpusim's per-tensor fp8
    if df.empty:
        return None
    m, flops, bytes_ = _gemm_work(df)
    peak = Machine(hw).peak(df["dtype"])
    bound = flops / bytes_ > SATURATION * peak / hw.hbm_bandwidth
    if not bound.any():
        return None
    achieved = flops / (df["latency"].to_numpy(float) * 1e-3) / peak
    return achieved[bound], m[bound], peak[bound]


def saturated_by_architecture(data: Path, systems: tuple[str, ...] = SYSTEMS, max_rows: int | None = 2000,
                              sw: SoftwareProfile | None = None) -> dict[str, dict[str, float]]:
    """`gemm_efficiency_max` / `_fp8` / `_fp4` per GPU architecture: `saturated_gemm_efficiency` per system,
    the median over the architecture's systems."""
    sw = sw or load_software("trtllm")
    values: dict[str, dict[str, list[float]]] = {}
    for system in systems:
        hw = load_hardware(_profile(system))
        m_half = sw.for_architecture(hw.gpu.architecture).gemm_m_half.value
        for name, df in load_tables(data, system, max_rows).items():
            if df["op"].iloc[0] == "gemm":
                eff = saturated_gemm_efficiency(df, hw, m_half)
                if eff is not None:
                    dtype = name.removeprefix("gemm_")
                    values.setdefault(hw.gpu.architecture, {}).setdefault(_GEMM_EFF[dtype], []).append(eff)
    return {arch: {k: round(float(np.median(v)), 3) for k, v in vals.items()} for arch, vals in values.items()}


DECODE_M = 16
"""GEMMs of at most this many rows are decode-sized: their time is weight streaming, not tensor-core math."""


def streaming_rate(gemm: pd.DataFrame) -> float | None:
    """Bytes per second one GEMM table (one precision) streams at decode sizes (m ≤ `DECODE_M`): the slope
    of latency = t0 + bytes / rate, least squares in relative error, so that the precision's own fixed time
    (activation quantisation, scale loads) stays out of the rate. None without two such shapes."""
    df = gemm[(gemm["gemm_dtype"] != "fp8_block") & (gemm["m"] <= DECODE_M)]
    if len(df) < 2:
        return None
    _, _, bytes_ = _gemm_work(df)
    seconds = df["latency"].to_numpy(float) * 1e-3
    design = np.column_stack([np.ones(len(df)), bytes_]) / seconds[:, None]
    (_, per_byte), *_ = np.linalg.lstsq(design, np.ones(len(df)), rcond=None)
    return float(1 / per_byte) if per_byte > 0 else None


def streaming_by_architecture(data: Path, systems: tuple[str, ...] = SYSTEMS, max_rows: int | None = 2000,
                              backend: str = "trtllm") -> dict[str, dict[str, float]]:
    """`hbm_bandwidth_fraction_fp4` per GPU architecture with FP4 tables: the profile's
    `hbm_bandwidth_fraction` times the rate NVFP4 GEMMs stream at over the rate BF16 ones do
    (`streaming_rate`, the median over the architecture's systems), and that ratio."""
    ratios: dict[str, list[float]] = {}
    for system in systems:
        hw = load_hardware(_profile(system))
        tables = load_tables(data, system, max_rows, backend=backend)
        if "gemm_bf16" not in tables or "gemm_fp4" not in tables:
            continue
        bf16, fp4 = streaming_rate(tables["gemm_bf16"]), streaming_rate(tables["gemm_fp4"])
        if bf16 and fp4:
            ratios.setdefault(hw.gpu.architecture, []).append(fp4 / bf16)
    sw = load_software(backend)
    return {arch: {"fp4_over_bf16": round(float(np.median(r)), 3),
                   "hbm_bandwidth_fraction_fp4": round(sw.for_architecture(arch).value("hbm_bandwidth_fraction")
                                                       * float(np.median(r)), 3)}
            for arch, r in ratios.items()}


def calibrate_system(data: Path, system: str, max_rows: int | None = 2000, backend: str = "trtllm",
                     families: tuple[str, ...] = (), moe_kernel: str | None = None) -> dict:
    """Errors with the profile's constants, the fitted constants, and the errors with them, for one system
    and `backend` (its tables, its profile); only the families whose names start with `families` when
    given (the joint fit then moves only the constants they depend on)."""
    hw = load_hardware(_profile(system))
    sw = load_software(backend).for_architecture(hw.gpu.architecture)
    tables = load_tables(data, system, max_rows, backend=backend, moe_kernel=moe_kernel)
    params = PARAMS
    if families:
        tables = {k: v for k, v in tables.items() if k.startswith(families)}
        params = relevant_constants(tables)
    before = family_errors(tables, predict(tables, hw, sw, constants(sw)))
    fitted = fit(tables, hw, sw, params)
    after = family_errors(tables, predict(tables, hw, sw, fitted))
    return {"system": system, "profile": hw.id, "constants": constants(sw), "fitted": {k: fitted[k] for k in params},
            "before": before, "after": after, "per_family": fit_per_family(tables, hw, sw)}


def fit_architecture(sets: list[tuple[str, dict[str, pd.DataFrame], Hardware]],
                     sw: SoftwareProfile) -> tuple[dict[str, float], dict[str, dict]]:
    """One set of the constants the families of `sets` (system, tables, hardware) depend on, fitted to all
    of them at once from `sw` (`fit_pooled`; families without a constant in common fit as if alone), and
    each system's family errors with them."""
    params = tuple(dict.fromkeys(c for _, tables, _ in sets for c in relevant_constants(tables)))
    fitted = {k: v for k, v in fit_pooled([(t, hw, sw) for _, t, hw in sets], params).items() if k in params}
    with_fit = {**constants(sw), **fitted}
    return fitted, {system: family_errors(t, predict(t, hw, sw, with_fit)) for system, t, hw in sets}


def calibrate_architectures(data: Path, systems: tuple[str, ...] = SYSTEMS, max_rows: int | None = 2000,
                            backend: str = "trtllm", families: tuple[str, ...] = (),
                            moe_kernel: str | None = None) -> list[dict]:
    """Per GPU architecture, one set of constants fitted to all of its `systems` at once
    (`fit_architecture`): the values a software profile's per-architecture overrides take. Only the
    families starting with `families` when given, and then only the constants they depend on."""
    by_arch: dict[str, list[tuple[str, dict[str, pd.DataFrame], Hardware]]] = {}
    for system in systems:
        hw = load_hardware(_profile(system))
        tables = load_tables(data, system, max_rows, backend=backend, moe_kernel=moe_kernel)
        if families:
            tables = {k: v for k, v in tables.items() if k.startswith(families)}
        if tables:
            by_arch.setdefault(hw.gpu.architecture, []).append((system, tables, hw))
    out = []
    for arch, sets in by_arch.items():
        sw = load_software(backend).for_architecture(arch)
        fitted, errors = fit_architecture(sets, sw)
        out.append({"architecture": arch, "systems": [s for s, *_ in sets], "constants": constants(sw),
                    "fitted": fitted, "after": errors})
    return out


def format_architecture(r: dict) -> str:
    """One architecture's pooled fit: the constants, and each system's error with them."""
    lines = [f"## {r['architecture']} ({', '.join(r['systems'])}, pooled)",
             "| system | family | rows | MAPE | median APE | pred/meas (geo) |", "|---|---|---|---|---|---|"]
    for system, fams in r["after"].items():
        lines += [f"| {system} | {name} | {e['rows']} | {100 * e['mape']:.0f}% | {100 * e['median_ape']:.0f}% | "
                  f"{e['geo_ratio']:.2f} |" for name, e in fams.items()]
    lines.append("pooled fit: " + ", ".join(f"{k} {r['constants'][k]:.3g} → {v:.3g}" for k, v in r["fitted"].items()))
    return "\n".join(lines)


def format_result(r: dict) -> str:
    """One system's table: per family MAPE before → after the fit, and the constants."""
    lines = [f"## {r['system']} ({r['profile']})", "| family | rows | MAPE | median APE | pred/meas (geo) "
             "| joint-fit MAPE | own-fit MAPE | own-fit constants |", "|---|---|---|---|---|---|---|---|"]
    for name, b in r["before"].items():
        a, own = r["after"][name], r["per_family"][name]
        consts = ", ".join(f"{k} {v:.3g}" for k, v in own["fitted"].items())
        lines.append(f"| {name} | {b['rows']} | {100 * b['mape']:.0f}% | {100 * b['median_ape']:.0f}% | "
                     f"{b['geo_ratio']:.2f} | {100 * a['mape']:.0f}% | {100 * own['mape']:.0f}% | {consts} |")
    lines.append("joint fit: " + ", ".join(f"{k} {r['constants'][k]:.3g} → {v:.3g}" for k, v in r["fitted"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    ap.add_argument("--max-rows", type=int, default=2000, help="rows per family and system (seeded sample)")
    ap.add_argument("--backend", default="trtllm", choices=("trtllm", "vllm", "sglang"),
                    help="whose kernel tables, against whose software profile")
    ap.add_argument("--families", nargs="+", default=[], metavar="PREFIX",
                    help="only these op families (name prefixes, e.g. moe)")
    ap.add_argument("--moe-kernel", metavar="SUFFIX", help="only the MoE rows of this kernel (kernel_source "
                    "suffix, e.g. cutlass) instead of the fastest per shape")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pooled", action="store_true", help="one fit per GPU architecture over all of its systems "
                    "(the profile's per-architecture values) instead of one per system")
    ap.add_argument("--saturated", action="store_true", help="only the compute-bound GEMM efficiencies per "
                    "architecture (saturated_gemm_efficiency)")
    ap.add_argument("--streaming", action="store_true", help="only the NVFP4 weight-streaming rate over BF16's "
                    "at decode sizes and the hbm_bandwidth_fraction_fp4 it gives, per architecture")
    args = ap.parse_args(argv)
    data = aic_data_dir()
    if data is None:
        print("aiconfigurator-core is not installed: pip install 'aiconfigurator-core==0.12.0'")
        return 2
    if args.saturated:
        print(json.dumps(saturated_by_architecture(data, tuple(args.systems), args.max_rows), indent=1))
        return 0
    if args.streaming:
        print(json.dumps(streaming_by_architecture(data, tuple(args.systems), args.max_rows, args.backend), indent=1))
        return 0
    if args.pooled:
        pooled = calibrate_architectures(data, tuple(args.systems), args.max_rows, args.backend, tuple(args.families),
                                         args.moe_kernel)
        print(json.dumps(pooled, indent=1) if args.json else "\n\n".join(map(format_architecture, pooled)))
        return 0
    results = []
    for system in args.systems:  # each system's table as soon as it is fitted (minutes each on 2 cores)
        results.append(calibrate_system(data, system, args.max_rows, args.backend, tuple(args.families),
                                        args.moe_kernel))
        if not args.json:
            print(("\n\n" if len(results) > 1 else "") + format_result(results[-1]), flush=True)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
