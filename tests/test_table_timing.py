"""The `table` timing backend: interpolation of measured tables and the step model built on them.

The tables here are synthetic, written by the tests in AIC's layout, with latencies from known formulas,
so every expectation is computed from the formula, never from the code under test."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpusim.build import cost_model
from gpusim.errors import InputError
from gpusim.perf.kernel_tables import KernelTables, LogGrid, table_backend, table_system
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.perf.table_step import table_step_model
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import load_software

GEMM_S = 1e-12
"""Synthetic GEMM: seconds = GEMM_S · m · n · k."""
KV_S = 1e-9
"""Synthetic decode attention: seconds = KV_S · batch · (1 + step) · heads."""


def _grid_frame(**axes: list[int]) -> pd.DataFrame:
    return pd.DataFrame(list(itertools.product(*axes.values())), columns=list(axes))


def test_log_grid_is_exact_for_power_laws_inside_and_extends_them_above() -> None:
    df = _grid_frame(m=[1, 4, 16, 64], n=[128, 1024])
    df["latency"] = 1e-3 * df["m"] ** 0.5 * df["n"]  # ms
    grid = LogGrid(df, ("m", "n"))
    assert grid(8, 300) == pytest.approx(1e-6 * 8**0.5 * 300)
    assert grid(256, 1024) == pytest.approx(1e-6 * 16 * 1024)  # last segment's slope extended
    assert grid(0.25, 128) == pytest.approx(1e-6 * 128)  # below the grid the smallest shape holds


def test_log_grid_skips_missing_points_and_never_extrapolates_below_the_edge() -> None:
    df = _grid_frame(m=[1, 2, 4], n=[1, 2])
    df["latency"] = 1.0 * df["m"] * df["n"]
    grid = LogGrid(df[~((df["m"] == 4) & (df["n"] == 2))], ("m", "n"))
    assert grid(3, 1) == pytest.approx(3e-3)  # the n = 2 corners carry no weight at n = 1
    falling = pd.DataFrame({"m": [1, 2, 4], "latency": [3.0, 2.0, 1.0]})
    assert LogGrid(falling, ("m",))(16) == pytest.approx(1e-3)


def test_table_names_follow_the_rule() -> None:
    assert table_system("gb300-nvl72") == "gb300"
    assert table_system("h100-hgx") == "h100_sxm"
    assert table_backend("trtllm-v5.1") == "trtllm"


def test_moe_tables_match_the_expert_shape_and_prefer_the_compute_precision(tmp_path: Path) -> None:
    rows = _grid_frame(num_tokens=[1, 64, 4096], moe_dtype=["nvfp4", "w4a8_mxfp4_mxfp8", "fp8_block"])
    rows = rows.assign(hidden_size=2880, inter_size=2880, topk=4, num_experts=128, moe_tp_size=1, moe_ep_size=1,
                       distribution="balanced", kernel_source="synthetic",
                       latency=rows["num_tokens"] * rows["moe_dtype"].map({"nvfp4": 1.0, "w4a8_mxfp4_mxfp8": 2.0,
                                                                          "fp8_block": 4.0}))
    _write(tmp_path, "moe", "moe_perf.parquet", rows)
    tables = KernelTables(tmp_path, "h100_sxm", "trtllm")
    shape = (2880, 2880, 4, 128, 1, 1)
    assert tables.moe("fp4", "fp8", *shape)(64) == pytest.approx(2.0 * 64e-3)  # MXFP4 x MXFP8
    assert tables.moe("fp4", "bf16", *shape)(64) == pytest.approx(64e-3)  # no W4A16 kernel: the 4-bit one
    assert tables.moe("fp8", "fp8", *shape) is None  # block-scaled FP8 is not gpusim's fp8
    assert tables.moe("fp4", "fp4", 2880, 2880, 4, 128, 2, 1) is None  # no table for that split


def _write(root: Path, family: str, file: str, df: pd.DataFrame) -> None:
    path = root / "h100_sxm" / family / "trtllm" / "1.3.0rc20" / file
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path)


@pytest.fixture
def tables(tmp_path: Path) -> KernelTables:
    """bf16 GEMMs and bf16 generation attention for Llama 3.1 8B at TP1 (8 KV heads of 128)."""
    sizes = [256, 1024, 4096, 16384, 65536, 131072]
    gemm = _grid_frame(m=[1, 8, 64, 512, 4096, 32768], n=sizes, k=sizes)
    gemm = gemm.assign(gemm_dtype="bfloat16", kernel_source="synthetic",
                       latency=GEMM_S * gemm["m"] * gemm["n"] * gemm["k"] * 1e3)
    _write(tmp_path, "gemm", "gemm_perf.parquet", gemm)
    gen = _grid_frame(batch_size=[1, 16, 256], step=[15, 255, 4095, 65535], num_heads=[8, 32])
    gen = gen.assign(isl=1, num_key_value_heads=8, head_dim=128, window_size=0, attn_dtype="bfloat16",
                     kv_cache_dtype="bfloat16", kernel_source="synthetic",
                     latency=KV_S * gen["batch_size"] * (1 + gen["step"]) * gen["num_heads"] * 1e3)
    _write(tmp_path, "attention", "generation_attention_perf.parquet", gen)
    return KernelTables(tmp_path, "h100_sxm", "trtllm")


def _llama(tables: KernelTables) -> tuple[StepCostModel, StepCostModel]:
    hw, model = load_hardware("h100-hgx"), load_model("llama3.1-8b")
    dep = Deployment(name="t", tp=1, weights="bf16", activations="bf16", kv_cache="bf16")
    return table_step_model(hw, model, dep, tables), StepCostModel(hw, model, dep)


def test_gemms_and_decode_attention_come_from_the_tables(tables: KernelTables) -> None:
    table, roofline = _llama(tables)
    model = table.model
    seqs, context = 32, 32 * 2048.0
    b = BatchShape(decode_seqs=seqs, decode_context=context)
    ops = table.breakdown(b).by_op
    h, layers = model.hidden_size, model.num_layers
    qkv = (model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim
    assert ops["qkv_proj"] == pytest.approx(layers * GEMM_S * seqs * qkv * h)
    ffn = layers * GEMM_S * seqs * 3 * model.intermediate_size * h  # gate/up (2i × h) and down (h × i)
    assert ops["ffn"] == pytest.approx(ffn)
    assert ops["lm_head"] == pytest.approx(GEMM_S * seqs * model.vocab_size * h)
    want = layers * KV_S * model.num_attention_heads * context  # per KV token: KV_S · heads, per layer
    assert ops["attention_decode"] == pytest.approx(want, rel=0.02)
    fitted = load_software("trtllm").table_timing  # the overheads fitted with table kernel times
    want = fitted["step_overhead_us"].value + fitted["layer_overhead_us"].value * layers
    assert ops["step_overhead"] == pytest.approx(want * 1e-6)
    # no prompt-attention table: that op stays the roofline's, and the sources say so
    assert table.timer.sources["attention_prefill"] == "roofline" and table.timer.sources["qkv_proj"] == "table"
    p = BatchShape(prefill_tokens=512, prefill_attn_pairs=512 * 513 / 2, prefill_seqs=1)
    prefill = roofline.breakdown(p).by_op["attention_prefill"]
    assert table.breakdown(p).by_op["attention_prefill"] == pytest.approx(prefill)


def test_decode_step_time_grows_smoothly_with_context(tables: KernelTables) -> None:
    """Rates between the 1/16-octave lookup points are interpolated: one more token of context never
    makes a decode step shorter (the engine's decode spans rely on it)."""
    table, _ = _llama(tables)
    times = [table.step_time(BatchShape(decode_seqs=16, decode_context=16 * c)) for c in np.arange(1000, 1200)]
    assert np.all(np.diff(times) >= 0)


def test_table_timing_without_tables_is_a_clear_input_error() -> None:
    hw, model = load_hardware("vr-nvl72"), load_model("llama3.1-8b")
    dep = Deployment(name="t", tp=1, weights="fp8", activations="fp8", kv_cache="fp8")
    with pytest.raises(InputError) as err:
        cost_model(hw, model, dep, "table", "exp.yaml")
    assert err.value.field == "timing" and "valid: roofline" in err.value.message
