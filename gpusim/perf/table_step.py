"""The `table` timing backend: kernel times looked up in NVIDIA's measured tables at run time.

`TableTimer` is a `KernelTimer` (timer.py) that times each kernel the tables measured by interpolating them
(`kernel_tables.LogGrid`) and every other one by the `RooflineTimer` it holds; `table_step_model` composes it
into a `StepCostModel`:

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
from functools import partial

from gpusim.perf.kernel_tables import KernelTables, LogGrid
from gpusim.perf.ops import CommOp, GemmOp, MoEOp, ceil_div
from gpusim.perf.step import StepCostModel
from gpusim.perf.timer import AttentionFixed, OpTime, RooflineTimer, TimingContext
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import SoftwareProfile, load_software

MLA_SHAPE = (128, 64, 128, 512)
"""(qk_nope, qk_rope, v, kv_lora) head dimensions of the MLA tables (DeepSeek-V3's)."""
_BINS = 16
"""Attention rates are looked up at 1/16-octave points of prompt length or context, and interpolated
linearly between them (continuous in the length, so a decode span's step times stay smooth)."""


def table_step_model(hardware: Hardware, model: ModelSpec, deployment: Deployment, tables: KernelTables,
                     software: SoftwareProfile | None = None) -> StepCostModel:
    """The step cost model timed by `tables` (with the profile's `table_timing` overheads)."""
    sw = software if software is not None else load_software(deployment.software)
    return StepCostModel(hardware, model, deployment, sw.for_timing("table"), timer=partial(TableTimer, tables=tables))


class TableTimer:
    """Measured kernel times where `tables` hold the kernel, the roofline's elsewhere (module docstring)."""

    def __init__(self, ctx: TimingContext, tables: KernelTables) -> None:
        self.ctx, self.tables = ctx, tables
        self.roofline = RooflineTimer(ctx)
        ops = ctx.ops
        self._gemm = {op.name: tables.gemm(op.dtype) for op in (*ops.token_ops, ops.lm_head)
                      if isinstance(op, GemmOp) and op.shapes}
        self._moe = {op.name: self._moe_grid(op) for op in ops.token_ops if isinstance(op, MoEOp)}
        self._allreduce = {c.name: tables.allreduce(c.group) for c in ops.comm_ops
                           if c.kind == "allreduce" and c.group <= ctx.hardware.domain_gpus}
        self._context, self._generation = self._attention_grids()
        self.sources = {name: "table" if grid is not None else "roofline"
                        for name, grid in (*self._gemm.items(), *self._moe.items(), *self._allreduce.items(),
                                           ("attention_prefill", self._context),
                                           ("attention_decode", self._generation))}
        """Per op: `table` (measured times) or `roofline` (no table holds that kernel)."""
        self._lookups: dict[tuple, float] = {}
        self._heads = ceil_div(ctx.model.num_attention_heads, ctx.deployment.attention_tp)
        """Query heads on one GPU."""
        self._dp = ops.attention.dp
        self._verify = 1 + (ctx.deployment.mtp.depth if ctx.deployment.mtp else 0)
        self._pair_fallback = self.roofline.saturated_pair_s
        self._kv_fallback = self.roofline.decode_attention(1, 1.0)
        # a measured kernel time holds its fixed cost: only linear-attention layers (no table) keep theirs
        rf, linear, sw = self.roofline.attention_fixed(), ops.attention.linear_layers, ctx.software
        self._fixed = AttentionFixed(
            prefill_launch=rf.prefill_launch if self._context is None
            else linear * sw.value("attention_prefill_kernel_us") * 1e-6,
            decode_launch=rf.decode_launch if self._generation is None
            else linear * sw.value("attention_kernel_us") * 1e-6,
            linear_token_s=rf.linear_token_s, linear_seq_s=rf.linear_seq_s, decode_bound=rf.decode_bound)

    # ---- which tables ---------------------------------------------------------------------------------
    def _moe_grid(self, op: MoEOp) -> LogGrid | None:
        model, dep = self.ctx.model, self.ctx.deployment
        moe = model.moe
        assert moe is not None
        return self.tables.moe(dep.weights, op.dtype, model.hidden_size, moe.expert_intermediate_size,
                               moe.top_k, moe.num_experts, dep.tp // dep.ep, dep.ep)

    def _attention_grids(self) -> tuple[LogGrid | None, LogGrid | None]:
        model, dep, a = self.ctx.model, self.ctx.deployment, self.ctx.ops.attention
        if model.mla is not None:
            m = model.mla
            if (m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank) != MLA_SHAPE:
                return None, None
            return self.tables.mla("context", dep.kv_cache), self.tables.mla("generation", dep.kv_cache)
        kv_heads = ceil_div(model.num_kv_heads, dep.attention_tp)
        return tuple(self.tables.attention(phase, kv_heads, model.head_dim, a.dtype, dep.kv_cache)
                     for phase in ("context", "generation"))

    # ---- GEMMs and collectives ----------------------------------------------------------------------------
    @staticmethod
    def _measured(roofline: OpTime, measured: float) -> OpTime:
        """The measured time (its kernels' fixed cost included), else the roofline's."""
        return roofline if math.isnan(measured) else OpTime(measured, roofline.bound, 0.0)

    def gemm(self, op: GemmOp, t: int) -> OpTime:
        timed = self.roofline.gemm(op, t)
        if self._gemm.get(op.name) is None:
            return timed
        return self._measured(timed, op.count * self._gemm_seconds(op, op.tokens(t)))

    def moe(self, op: MoEOp, t: int) -> OpTime:
        timed = self.roofline.moe(op, t)
        grid = self._moe.get(op.name)
        if grid is None:
            return timed
        return self._measured(timed, op.count * grid(t * (op.imbalance if op.ep > 1 else 1.0)))

    def allreduce(self, op: CommOp, t: int) -> OpTime:
        timed = self.roofline.allreduce(op, t)
        grid = self._allreduce.get(op.name)
        if grid is None:
            return timed
        return self._measured(timed, op.count * grid(ceil_div(t, op.split) * op.bytes_per_token / 2))

    def alltoall(self, op: CommOp, t: int) -> OpTime:
        return self.roofline.alltoall(op, t)

    def p2p(self, op: CommOp, t: int) -> OpTime:
        return self.roofline.p2p(op, t)

    def _gemm_seconds(self, op: GemmOp, m: int) -> float:
        grid = self._gemm[op.name]
        assert grid is not None
        return sum(grid(m, n, k) for n, k in op.shapes)

    def lm_head(self, rows: int) -> OpTime:
        timed = self.roofline.lm_head(rows)
        if self._gemm.get("lm_head") is None:
            return timed
        measured = self._gemm_seconds(self.ctx.ops.lm_head, self.ctx.ops.lm_head.tokens(rows))
        if math.isnan(measured):  # the roofline's, its launch time folded in
            return OpTime(timed.seconds + timed.launch, timed.bound, 0.0)
        return OpTime(measured, timed.bound, 0.0)

    # ---- attention --------------------------------------------------------------------------------------
    def attention_fixed(self) -> AttentionFixed:
        return self._fixed

    def prefill_attention(self, seqs: int, tokens: int, pairs: float) -> float:
        """Per causal pair and layer: the table's time for the busiest rank's sequences at the prompt length
        whose causal pairs equal theirs, over those pairs."""
        if self._context is None:
            return self.roofline.prefill_attention(seqs, tokens, pairs)
        s = max(math.sqrt(2 * pairs / seqs), 1.0)
        return self._lookup("prefill", ceil_div(seqs, self._dp), s, self._context, self._pair_fallback)

    def decode_attention(self, seqs: int, context: float) -> float:
        """Per KV token and layer: the table's time for `seqs` sequences (each verifying 1 + MTP depth
        queries) at mean `context`, over their KV tokens."""
        if self._generation is None:
            return self._kv_fallback
        return self._lookup("decode", seqs * self._verify, max(context, 1.0), self._generation, self._kv_fallback)

    def _lookup(self, phase: str, seqs: int, length: float, grid: LogGrid, fallback: float) -> float:
        """Seconds per unit of work (`work(seqs, length)`) from `grid`, between its 1/16-octave points."""
        x = _BINS * math.log2(length)
        i = math.floor(x)
        lo, hi = (self._rate(phase, seqs, j, grid, fallback) for j in (i, i + 1))
        return lo + (hi - lo) * (x - i)

    def _rate(self, phase: str, seqs: int, point: int, grid: LogGrid, fallback: float) -> float:
        key = (phase, seqs, point)
        value = self._lookups.get(key)
        if value is None:
            length = 2 ** (point / _BINS)
            measured = grid(seqs, length, self._heads)
            work = seqs * length * (length + 1) / 2 if phase == "prefill" else seqs * length
            value = fallback if math.isnan(measured) else measured / work
            self._lookups[key] = value
        return value


__all__ = ["TableTimer", "table_step_model"]
