"""NVIDIA's measured kernel tables (PyPI `aiconfigurator-core==0.12.0`, Apache-2.0), read by path.

The package ships per system, op family, backend and version a parquet of measured kernel latencies
(`aiconfigurator_core/systems/data/<system>/<family>/<backend>/<version>/*_perf.parquet`). They are read
here with pandas/pyarrow, never through AIC's API, for two users: `gpusim.calibrate.kernels` (op-level
error and fitted constants) and the `table` timing backend (`gpusim.perf.table_step`), which looks kernel
times up at run time. Both need the optional extra: `pip install 'gpusim[calibration]'`.

`LogGrid` interpolates one table: log latency, multilinear in the log of each shape coordinate over the
measured grid; below the grid the smallest shape's time holds (a kernel does not get faster than its
floor), above it the last segment's log-log slope extends it (work ∝ m for a compute-bound GEMM, ∝ s²
for prompt attention), never below the grid's edge value.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

CURRENT_TRTLLM = "1.3.0rc20"
"""AIC 0.12.0's `current` trtllm slot (systems/query_versions.yaml); other versions back-fill."""


def aic_data_dir() -> Path | None:
    """`aiconfigurator_core/systems/data` of the installed package, or None without the extra."""
    try:
        import aiconfigurator_core
    except ImportError:
        return None
    path = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return path if path.is_dir() else None


def table_path(data: Path, system: str, family: str, file: str, backend: str = "trtllm") -> Path | None:
    """The parquet of the current version if present, else of the newest version that has it."""
    versions = sorted((data / system / family / backend).glob(f"*/{file}"),
                      key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.parent.name)])
    current = [p for p in versions if p.parent.name == CURRENT_TRTLLM]
    return (current or versions[-1:] or [None])[0]


def table_system(hardware_id: str) -> str:
    """The tables' name for a gpusim system, by rule: rack-scale Grace systems keep the GPU name
    (gb300-nvl72 → gb300), HGX boards add `_sxm` (h100-hgx → h100_sxm)."""
    gpu, _, kind = hardware_id.partition("-")
    return gpu if kind.startswith("nvl") else f"{gpu}_sxm"


def table_backend(software: str) -> str:
    """The tables' backend for a software profile (trtllm-v5.1 → trtllm)."""
    return software.split("-", 1)[0]


@lru_cache(maxsize=64)
def read_table(path: Path) -> pd.DataFrame:
    """One parquet, read once per process."""
    return pd.read_parquet(path)


class LogGrid:
    """Latency (seconds) over a grid of shape coordinates, interpolated in log-log space (module docstring).
    Grid points the table lacks are skipped and the remaining corners re-weighted."""

    def __init__(self, df: pd.DataFrame, axes: tuple[str, ...], latency: str = "latency", scale: float = 1e-3) -> None:
        g = df.groupby(list(axes))[latency].min()  # the fastest kernel measured for each shape
        g = g[g > 0]
        self.axes = axes
        self._logx = [np.log(np.unique(g.index.get_level_values(a).to_numpy(float))) for a in axes]
        self._logv = np.full([len(x) for x in self._logx], np.nan)
        idx = tuple(np.searchsorted(lx, np.log(g.index.get_level_values(a).to_numpy(float)))
                    for lx, a in zip(self._logx, axes, strict=True))
        self._logv[idx] = np.log(g.to_numpy(float) * scale)

    def __call__(self, *x: float) -> float:
        """Seconds at shape `x` (one value per axis); NaN where no measured corner surrounds it."""
        sides = [self._bracket(lx, np.log(max(v, 1e-12))) for lx, v in zip(self._logx, x, strict=True)]
        value = self._blend(sides)
        if any(t > 1.0 for _, _, t in sides):  # extrapolated: never below the edge of the grid
            edge = self._blend([(lo, hi, min(t, 1.0)) for lo, hi, t in sides])
            value = max(value, edge)
        return float(np.exp(value))

    @staticmethod
    def _bracket(lx: np.ndarray, v: float) -> tuple[int, int, float]:
        if len(lx) == 1:
            return 0, 0, 0.0
        i = int(np.clip(np.searchsorted(lx, v), 1, len(lx) - 1))
        return i - 1, i, max((v - lx[i - 1]) / (lx[i] - lx[i - 1]), 0.0)

    def _blend(self, sides: list[tuple[int, int, float]]) -> float:
        total = weight = 0.0
        for corner in itertools.product((0, 1), repeat=len(sides)):
            w, at = 1.0, []
            for (lo, hi, t), c in zip(sides, corner, strict=True):
                w *= t if c else 1.0 - t
                at.append(hi if c else lo)
            v = self._logv[tuple(at)]
            if w != 0.0 and not np.isnan(v):
                total += w * v
                weight += w
        return total / weight if weight > 0.5 else np.nan


GEMM_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}
"""Table GEMM precision → gpusim precision. Block-scaled FP8 (`fp8_block`, 128x128 scales) is not a
gpusim precision: gpusim's `fp8` is per-tensor FP8."""
MOE_PRECISIONS = {"bfloat16": ("bf16", "bf16"), "fp8": ("fp8", "fp8"), "nvfp4": ("fp4", "fp4"),
                  "w4a8_mxfp4_mxfp8": ("fp4", "fp8"), "w4a16_mxfp4": ("fp4", "bf16")}
"""Table MoE quantisation → (weight, compute) precision; MXFP4 weights count as 4-bit weights."""
ATTENTION_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}


class KernelTables:
    """One system's measured tables for one backend, as `LogGrid`s keyed by what selects a kernel.
    Each accessor returns None where the tables hold no kernel of that kind (the caller keeps gpusim's
    roofline for it)."""

    def __init__(self, data: Path, system: str, backend: str) -> None:
        self.data, self.system, self.backend = data, system, backend
        self._grids: dict[tuple, LogGrid | None] = {}

    def _table(self, family: str, file: str) -> pd.DataFrame | None:
        path = table_path(self.data, self.system, family, file, self.backend)
        return None if path is None else read_table(path)

    def _grid(self, key: tuple, build) -> LogGrid | None:
        if key not in self._grids:
            df = build()
            self._grids[key] = None if df is None or df.empty else LogGrid(df, key[-1])
        return self._grids[key]

    def gemm(self, dtype: str) -> LogGrid | None:
        """Dense GEMM of `dtype` over (m, n, k)."""
        def rows() -> pd.DataFrame | None:
            df = self._table("gemm", "gemm_perf.parquet")
            return None if df is None else df[df["gemm_dtype"].map(GEMM_DTYPES) == dtype]
        return self._grid(("gemm", dtype, ("m", "n", "k")), rows)

    def attention(self, phase: str, kv_heads: int, head_dim: int, dtype: str, kv_dtype: str) -> LogGrid | None:
        """MHA/GQA attention of one layer over (batch, prompt length or KV position, query heads), for
        `kv_heads` KV heads of `head_dim` on one GPU, without a sliding window."""
        def rows() -> pd.DataFrame | None:
            df = self._table("attention", f"{phase}_attention_perf.parquet")
            if df is None:
                return None
            keep = ((df["num_key_value_heads"] == kv_heads) & (df["head_dim"] == head_dim) & (df["window_size"] == 0)
                    & (df["kv_cache_dtype"].map(ATTENTION_DTYPES) == kv_dtype))
            if phase == "context":  # generation kernels are measured with bf16 queries only
                keep &= df["attn_dtype"].map(ATTENTION_DTYPES) == dtype
            return df[keep]
        where = "isl" if phase == "context" else "step"
        return self._grid(("attention", phase, kv_heads, head_dim, dtype, kv_dtype,
                           ("batch_size", where, "num_heads")), rows)

    def mla(self, phase: str, kv_dtype: str) -> LogGrid | None:
        """DeepSeek-shaped MLA of one layer over (batch, prompt length or KV position, heads on one GPU)."""
        def rows() -> pd.DataFrame | None:
            df = self._table("mla", f"{phase}_mla_perf.parquet")
            return None if df is None else df[df["kv_cache_dtype"].map(ATTENTION_DTYPES) == kv_dtype]
        where = "isl" if phase == "context" else "step"
        return self._grid(("mla", phase, kv_dtype, ("batch_size", where, "num_heads")), rows)

    def moe(self, weights: str, compute: str, hidden: int, inter: int, top_k: int, experts: int, moe_tp: int,
            moe_ep: int) -> LogGrid | None:
        """Routed experts of one MoE layer on one rank over the step's tokens, for this exact expert shape
        and split, balanced routing, gated experts: the kernels for `weights` at the `compute` precision,
        else those the engine runs for such weights (4-bit experts run NVFP4 activations in TRT-LLM)."""
        def rows() -> pd.DataFrame | None:
            df = self._table("moe", "moe_perf.parquet")
            if df is None:
                return None
            keep = ((df["distribution"] == "balanced") & ~df["kernel_source"].str.endswith("nongated")
                    & (df["hidden_size"] == hidden) & (df["inter_size"] == inter) & (df["topk"] == top_k)
                    & (df["num_experts"] == experts) & (df["moe_tp_size"] == moe_tp) & (df["moe_ep_size"] == moe_ep))
            df = df[keep]
            precision = [MOE_PRECISIONS.get(d) for d in df["moe_dtype"]]
            same = np.array([p == (weights, compute) for p in precision], dtype=bool)
            return df[same] if same.any() else df[np.array([p is not None and p[0] == weights for p in precision],
                                                           dtype=bool)]
        return self._grid(("moe", weights, compute, hidden, inter, top_k, experts, moe_tp, moe_ep,
                           ("num_tokens",)), rows)

    def allreduce(self, gpus: int) -> LogGrid | None:
        """bf16 all-reduce over `gpus` GPUs of one NVLink domain, by message size in elements."""
        def rows() -> pd.DataFrame | None:
            df = self._table("comm", "custom_allreduce_perf.parquet")
            return None if df is None else df[df["num_gpus"] == gpus]
        return self._grid(("allreduce", gpus, ("message_size",)), rows)


@lru_cache(maxsize=16)
def kernel_tables(hardware_id: str, software: str) -> KernelTables | None:
    """The tables for a gpusim system and software profile; None without the extra or for a system or
    backend the package has not measured (e.g. Rubin)."""
    data = aic_data_dir()
    if data is None:
        return None
    system, backend = table_system(hardware_id), table_backend(software)
    if not (data / system / "gemm" / backend).is_dir():
        return None
    return KernelTables(data, system, backend)
