"""The timing seam: how long each kind of kernel takes on one GPU, behind one small protocol.

`StepCostModel` (step.py) decides what a step computes (which ops, at how many tokens, on the busiest
attention-DP rank, over how many layers) and asks a `KernelTimer` how long each kernel takes; the timer
never sees a batch, the step model never sees an efficiency. Two timers ship: `RooflineTimer` here (the
software profile's efficiencies on the roofline, docs/design.md: Formulas) and `TableTimer`
(table_step.py: NVIDIA's measured kernel tables, the roofline where they hold no such kernel). A third
source implements `KernelTimer` and is passed to `StepCostModel(..., timer=...)` as a factory of a
`TimingContext`; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from gpusim.perf.collectives import allreduce_time, alltoall_time, p2p_time
from gpusim.perf.ops import CommOp, GemmOp, ModelOps, MoEOp, ceil_div
from gpusim.perf.roofline import Bound, gemm_efficiency, op_time, prompt_attention_seconds
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import SoftwareProfile


class OpTime(NamedTuple):
    """Seconds of one op in a step (all its occurrences), split as a step breakdown reports it."""

    seconds: float
    """Without the kernels' fixed (launch) time."""
    bound: Literal["compute", "memory", "communication"]
    launch: float
    """The kernels' fixed time."""


@dataclass(frozen=True)
class TimingContext:
    """What a timer may read about the instance it times (the step model builds it)."""

    hardware: Hardware
    model: ModelSpec
    deployment: Deployment
    software: SoftwareProfile
    """Resolved for the GPU architecture (and the timing's own overheads)."""
    ops: ModelOps
    imbalance: float
    """Busiest EP rank's expert load over the mean (step.expert_imbalance)."""


@dataclass(frozen=True)
class AttentionFixed:
    """A step's attention constants, summed over the layers: fixed kernel time per step with prompt
    attention and with decode attention, seconds per prompt token and per decode sequence of the
    linear-attention layers, and the bound decode attention is reported under."""

    prefill_launch: float
    decode_launch: float
    linear_token_s: float
    linear_seq_s: float
    decode_bound: Bound


class KernelTimer(Protocol):
    """Seconds of each kind of kernel on one GPU. `t` is the step size an op is evaluated at (each op
    knows its own per-GPU shape from it: `op.tokens(t)`, `op.gemm_m(t)`, `op.shapes`)."""

    def gemm(self, op: GemmOp, t: int) -> OpTime:
        """A dense GEMM (or, with `flops_per_token` 0, a memory-bound kernel) in a step of `t` tokens."""
        ...

    def moe(self, op: MoEOp, t: int) -> OpTime:
        """Routed experts (grouped GEMMs) in a step of `t` tokens."""
        ...

    def allreduce(self, op: CommOp, t: int) -> OpTime:
        ...

    def alltoall(self, op: CommOp, t: int) -> OpTime:
        """MoE dispatch or combine of a step of `t` tokens (each rank holds ceil(t / op.split))."""
        ...

    def p2p(self, op: CommOp, t: int) -> OpTime:
        ...

    def lm_head(self, rows: int) -> OpTime:
        """The LM head over `rows` sampled rows of the instance (the busiest copy's share of them)."""
        ...

    def prefill_attention(self, seqs: int, tokens: int, pairs: float) -> float:
        """Seconds per causal pair and layer of a prompt batch of `seqs` sequences (at least 1), `tokens`
        prompt tokens and `pairs` causal pairs over the whole instance."""
        ...

    def decode_attention(self, seqs: int, context: float) -> float:
        """Seconds per KV token and layer for `seqs` sequences on one GPU, each verifying 1 + MTP depth
        queries, at mean `context` KV tokens."""
        ...

    def attention_fixed(self) -> AttentionFixed:
        """The step's attention constants (read once, when the step model is built)."""
        ...


class _Link(NamedTuple):
    """The link a collective crosses: achievable bytes/s, alpha seconds, in-network reduction, (for an
    all-reduce inside the NVLink domain) its small-message rate and the size where the two rates meet, and (for
    an all-to-all inside it) the kernels' fixed seconds per call."""

    bw: float
    alpha: float
    sharp: bool
    small_bw: float | None = None
    knee_bytes: float = 0.0
    kernel_s: float = 0.0


class RooflineTimer:
    """Kernel times on the roofline with the software profile's efficiencies and fixed times (step.py's
    module docstring lists the rules)."""

    def __init__(self, ctx: TimingContext) -> None:
        hw, sw, a = ctx.hardware, ctx.software, ctx.ops.attention
        self.ctx = ctx
        self._bw = hw.hbm_bandwidth * sw.hbm_bandwidth_fraction.value
        self._gemm_bw = {d: hw.hbm_bandwidth * sw.gemm_bandwidth_fraction(d) for d in ("bf16", "fp8", "fp4")}
        self._launch = sw.kernel_launch_us.value * 1e-6
        self._gemm_launch = sw.value("gemm_kernel_us") * 1e-6
        self._moe_launch = {d: sw.moe_kernel_s(d) for d in ("bf16", "fp8", "fp4")}
        self._coll_launch = sw.value("collective_kernel_us") * 1e-6
        self._m_half = sw.gemm_m_half.value
        self._links = {c.name: self._link(c) for c in ctx.ops.comm_ops}

        # LM head, closed form in rows R: compute = f·R / (P·eff(R)) = f·(R + m_half) / (P·eff_max).
        lm = ctx.ops.lm_head
        p_lm = hw.peak_flops(lm.dtype) * sw.gemm_efficiency(lm.dtype)
        self._lm_c0 = lm.flops_per_token * self._m_half / p_lm
        self._lm_c1 = lm.flops_per_token / p_lm
        self._lm_m0 = lm.weight_bytes / self._gemm_bw[lm.dtype]
        self._lm_m1 = lm.io_bytes_per_token / self._gemm_bw[lm.dtype]
        self._lm_launch = lm.kernels * self._gemm_launch

        # Attention: seconds per pair / per KV token, per layer.
        peak, fraction = hw.peak_flops(a.dtype), sw.attention_prefill_flops_fraction.value
        bw_attn = hw.hbm_bandwidth * sw.attention_decode_bandwidth_fraction.value
        self.saturated_pair_s = prompt_attention_seconds(
            a.prefill_flops_per_pair, a.prefill_exps_per_pair, peak, hw.exp_per_s) / fraction
        """Seconds per causal pair and layer at the saturated prompt-attention rate (long keys)."""
        self._keys_half = sw.value("attention_prefill_keys_half")
        t_dec_c = a.decode_flops_per_kv / (peak * sw.value("attention_decode_flops_fraction"))
        t_dec_m = a.decode_bytes_per_kv / bw_attn
        verify = 1 + (ctx.deployment.mtp.depth if ctx.deployment.mtp else 0)
        self._kv_s = max(t_dec_c * verify, t_dec_m)
        mixers = a.full_layers + a.sliding_layers + a.linear_layers
        self._fixed = AttentionFixed(
            prefill_launch=mixers * sw.value("attention_prefill_kernel_us") * 1e-6,
            decode_launch=mixers * sw.value("attention_kernel_us") * 1e-6,
            linear_token_s=a.linear_layers * a.linear_flops_per_token / (peak * fraction),
            linear_seq_s=a.linear_layers * a.linear_state_bytes / bw_attn,
            decode_bound="compute" if t_dec_c * verify > t_dec_m else "memory",
        )

    # ---- GEMMs ---------------------------------------------------------------------------------------
    def gemm(self, op: GemmOp, t: int) -> OpTime:
        eff_max = self.ctx.software.gemm_efficiency(op.dtype, None)
        bw = self._gemm_bw[op.dtype] if op.flops_per_token else self._bw
        fixed = self._gemm_launch if op.flops_per_token else self._launch
        return self._roofline(op, t, eff_max, bw, fixed)

    def moe(self, op: MoEOp, t: int) -> OpTime:
        eff_max = self.ctx.software.gemm_efficiency(op.dtype, op.inter_local)
        return self._roofline(op, t, eff_max, self._bw, self._moe_launch[op.dtype])

    def _roofline(self, op: GemmOp | MoEOp, t: int, eff_max: float, bw: float, fixed: float) -> OpTime:
        eff_c = gemm_efficiency(op.gemm_m(t), eff_max, self._m_half) or 1.0
        sec, bound = op_time(op.flops(t), op.bytes(t), self.ctx.hardware.peak_flops(op.dtype), bw, eff_c, 1.0)
        return OpTime(op.count * sec, bound, op.count * op.kernels * fixed)

    def lm_head(self, rows: int) -> OpTime:
        rows = self.ctx.ops.lm_head.tokens(rows)
        c = self._lm_c0 + rows * self._lm_c1
        m = self._lm_m0 + rows * self._lm_m1
        return OpTime(c, "compute", self._lm_launch) if c > m else OpTime(m, "memory", self._lm_launch)

    # ---- collectives ---------------------------------------------------------------------------------
    def _link(self, c: CommOp) -> _Link:
        """The link the collective crosses, with the achievable rates of its kind."""
        hw, sw, dep = self.ctx.hardware, self.ctx.software, self.ctx.deployment
        group = dep.tp * dep.pp if c.kind == "p2p" else c.group
        eff = sw.alltoall_efficiency.value if c.kind == "alltoall" else sw.allreduce_busbw_fraction.value
        if group <= hw.domain_gpus:
            alpha = {"p2p": hw.nvlink.latency_us.value, "alltoall": sw.alltoall_hop_latency_us.value}.get(
                c.kind, sw.nvlink_hop_latency_us.value)
            # a send/recv reaches one peer; a collective over n GPUs keeps its n - 1 peers' links busy
            link_bw = hw.domain_bandwidth(1 if c.kind == "p2p" else c.group - 1, alltoall=c.kind == "alltoall")
            bw = link_bw * (1.0 if c.kind == "p2p" else eff)
            if c.kind != "allreduce":
                kernel = sw.value("alltoall_kernel_us") * 1e-6 if c.kind == "alltoall" else 0.0
                return _Link(bw, alpha * 1e-6, hw.nvlink.sharp, kernel_s=kernel)
            small_bw = link_bw * sw.value("allreduce_small_busbw_fraction")
            return _Link(bw, alpha * 1e-6, hw.nvlink.sharp, small_bw, sw.value("allreduce_knee_mb") * 1e6)
        f = hw.scaleout
        alpha = f.latency_us.value + (f.switch_latency_us.value if f.switch_latency_us else 0.0)
        if c.kind == "alltoall":
            alpha = sw.alltoall_scaleout_hop_latency_us.value
        bw = hw.scaleout_bandwidth * (1.0 if c.kind == "p2p" else eff)
        return _Link(bw, alpha * 1e-6, f.sharp)

    def allreduce(self, op: CommOp, t: int) -> OpTime:
        link = self._links[op.name]
        one = allreduce_time(t * op.bytes_per_token, op.group, link.bw, link.alpha, link.sharp, link.small_bw,
                             link.knee_bytes)
        return OpTime(op.count * one, "communication", op.count * self._coll_launch)

    def alltoall(self, op: CommOp, t: int) -> OpTime:
        link = self._links[op.name]
        one = alltoall_time(ceil_div(t, op.split), op.top_k, 1, op.bytes_per_token, op.group, link.bw, link.alpha,
                            self.ctx.imbalance)
        return OpTime(op.count * one, "communication", op.count * link.kernel_s)

    def p2p(self, op: CommOp, t: int) -> OpTime:
        link = self._links[op.name]
        return OpTime(op.count * p2p_time(t * op.bytes_per_token, link.bw, link.alpha), "communication",
                      op.count * self._coll_launch)

    # ---- attention -----------------------------------------------------------------------------------
    def prefill_attention(self, seqs: int, tokens: int, pairs: float) -> float:
        """eff(L) = fraction · L / (L + keys_half), L = keys per query = pairs / tokens."""
        return self.saturated_pair_s * (1.0 + self._keys_half * tokens / pairs)

    def decode_attention(self, seqs: int, context: float) -> float:
        """max(FLOPs · (1 + MTP depth) / attention FLOPS, bytes / attention bandwidth) per KV token."""
        return self._kv_s

    def attention_fixed(self) -> AttentionFixed:
        return self._fixed


__all__ = ["AttentionFixed", "KernelTimer", "OpTime", "RooflineTimer", "TimingContext"]
