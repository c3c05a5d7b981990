"""Batch step → seconds: the interface between the serving engine and the cost model.

The time of one step of one instance is

    step_overhead + layers · layer_overhead + Σ_ops roofline(op, T) + Σ collectives(T) + lm_head(R) + attention(batch)

with T = prefill_tokens + decode_seqs and R = decode_seqs + prefill_seqs rows that produce logits;
plus, behind an HTTP front end (`Deployment.frontend`), sequences · host_seq_us: the per-sequence host
work (response handling, detokenisation, streaming) that the overlap scheduler does not hide, counted on
the busiest attention-DP rank (each rank has its own host process). It adds to the GPU time: on the
silicon sample's gpt-oss TP1/TP2/TP4 sweeps the step time above the kernels grows by the same time per
sequence whatever the TP, which neither a GPU term (it would shrink with TP) nor a max(GPU, host)
overlap (it would vanish at TP1) reproduces.
GEMM efficiency depends on the compute precision (bf16/fp8/fp4) and, for grouped MoE GEMMs, on the
profile's `moe_efficiency` of that precision times i / (i + moe_inter_half) for experts i wide on a GPU
(small experts fill tiles poorly); dense NVFP4 GEMMs stream their weights at the profile's
`hbm_bandwidth_fraction_fp4`, the other memory-bound work at `hbm_bandwidth_fraction`; every kernel
carries its class's fixed time (GEMM, MoE, attention, collective), which replaces the bare
`kernel_launch_us` where the profile sets one.
The T-part (GEMMs, MoE, collectives, launches) is cached per T; attention is linear in the causal
pairs (prefill), KV tokens read (decode) and, for sliding-window layers, capped by the window, so
it costs a handful of float operations. The LM head's roofline is closed-form in R because the GEMM
shape curve eff(m) = eff_max · m/(m + m_half) makes its compute time linear in m.

Pipeline parallelism: the stages run one after another for one batch (the step is the sum of the
stages plus pp − 1 activation transfers); micro-batch pipelining across steps is not modelled yet.
Attention DP: sequences are split evenly over the tp ranks and the step waits for the busiest
(ceil(seqs / tp) of them, at the mean context). A prompt stays on its sequence's rank: the ops split over
the ranks (attention projections, router, dispatch) see the busiest rank's prefill tokens, ceil(s / dp)
of the step's s prefill sequences at the mean chunk, so a lone prefill runs whole on one rank while the
others wait (with s ≥ dp, as in an even split). Communication is not overlapped with compute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from gpusim.perf.collectives import allreduce_time, alltoall_time, p2p_time
from gpusim.perf.ops import CommOp, GemmOp, ModelOps, MoEOp, build_ops, ceil_div
from gpusim.perf.roofline import gemm_efficiency, op_time
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import SoftwareProfile, load_software


@dataclass(frozen=True, slots=True)
class BatchShape:
    """What one engine step computes, as aggregates (O(1) in the batch size)."""

    prefill_tokens: int = 0
    """New prompt tokens computed this step (sum of chunk lengths)."""
    prefill_attn_pairs: float = 0.0
    """Σ over chunks of c·p + c·(c+1)/2 (c chunk tokens, p tokens already cached): causal query-key pairs."""
    prefill_seqs: int = 0
    decode_seqs: int = 0
    """Sequences producing one token this step."""
    decode_context: float = 0
    """Σ context lengths (KV tokens read) over decode sequences."""
    attn_rank_context: float = 0
    """Attention DP: decode context of the busiest rank (0: assume an even split, ceil(seqs / dp))."""
    attn_rank_seqs: int = 0
    """Attention DP: decode sequences of that rank."""


@dataclass(frozen=True)
class StepBreakdown:
    """Where the time of a step goes. compute + memory + communication + overhead = total = Σ by_op."""

    total_s: float
    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float
    """Kernel launches, the fixed per-step overhead and the per-sequence host time."""
    by_op: dict[str, float]


def expert_imbalance(model: ModelSpec, dep: Deployment, sw: SoftwareProfile) -> float:
    """Busiest EP rank's expert load over the mean: the deployment's value or the profile's, lowered by
    redundant experts. Rule (grade D, after DeepSeek's EPLB, which replicates the hottest experts): the
    excess over 1 shrinks as 1 / (1 + r·ep/E) with r redundant experts per layer, ep ranks, E experts."""
    base = dep.expert_imbalance or sw.moe_imbalance.value
    if model.moe is None or not dep.redundant_experts:
        return base
    return 1 + (base - 1) / (1 + dep.redundant_experts * dep.ep / model.moe.num_experts)


class _Link(NamedTuple):
    """The link a collective crosses: achievable bytes/s, alpha seconds, in-network reduction, and (for an
    all-reduce inside the NVLink domain) its small-message rate and the size where the two rates meet."""

    bw: float
    alpha: float
    sharp: bool
    small_bw: float | None = None
    knee_bytes: float = 0.0


class StepCostModel:
    """Seconds per step of one instance of `model` deployed as `deployment` on `hardware`."""

    def __init__(
        self, hardware: Hardware, model: ModelSpec, deployment: Deployment,
        software: SoftwareProfile | None = None,
    ) -> None:
        sw = software if software is not None else load_software(deployment.software)
        sw = sw.for_architecture(hardware.gpu.architecture)
        self.hardware, self.model, self.deployment, self.software = hardware, model, deployment, sw
        self.imbalance = expert_imbalance(model, deployment, sw)
        self.ops: ModelOps = build_ops(model, deployment, self.imbalance)
        self._bw = hardware.hbm_bandwidth * sw.hbm_bandwidth_fraction.value
        self._gemm_bw = {d: hardware.hbm_bandwidth * sw.gemm_bandwidth_fraction(d) for d in ("bf16", "fp8", "fp4")}
        self._launch = sw.kernel_launch_us.value * 1e-6
        self._gemm_launch = sw.value("gemm_kernel_us") * 1e-6
        self._moe_launch = {d: sw.moe_kernel_s(d) for d in ("bf16", "fp8", "fp4")}
        self._coll_launch = sw.value("collective_kernel_us") * 1e-6
        self._host_seq = sw.value("host_seq_us") * 1e-6 if deployment.frontend == "http" else 0.0
        self._step_overhead = (sw.step_overhead_us.value + sw.value("layer_overhead_us") * model.num_layers) * 1e-6
        self._m_half = sw.gemm_m_half.value
        self._cache: dict[int, float] = {}
        """Seconds of the ops that see every token of the step, per token count T."""
        self._rank_cache: dict[int, float] = {}
        """Seconds of the ops split over attention-DP ranks, per token count of the busiest rank."""

        # LM head, closed form in rows R: compute = f·R / (P·eff(R)) = f·(R + m_half) / (P·eff_max).
        lm = self.ops.lm_head
        p_lm = hardware.peak_flops(lm.dtype) * sw.gemm_efficiency(lm.dtype)
        self._lm_c0 = lm.flops_per_token * self._m_half / p_lm
        self._lm_c1 = lm.flops_per_token / p_lm
        self._lm_m0 = lm.weight_bytes / self._gemm_bw[lm.dtype]
        self._lm_m1 = lm.io_bytes_per_token / self._gemm_bw[lm.dtype]
        self._lm_launch = lm.kernels * self._gemm_launch

        # Attention: seconds per pair / per KV token, summed over the layers.
        a = self.ops.attention
        p_attn = hardware.peak_flops(a.dtype) * sw.attention_prefill_flops_fraction.value
        bw_attn = hardware.hbm_bandwidth * sw.attention_decode_bandwidth_fraction.value
        self._pair_s = a.prefill_flops_per_pair / p_attn
        self._keys_half = sw.value("attention_prefill_keys_half")
        t_dec_c = a.decode_flops_per_kv / (hardware.peak_flops(a.dtype) * sw.value("attention_decode_flops_fraction"))
        t_dec_m = a.decode_bytes_per_kv / bw_attn
        self._full_layers = a.full_layers
        self._sliding_layers = a.sliding_layers
        self._window = a.window
        self._dp = a.dp
        mixers = a.full_layers + a.sliding_layers + a.linear_layers
        self._attn_launch = mixers * sw.value("attention_kernel_us") * 1e-6
        self._prefill_attn_launch = mixers * sw.value("attention_prefill_kernel_us") * 1e-6
        self._linear_token_s = a.linear_layers * a.linear_flops_per_token / p_attn
        self._state_s = a.linear_layers * a.linear_state_bytes / bw_attn

        self._links = {c.name: self._link(c) for c in self.ops.comm_ops}
        token_ops = (*self.ops.token_ops, *self.ops.comm_ops)
        self._shared_ops = tuple(op for op in token_ops if op.split == 1)
        self._split_ops = tuple(op for op in token_ops if op.split > 1)

        # MTP: each decode sequence verifies 1 + depth tokens; the draft module runs `depth` times.
        self._depth = deployment.mtp.depth if deployment.mtp else 0
        self._verify = 1 + self._depth
        self._kv_s = max(t_dec_c * self._verify, t_dec_m)
        self._decode_bound = "compute" if t_dec_c * self._verify > t_dec_m else "memory"
        self._layers = model.num_layers
        self._pair_table: Callable[[BatchShape], float] | None = None
        self._kv_table: Callable[[int, float], float] | None = None
        """Measured-table timing (`TableStepCostModel`): seconds per causal pair and layer of a prefill
        batch, and per KV token and layer for (decode sequences of the busiest rank, their mean context),
        in place of the constants."""

    # ---- collectives ----------------------------------------------------------------------
    def _link(self, c: CommOp) -> _Link:
        """The link the collective crosses, with the achievable rates of its kind."""
        hw, sw, dep = self.hardware, self.software, self.deployment
        group = dep.tp * dep.pp if c.kind == "p2p" else c.group
        eff = sw.alltoall_efficiency.value if c.kind == "alltoall" else sw.allreduce_busbw_fraction.value
        if group <= hw.domain_gpus:
            alpha = {"p2p": hw.nvlink.latency_us.value, "alltoall": sw.alltoall_hop_latency_us.value}.get(
                c.kind, sw.nvlink_hop_latency_us.value)
            bw = hw.nvlink_bandwidth * (1.0 if c.kind == "p2p" else eff)
            if c.kind != "allreduce":
                return _Link(bw, alpha * 1e-6, hw.nvlink.sharp)
            small_bw = hw.nvlink_bandwidth * sw.value("allreduce_small_busbw_fraction")
            return _Link(bw, alpha * 1e-6, hw.nvlink.sharp, small_bw, sw.value("allreduce_knee_mb") * 1e6)
        f = hw.scaleout
        alpha = f.latency_us.value + (f.switch_latency_us.value if f.switch_latency_us else 0.0)
        if c.kind == "alltoall":
            alpha = sw.alltoall_scaleout_hop_latency_us.value
        bw = hw.scaleout_bandwidth * (1.0 if c.kind == "p2p" else eff)
        return _Link(bw, alpha * 1e-6, f.sharp)

    def _comm_time(self, c: CommOp, t: int) -> float:
        link = self._links[c.name]
        if c.kind == "allreduce":
            one = allreduce_time(t * c.bytes_per_token, c.group, link.bw, link.alpha, link.sharp, link.small_bw,
                                 link.knee_bytes)
        elif c.kind == "alltoall":
            one = alltoall_time(ceil_div(t, c.split), c.top_k, 1, c.bytes_per_token, c.group, link.bw, link.alpha,
                                self.imbalance)
        else:
            one = p2p_time(t * c.bytes_per_token, link.bw, link.alpha)
        return c.count * one

    # ---- the T-dependent part ---------------------------------------------------------------
    @staticmethod
    def _op_tokens(op: GemmOp | MoEOp | CommOp, t: int, rank_t: int | None) -> int:
        """The step size `op` is evaluated at: T, or for an op split over attention-DP ranks the count whose
        even split is the busiest rank's `rank_t` tokens (default: an even split of T)."""
        return t if op.split == 1 or rank_t is None else rank_t * op.split

    def _op_item(self, op: GemmOp | MoEOp | CommOp, n: int) -> tuple[str, float, str, float]:
        """(name, seconds without launches, bound, launch seconds) of `op` evaluated at a step of `n` tokens."""
        if isinstance(op, CommOp):
            fixed = op.count * self._coll_launch if op.kind != "alltoall" else 0.0
            return op.name, self._comm_time(op, n), "communication", fixed
        moe = isinstance(op, MoEOp)
        eff_max = self.software.gemm_efficiency(op.dtype, op.inter_local if moe else None)
        eff_c = gemm_efficiency(op.gemm_m(n), eff_max, self._m_half) or 1.0
        peak = self.hardware.peak_flops(op.dtype)
        bw = self._bw if moe or not op.flops_per_token else self._gemm_bw[op.dtype]
        sec, bound = op_time(op.flops(n), op.bytes(n), peak, bw, eff_c, 1.0)
        fixed = self._moe_launch[op.dtype] if moe else self._gemm_launch if op.flops_per_token else self._launch
        return op.name, op.count * sec, bound, op.count * op.kernels * fixed

    def _token_items(self, t: int, rank_t: int | None = None) -> list[tuple[str, float, str, float]]:
        """`_op_item` of every T-dependent op in a step of `t` tokens whose busiest attention-DP rank holds
        `rank_t` of them (default: an even split)."""
        return [self._op_item(op, self._op_tokens(op, t, rank_t)) for op in (*self.ops.token_ops, *self.ops.comm_ops)]

    def _ops_seconds(self, ops: tuple[GemmOp | MoEOp | CommOp, ...], t: int, rank_t: int | None) -> float:
        """Seconds, launches included, of `ops` in a step of `t` tokens, `rank_t` on the busiest rank."""
        return sum(sec + launch for _, sec, _, launch in (self._op_item(op, self._op_tokens(op, t, rank_t))
                                                          for op in ops))

    def _tokens_time(self, t: int, rank_t: int) -> float:
        """Seconds of the T-dependent ops: those that see all `t` tokens plus those split over attention-DP
        ranks at the busiest rank's `rank_t` (each part cached per its own count)."""
        shared = self._cache.get(t)
        if shared is None:
            shared = self._cache[t] = self._ops_seconds(self._shared_ops, t, None)
        if not self._split_ops:
            return shared
        split = self._rank_cache.get(rank_t)
        if split is None:
            split = self._rank_cache[rank_t] = self._ops_seconds(self._split_ops, t, rank_t)
        return shared + split

    def _rank_tokens(self, b: BatchShape, t: int) -> int:
        """Tokens on the busiest attention-DP rank: an even share of the decode rows, and ceil(s / dp) of the
        step's s prefill sequences at the mean chunk (a prompt is not split across ranks)."""
        if self._dp == 1:
            return t
        prefill = self._busiest(b.prefill_tokens, b.prefill_seqs or self._dp)
        return max(1, math.ceil(prefill + b.decode_seqs * self._verify / self._dp - 1e-9))

    # ---- the interface ----------------------------------------------------------------------
    def step_time(self, b: BatchShape) -> float:
        """Seconds for one step of one instance (hot path: a dict lookup and a few float operations)."""
        t = b.prefill_tokens + b.decode_seqs * self._verify
        if t <= 0:
            return 0.0
        s = self._tokens_time(t, self._rank_tokens(b, t)) + self._step_overhead
        r = b.decode_seqs * self._verify + b.prefill_seqs
        if r:
            s += self._lm_head(r)[0] + self._lm_launch
        if b.prefill_attn_pairs:
            s += self._prefill_attention(b) + self._prefill_attn_launch
        if b.decode_seqs:
            s += self._decode_attention(b) + self._attn_launch
            if self._depth:
                s += self._draft(b.decode_seqs)
        if self._host_seq:
            s += self._host_time(b.decode_seqs + b.prefill_seqs)
        return s

    def _host_time(self, seqs: int) -> float:
        """Host work of a step: host_seq_us per sequence of the busiest attention-DP rank (one host each)."""
        return self._host_seq * self._busiest(seqs, seqs) if seqs else 0.0

    def _lm_head(self, rows: int) -> tuple[float, str]:
        """LM head over `rows` sampled rows: (seconds without launch, bound)."""
        c = self._lm_c0 + rows * self._lm_c1
        m = self._lm_m0 + rows * self._lm_m1
        return (c, "compute") if c > m else (m, "memory")

    def _draft(self, seqs: int) -> float:
        """MTP drafting: `depth` sequential passes of one layer and the LM head over the decode rows."""
        layer = self._tokens_time(seqs, -(-seqs // self._dp)) / self._layers
        return self._depth * (layer + self._lm_head(seqs)[0] + self._lm_launch)

    def _prefill_attention(self, b: BatchShape) -> float:
        """Σ layers · causal pairs · seconds per pair, slower for short keys per query (the length curve of
        `attention_prefill_keys_half`); sliding layers cap pairs at tokens · window; linear-attention layers
        are linear in the prompt tokens."""
        pairs = self._attention_work(b.prefill_attn_pairs, b.prefill_tokens, b.prefill_seqs or 1)
        if self._pair_table is not None:
            pair_s = self._pair_table(b)
        else:  # eff(L) = fraction · L / (L + keys_half), L = keys per query = pairs / tokens
            pair_s = self._pair_s * (1.0 + self._keys_half * b.prefill_tokens / b.prefill_attn_pairs)
        linear = 0.0
        if self._linear_token_s:
            linear = self._linear_token_s * self._busiest(b.prefill_tokens, b.prefill_seqs or 1)
        return pairs * pair_s + linear

    def _decode_attention(self, b: BatchShape) -> float:
        """Σ layers · KV tokens read · seconds per KV token; sliding layers cap at seqs · window;
        linear-attention layers read and write a fixed state per sequence.
        With attention DP the busiest rank's context sets the time when the engine tracks ranks."""
        if self._dp > 1 and b.attn_rank_seqs:
            kv = self._attention_work(b.attn_rank_context, b.attn_rank_seqs, 1)
            kv_s = self._kv_s if self._kv_table is None else self._kv_table(
                b.attn_rank_seqs, b.attn_rank_context / b.attn_rank_seqs)
            return kv * kv_s + b.attn_rank_seqs * self._state_s
        kv = self._attention_work(b.decode_context, b.decode_seqs, b.decode_seqs)
        kv_s = self._kv_s if self._kv_table is None else self._kv_table(
            -(-b.decode_seqs // self._dp), b.decode_context / b.decode_seqs)
        return kv * kv_s + self._busiest(b.decode_seqs, b.decode_seqs) * self._state_s

    def _busiest(self, work: float, seqs: int) -> float:
        """The share of `work` (spread over `seqs` sequences) on the busiest attention-DP rank."""
        return work * (-(-seqs // self._dp) / seqs) if self._dp > 1 and seqs else work

    def _attention_work(self, work: float, window_units: int, seqs: int) -> float:
        """`work` over all layers (sliding layers capped at `window_units · window`), on the busiest
        attention-DP rank (ceil(seqs / dp) of the sequences)."""
        total = self._full_layers * work
        if self._sliding_layers:
            cap = window_units * self._window
            total += self._sliding_layers * (work if work < cap else cap)
        return self._busiest(total, seqs)

    def breakdown(self, b: BatchShape) -> StepBreakdown:
        """The same time as `step_time`, split by bound and by op (slow path, for reports)."""
        total = self.step_time(b)
        t = b.prefill_tokens + b.decode_seqs * self._verify
        if t <= 0:
            return StepBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, {})
        parts = {"compute": 0.0, "memory": 0.0, "communication": 0.0}
        by_op: dict[str, float] = {}
        launches = 0.0
        items = self._token_items(t, self._rank_tokens(b, t))
        r = b.decode_seqs * self._verify + b.prefill_seqs
        if r:
            items.append(("lm_head", *self._lm_head(r), self._lm_launch))
        if b.prefill_attn_pairs:
            items.append(("attention_prefill", self._prefill_attention(b), "compute", self._prefill_attn_launch))
        if b.decode_seqs:
            items.append(("attention_decode", self._decode_attention(b), self._decode_bound, self._attn_launch))
            if self._depth:
                items.append(("mtp_draft", self._draft(b.decode_seqs), "compute", 0.0))
        for name, sec, bound, launch in items:
            parts[bound] += sec
            launches += launch
            by_op[name] = by_op.get(name, 0.0) + sec + launch
        by_op["step_overhead"] = self._step_overhead
        host = self._host_time(b.decode_seqs + b.prefill_seqs)
        if host:
            by_op["host"] = host
        return StepBreakdown(
            total_s=total,
            compute_s=parts["compute"],
            memory_s=parts["memory"],
            communication_s=parts["communication"],
            overhead_s=launches + self._step_overhead + host,
            by_op=by_op,
        )


__all__ = ["BatchShape", "StepBreakdown", "StepCostModel"]
