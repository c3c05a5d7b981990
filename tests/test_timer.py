"""The timing seam (gpusim/perf/timer.py): a new timing source is a `KernelTimer` alone.

A toy timer gives every op the same time and every attention unit a fixed rate; the step time the step
model composes from it is worked out by hand from the op list of docs/design.md (Formulas): which ops a
layer runs, which collectives a layout needs, how attention DP splits the sequences.
"""

from __future__ import annotations

import pytest
from test_perf import LAYERS, dense_model, hardware, moe_model, software

from gpusim.perf.ops import CommOp, GemmOp, MoEOp
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.perf.timer import AttentionFixed, OpTime, TimingContext
from gpusim.specs.deployment import Deployment

OP_S, PAIR_S, KV_S = 1e-3, 1e-9, 2e-9
PREFILL_FIXED, DECODE_FIXED = 5e-6, 7e-6


class ConstantTimer:
    """Every op OP_S seconds, whatever its size; attention at PAIR_S per causal pair and KV_S per KV token
    and layer. Records what it was asked."""

    def __init__(self, ctx: TimingContext) -> None:
        self.ctx = ctx
        self.calls: list[tuple] = []

    def _op(self, kind: str, op: GemmOp | MoEOp | CommOp, t: int) -> OpTime:
        self.calls.append((kind, op.name, t))
        return OpTime(OP_S, "communication" if isinstance(op, CommOp) else "compute", 0.0)

    def gemm(self, op: GemmOp, t: int) -> OpTime:
        return self._op("gemm", op, t)

    def moe(self, op: MoEOp, t: int) -> OpTime:
        return self._op("moe", op, t)

    def allreduce(self, op: CommOp, t: int) -> OpTime:
        return self._op("allreduce", op, t)

    def alltoall(self, op: CommOp, t: int) -> OpTime:
        return self._op("alltoall", op, t)

    def p2p(self, op: CommOp, t: int) -> OpTime:
        return self._op("p2p", op, t)

    def lm_head(self, rows: int) -> OpTime:
        self.calls.append(("lm_head", rows))
        return OpTime(OP_S, "compute", 0.0)

    def prefill_attention(self, seqs: int, tokens: int, pairs: float) -> float:
        self.calls.append(("prefill", seqs, tokens, pairs))
        return PAIR_S

    def decode_attention(self, seqs: int, context: float) -> float:
        self.calls.append(("decode", seqs, context))
        return KV_S

    def attention_fixed(self) -> AttentionFixed:
        return AttentionFixed(PREFILL_FIXED, DECODE_FIXED, 0.0, 0.0, "memory")


def test_a_toy_timer_sets_the_step_time_of_a_tensor_parallel_dense_model() -> None:
    sw = software(step_us=100.0)
    cm = StepCostModel(hardware(), dense_model(), Deployment(tp=2), sw, timer=ConstantTimer)
    prompt, seqs, context = 100, 4, 4000.0
    b = BatchShape(prefill_tokens=prompt, prefill_attn_pairs=prompt * (prompt + 1) / 2, prefill_seqs=1,
                   decode_seqs=seqs, decode_context=context)
    # embedding, qkv_proj, o_proj, ffn, the TP all-reduce and the LM head: six ops
    ops = 6 * OP_S
    prefill = LAYERS * prompt * (prompt + 1) / 2 * PAIR_S + PREFILL_FIXED
    decode = LAYERS * context * KV_S + DECODE_FIXED
    assert cm.step_time(b) == pytest.approx(100e-6 + ops + prefill + decode, rel=1e-12)
    assert cm.breakdown(b).total_s == cm.step_time(b)
    timer = cm.timer
    assert isinstance(timer, ConstantTimer)
    assert ("allreduce", "tp_allreduce", prompt + seqs) in timer.calls
    assert ("lm_head", seqs + 1) in timer.calls  # every decode row and the prompt's last token
    assert ("prefill", 1, prompt, prompt * (prompt + 1) / 2) in timer.calls
    assert ("decode", seqs, context / seqs) in timer.calls


def test_a_toy_timer_sees_the_busiest_attention_dp_rank_of_a_wide_ep_moe() -> None:
    cm = StepCostModel(hardware(), moe_model(), Deployment(tp=2, ep=2, attention_dp=True), software(step_us=0.0),
                       timer=ConstantTimer)
    seqs, context = 5, 5000.0
    b = BatchShape(decode_seqs=seqs, decode_context=context)
    # embedding, qkv_proj, o_proj, router, routed and shared experts, dispatch, combine, LM head: nine ops
    ops = 9 * OP_S
    busiest = 3  # ceil(5 / 2) of the 5 sequences, at the mean context
    decode = LAYERS * context * busiest / seqs * KV_S + DECODE_FIXED
    assert cm.step_time(b) == pytest.approx(ops + decode, rel=1e-12)
    timer = cm.timer
    assert isinstance(timer, ConstantTimer)
    assert ("decode", busiest, context / seqs) in timer.calls
    assert {c[0] for c in timer.calls if len(c) == 3 and c[0] in ("moe", "alltoall")} == {"moe", "alltoall"}
    # the routed experts see every token; the attention projections the busiest rank's 3 (as 2 × 3 split)
    assert ("moe", "moe_experts", seqs) in timer.calls and ("gemm", "qkv_proj", 2 * busiest) in timer.calls
