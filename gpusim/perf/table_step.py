"""The `table` timing backend: kernel times looked up in NVIDIA's measured tables at run time.

`TableStepCostModel` is `StepCostModel` with each kernel the tables measured timed by interpolating them
(`kernel_tables.LogGrid`) instead of by the roofline with the profile's efficiencies:

- dense GEMMs (attention projections, FFNs, shared experts, router, LM head) by (m, n, k, precision);
- routed experts by the step's tokens, for the model's exact expert shape and TP/EP split (the busiest
  EP rank's tokens: T · imbalance);
- prompt attention per causal pair at the batch's sequences and the prompt length s with
  s(s+1)/2 = its pairs per sequence; decode attention per KV token at the busiest rank's sequences
  (times 1 + MTP depth: each verified token is a query) and their mean context; MHA/GQA for the
  model's KV heads and head size on one GPU, and DeepSeek-shaped MLA;
- all-reduce inside one NVLink domain by message size.

A measured time includes the kernel's launch and fixed cost, so those ops carry no per-kernel constant.
Everything else keeps gpusim's model: memory-bound kernels without a table (embedding), all-to-all,
scale-out collectives, linear attention and MTP drafting's structure. The serving overheads (step,
layer, host, request and handoff constants) are the software profile's `table_timing` ones, fitted with
these kernel times (`gpusim calibrate --timing table`): the roofline's own overheads partly stand for
kernel fixed times that the tables already hold. `sources` says which ops came from tables. A shape no
measured corner surrounds falls back to the roofline for that call.
"""

from __future__ import annotations

import math

from gpusim.perf.kernel_tables import KernelTables, LogGrid
from gpusim.perf.ops import CommOp, GemmOp, MoEOp, ceil_div
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import SoftwareProfile, load_software

MLA_SHAPE = (128, 64, 128, 512)
"""(qk_nope, qk_rope, v, kv_lora) head dimensions of the MLA tables (DeepSeek-V3's)."""
_BINS = 16
"""Attention rates are looked up at 1/16-octave points of prompt length or context, and interpolated
linearly between them (continuous in the length, so a decode span's step times stay smooth)."""


class TableStepCostModel(StepCostModel):
    """Seconds per step with measured kernel times where `tables` hold the kernel (module docstring)."""

    def __init__(self, hardware: Hardware, model: ModelSpec, deployment: Deployment, tables: KernelTables,
                 software: SoftwareProfile | None = None) -> None:
        sw = software if software is not None else load_software(deployment.software)
        super().__init__(hardware, model, deployment, sw.for_timing("table"))
        self.tables = tables
        self._gemm = {op.name: tables.gemm(op.dtype) for op in (*self.ops.token_ops, self.ops.lm_head)
                      if isinstance(op, GemmOp) and op.shapes}
        self._moe = {op.name: self._moe_grid(op) for op in self.ops.token_ops if isinstance(op, MoEOp)}
        self._allreduce = {c.name: tables.allreduce(c.group) for c in self.ops.comm_ops
                           if c.kind == "allreduce" and c.group <= hardware.domain_gpus}
        self._context, self._generation = self._attention_grids()
        self.sources = {name: "table" if grid is not None else "roofline"
                        for name, grid in (*self._gemm.items(), *self._moe.items(), *self._allreduce.items(),
                                           ("attention_prefill", self._context),
                                           ("attention_decode", self._generation))}
        """Per op: `table` (measured times) or `roofline` (no table holds that kernel)."""
        self._lookups: dict[tuple, float] = {}
        self._lm_rows: dict[int, tuple[float, str]] = {}
        if self._context is not None:
            self._pair_table = self._pair_seconds
        if self._generation is not None:
            self._kv_table = self._kv_seconds
        # a measured kernel time holds its fixed cost: only linear-attention layers (no table) keep theirs
        linear = self.ops.attention.linear_layers
        if self._context is not None:
            self._prefill_attn_launch = linear * self.software.value("attention_prefill_kernel_us") * 1e-6
        if self._generation is not None:
            self._attn_launch = linear * self.software.value("attention_kernel_us") * 1e-6
        self._lm_roofline_launch = self._lm_launch
        if self._gemm.get("lm_head") is not None:
            self._lm_launch = 0.0

    # ---- which tables ---------------------------------------------------------------------------------
    def _moe_grid(self, op: MoEOp) -> LogGrid | None:
        moe, dep = self.model.moe, self.deployment
        assert moe is not None
        return self.tables.moe(dep.weights, op.dtype, self.model.hidden_size, moe.expert_intermediate_size,
                               moe.top_k, moe.num_experts, dep.tp // dep.ep, dep.ep)

    def _attention_grids(self) -> tuple[LogGrid | None, LogGrid | None]:
        model, dep, a = self.model, self.deployment, self.ops.attention
        if model.mla is not None:
            m = model.mla
            if (m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank) != MLA_SHAPE:
                return None, None
            return self.tables.mla("context", dep.kv_cache), self.tables.mla("generation", dep.kv_cache)
        kv_heads = ceil_div(model.num_kv_heads, 1 if dep.attention_dp else dep.tp)
        return tuple(self.tables.attention(phase, kv_heads, model.head_dim, a.dtype, dep.kv_cache)
                     for phase in ("context", "generation"))

    @property
    def _heads(self) -> int:
        """Query heads on one GPU."""
        return ceil_div(self.model.num_attention_heads, 1 if self.deployment.attention_dp else self.deployment.tp)

    # ---- the lookups ------------------------------------------------------------------------------------
    def _op_item(self, op: GemmOp | MoEOp | CommOp, n: int) -> tuple[str, float, str, float]:
        name, sec, bound, launch = super()._op_item(op, n)
        measured = self._measured(op, n)
        return (name, sec, bound, launch) if math.isnan(measured) else (name, measured, bound, 0.0)

    def _measured(self, op: GemmOp | MoEOp | CommOp, t: int) -> float:
        """Seconds of `op` in a step of `t` tokens from its table; NaN without one."""
        if isinstance(op, GemmOp) and self._gemm.get(op.name) is not None:
            return op.count * self._gemm_seconds(op, op.tokens(t))
        if isinstance(op, MoEOp) and self._moe.get(op.name) is not None:
            return op.count * self._moe[op.name](t * (op.imbalance if op.ep > 1 else 1.0))
        if isinstance(op, CommOp) and self._allreduce.get(op.name) is not None:
            return op.count * self._allreduce[op.name](ceil_div(t, op.split) * op.bytes_per_token / 2)
        return math.nan

    def _gemm_seconds(self, op: GemmOp, m: int) -> float:
        grid = self._gemm[op.name]
        assert grid is not None
        return sum(grid(m, n, k) for n, k in op.shapes)

    def _lm_head(self, rows: int) -> tuple[float, str]:
        cached = self._lm_rows.get(rows)
        if cached is None:
            sec, bound = super()._lm_head(rows)
            cached = (sec, bound)  # without a table the step adds the roofline's launch time
            if self._gemm.get("lm_head") is not None:
                measured = self._gemm_seconds(self.ops.lm_head, rows)
                cached = (sec + self._lm_roofline_launch, bound) if math.isnan(measured) else (measured, bound)
            self._lm_rows[rows] = cached
        return cached

    def _pair_seconds(self, b: BatchShape) -> float:
        """Per causal pair and layer: the table's time for the busiest rank's sequences at the prompt length
        whose causal pairs equal theirs, over those pairs."""
        seqs = ceil_div(b.prefill_seqs or 1, self._dp)
        s = max(math.sqrt(2 * b.prefill_attn_pairs / (b.prefill_seqs or 1)), 1.0)
        return self._lookup("prefill", seqs, s, self._context, self._pair_s)

    def _kv_seconds(self, seqs: int, context: float) -> float:
        """Per KV token and layer: the table's time for `seqs` sequences (each verifying 1 + MTP depth
        queries) at mean `context`, over their KV tokens."""
        return self._lookup("decode", seqs * self._verify, max(context, 1.0), self._generation, self._kv_s)

    def _lookup(self, phase: str, seqs: int, length: float, grid: LogGrid | None, fallback: float) -> float:
        """Seconds per unit of work (`work(seqs, length)`) from `grid`, between its 1/16-octave points."""
        x = _BINS * math.log2(length)
        i = math.floor(x)
        lo, hi = (self._rate(phase, seqs, j, grid, fallback) for j in (i, i + 1))
        return lo + (hi - lo) * (x - i)

    def _rate(self, phase: str, seqs: int, point: int, grid: LogGrid | None, fallback: float) -> float:
        key = (phase, seqs, point)
        value = self._lookups.get(key)
        if value is None:
            assert grid is not None
            length = 2 ** (point / _BINS)
            measured = grid(seqs, length, self._heads)
            work = seqs * length * (length + 1) / 2 if phase == "prefill" else seqs * length
            value = fallback if math.isnan(measured) else measured / work
            self._lookups[key] = value
        return value


__all__ = ["TableStepCostModel"]
