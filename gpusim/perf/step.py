"""Batch step → seconds: the interface between the serving engine and the cost model.

The step model decides what a step computes; each kernel's time comes from its `KernelTimer` (timer.py:
the roofline by default, measured tables with `table_step.TableTimer`). With the roofline timer the time
of one step of one instance is

    step_overhead + layers · layer_overhead + Σ_ops roofline(op, T) + Σ collectives(T) + lm_head(R) + attention(batch)

with T = prefill_tokens + decode_seqs and R = decode_seqs + prefill_seqs rows that produce logits;
plus, behind an HTTP front end (`Deployment.frontend`), sequences · host_seq_us: the per-sequence host
work (response handling, detokenisation, streaming) that the overlap scheduler does not hide, counted on
the busiest attention-DP rank (each rank has its own host process). It adds to the GPU time: on the
silicon sample's gpt-oss TP1/TP2/TP4 sweeps the step time above the kernels grows by the same time per
sequence whatever the TP, which neither a GPU term (it would shrink with TP) nor a max(GPU, host)
overlap (it would vanish at TP1) reproduces.
The power limit: where the GPU profile gives the tensor cores' energy per FLOP (`tensor_pj_per_flop`), a
step takes at least its tensor-core joules over the TDP, max(kernels, Σ FLOPs · J/FLOP / TDP), before the
host work: a GPU whose kernels would draw more lowers its clocks (docs/design.md: The power limit).
GEMM efficiency depends on the compute precision (bf16/fp8/fp4) and, for grouped MoE GEMMs, on the
profile's `moe_efficiency` of that precision times i / (i + moe_inter_half) for experts i wide on a GPU
(small experts fill tiles poorly); dense NVFP4 GEMMs stream their weights at the profile's
`hbm_bandwidth_fraction_fp4`, the other memory-bound work at `hbm_bandwidth_fraction`; every kernel
carries its class's fixed time (GEMM, MoE, attention, collective), which replaces the bare
`kernel_launch_us` where the profile sets one.
The T-part (GEMMs, MoE, collectives, launches) is cached per T; attention is linear in the causal
pairs (prefill), KV tokens read (decode) and, for sliding-window layers, capped by the window, so
it costs a handful of float operations. A step that only generates (most of a run's) reads all but its
attention from a cache per (sequences, busiest rank's sequences), the same seconds to the bit. The LM head's
roofline is closed-form in R because the GEMM shape curve eff(m) = eff_max · m/(m + m_half) makes its compute
time linear in m.

CUDA graphs: where the profile captures only some decode batch sizes (`SoftwareProfile.graph_batches`), a step
that only generates runs padded to the next captured size per attention-DP rank (every rank to the busiest
one's): the T-dependent ops, the LM head and MTP drafting compute the dummy rows, while the KV read stays the
real sequences'. An engine that compiles every shape (XLA) also pads a step with prompt tokens to its next
compiled token count (`GraphBatches.token_sizes`): the T-dependent ops compute the dummy tokens.

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
from dataclasses import dataclass, replace
from typing import NamedTuple

from gpusim.perf.ops import CommOp, GemmOp, ModelOps, MoEOp, build_ops, popularity_imbalance
from gpusim.perf.timer import KernelTimer, OpTime, RooflineTimer, TimingContext
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


class GenerationParts(NamedTuple):
    """What a step that only generates costs apart from its context (`StepCostModel._generation_parts`)."""

    seqs: int
    """Decode sequences as the kernels run them (padded to a captured CUDA graph)."""
    rank_seqs: int
    """The busiest attention-DP rank's, likewise (0: an even split)."""
    before_s: float
    """Seconds of the T-dependent ops, overheads and LM head (`_before_attention`)."""
    draft_s: float
    joules: float
    """Tensor-core joules of the same ops (`_joules_before_attention`; 0 without a power limit)."""
    draft_joules: float
    host_s: float


@dataclass(frozen=True)
class StepBreakdown:
    """Where the time of a step goes. compute + memory + communication + overhead = total = Σ by_op."""

    total_s: float
    compute_s: float
    """Compute-bound kernels, and the power limit's stretch of the step (by_op `power_limit`)."""
    memory_s: float
    communication_s: float
    overhead_s: float
    """Kernel launches, the fixed per-step overhead and the per-sequence host time."""
    by_op: dict[str, float]


def expert_imbalance(model: ModelSpec, dep: Deployment, sw: SoftwareProfile) -> float:
    """Busiest EP rank's expert load over the mean: the deployment's value; without a load balancer
    (`Deployment.expert_balancer`), the model's measured popularity at this width (`ops.popularity_imbalance`);
    else the profile's (balanced), lowered by redundant experts. Rule (grade D, after DeepSeek's EPLB, which
    replicates the hottest experts): the excess over 1 shrinks as 1 / (1 + r·ep/E) with r redundant experts per
    layer, ep ranks, E experts."""
    moe, base = model.moe, dep.expert_imbalance or sw.moe_imbalance.value
    if moe is None:
        return base
    if not (dep.expert_imbalance or dep.expert_balancer) and moe.unbalanced_load is not None and dep.ep > 1:
        return popularity_imbalance(moe.unbalanced_load, moe.num_experts, dep.ep)
    if not dep.redundant_experts:
        return base
    return 1 + (base - 1) / (1 + dep.redundant_experts * dep.ep / moe.num_experts)


class StepCostModel:
    """Seconds per step of one instance of `model` deployed as `deployment` on `hardware`, each kernel timed
    by `timer` (a `KernelTimer` factory; default the roofline, `timer.RooflineTimer`)."""

    def __init__(
        self, hardware: Hardware, model: ModelSpec, deployment: Deployment,
        software: SoftwareProfile | None = None, timer: Callable[[TimingContext], KernelTimer] = RooflineTimer,
    ) -> None:
        sw = software if software is not None else load_software(deployment.software)
        sw = sw.for_architecture(hardware.gpu.architecture)
        self.hardware, self.model, self.deployment, self.software = hardware, model, deployment, sw
        self.imbalance = expert_imbalance(model, deployment, sw)
        self.ops: ModelOps = build_ops(model, deployment, self.imbalance, sw.lm_head.ways(deployment))
        self.timer: KernelTimer = timer(TimingContext(hardware, model, deployment, sw, self.ops, self.imbalance))
        self._host_seq = sw.value("host_seq_us") * 1e-6 if deployment.frontend == "http" else 0.0
        self._graphs = sw.graph_batches
        self._pads_tokens = self._graphs is not None and self._graphs.token_sizes is not None
        """Steps with prompt tokens pad to a compiled token count (XLA); False on CUDA engines."""
        self._step_overhead = (sw.step_overhead_us.value + sw.value("layer_overhead_us") * model.num_layers) * 1e-6
        self._cache: dict[int, float] = {}
        """Seconds of the ops that see every token of the step, per token count T."""
        self._rank_cache: dict[int, float] = {}
        """Seconds of the ops split over attention-DP ranks, per token count of the busiest rank."""
        self._lm_cache: dict[int, OpTime] = {}
        """The LM head's time per sampled rows."""
        self._generation_cache: dict[tuple[int, int], GenerationParts] = {}
        """`_generation_parts` per (decode sequences, busiest rank's sequences)."""

        a = self.ops.attention
        self._full_layers = a.full_layers
        self._sliding_layers = a.sliding_layers
        self._window = a.window
        self._dp = a.dp
        fixed = self.timer.attention_fixed()
        self._attn_launch = fixed.decode_launch
        self._prefill_attn_launch = fixed.prefill_launch
        self._linear_token_s = fixed.linear_token_s
        self._state_s = fixed.linear_seq_s
        self._decode_bound = fixed.decode_bound
        self._pair_rate = self.timer.prefill_attention
        self._kv_rate = self.timer.decode_attention

        token_ops = (*self.ops.token_ops, *self.ops.comm_ops)
        self._shared_ops = tuple(op for op in token_ops if op.split == 1)
        self._split_ops = tuple(op for op in token_ops if op.split > 1)

        # MTP: each decode sequence verifies 1 + depth tokens; the draft module runs `depth` times.
        self._depth = deployment.mtp.depth if deployment.mtp else 0
        self._verify = 1 + self._depth
        self._layers = model.num_layers

        # The power limit: tensor-core joules of a step over the TDP bound its time from below.
        # Every op's FLOPs are linear in its tokens, so its joules are a rate per token: the ops that see all
        # T tokens, and those split over attention-DP ranks per token of the busiest rank.
        self._joules = hardware.tensor_joules_per_flop()
        self._power_w = hardware.gpu.tdp_w.value
        if self._joules:
            def per_token(ops: tuple[GemmOp | MoEOp | CommOp, ...]) -> float:
                return sum(op.count * op.flops(op.split) * self._joules[op.dtype]
                           for op in ops if not isinstance(op, CommOp))

            self._token_j, self._rank_token_j = per_token(self._shared_ops), per_token(self._split_ops)
            self._pair_j = a.prefill_flops_per_pair * self._joules[a.dtype]
            self._kv_j = a.decode_flops_per_kv * self._verify * self._joules[a.dtype]
            lm = self.ops.lm_head
            self._lm_j = lm.flops_per_token / lm.split * self._joules[lm.dtype]  # per row, its copy's share

    # ---- the T-dependent part ---------------------------------------------------------------
    @staticmethod
    def _op_tokens(op: GemmOp | MoEOp | CommOp, t: int, rank_t: int | None) -> int:
        """The step size `op` is evaluated at: T, or for an op split over attention-DP ranks the count whose
        even split is the busiest rank's `rank_t` tokens (default: an even split of T)."""
        return t if op.split == 1 or rank_t is None else rank_t * op.split

    def _op_item(self, op: GemmOp | MoEOp | CommOp, n: int) -> tuple[str, float, str, float]:
        """(name, seconds without launches, bound, launch seconds) of `op` evaluated at a step of `n` tokens."""
        timer = self.timer
        if isinstance(op, CommOp):
            timed = {"allreduce": timer.allreduce, "alltoall": timer.alltoall, "p2p": timer.p2p}[op.kind](op, n)
        elif isinstance(op, MoEOp):
            timed = timer.moe(op, n)
        else:
            timed = timer.gemm(op, n)
        return op.name, timed.seconds, timed.bound, timed.launch

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

    def _step_tokens(self, b: BatchShape) -> tuple[int, int]:
        """Tokens the T-dependent ops compute, on the instance and on its busiest attention-DP rank: a step with
        prompt tokens padded to the engine's next compiled token count (`GraphBatches.tokens`), the rank's
        share growing with it."""
        t = b.prefill_tokens + b.decode_seqs * self._verify
        if t <= 0:
            return 0, 0
        rank_t = self._rank_tokens(b, t)
        if self._pads_tokens and b.prefill_tokens:
            padded = self._graphs.tokens(t)
            if padded != t:
                rank_t = -(-rank_t * padded // t)
                t = padded
        return t, rank_t

    def _graph_batch(self, b: BatchShape) -> BatchShape:
        """`b` as its kernels run it: a generation-only step padded to its CUDA graph's batch size per rank
        (`GraphBatches.rows`; host work stays with the real sequences)."""
        if self._graphs is None or b.prefill_tokens or not b.decode_seqs:
            return b
        rank = b.attn_rank_seqs or -(-b.decode_seqs // self._dp)
        rows = self._graphs.rows(rank)
        if rows == rank:
            return b
        return replace(b, decode_seqs=rows * self._dp, attn_rank_seqs=rows if b.attn_rank_seqs else 0)

    # ---- the interface ----------------------------------------------------------------------
    def step_time(self, b: BatchShape) -> float:
        """Seconds for one step of one instance (hot path). A step that only generates reads what does not depend on
        its context from a cache per (sequences, busiest rank's sequences), `_generation_parts`, and adds its
        attention; any other step is costed whole (`_any_step_time`). Both give the same seconds to the bit."""
        if b.prefill_tokens or b.prefill_seqs or not b.decode_seqs:
            return self._any_step_time(b)
        key = (b.decode_seqs, b.attn_rank_seqs)
        parts = self._generation_cache.get(key)
        if parts is None:
            parts = self._generation_cache[key] = self._generation_parts(b)
        seqs, rank_seqs, s, draft, j, draft_j, host = parts
        s += self._decode_attention(seqs, b.decode_context, rank_seqs, b.attn_rank_context) + self._attn_launch
        s += draft
        if self._joules:
            j += self._decode_kv(seqs, b.decode_context, rank_seqs, b.attn_rank_context) * self._kv_j
            s = max(s, (j + draft_j) / self._power_w)
        return s + host

    def _generation_parts(self, b: BatchShape) -> GenerationParts:
        """What a step that only generates costs apart from its context: its sequences and busiest rank's as its
        kernels run them (`_graph_batch`), the seconds before attention (`_before_attention`), MTP drafting, the
        joules of both and the host work."""
        p = self._graph_batch(b)
        t, rank_t = self._step_tokens(p)
        draft = self._draft(p.decode_seqs) if self._depth else 0.0
        j = self._joules_before_attention(p, t, rank_t) if self._joules else 0.0
        draft_j = self._draft_joules(p.decode_seqs) if self._joules and self._depth else 0.0
        return GenerationParts(p.decode_seqs, p.attn_rank_seqs, self._before_attention(p, t, rank_t), draft, j, draft_j,
                               self._host_time(b.decode_seqs))

    def _any_step_time(self, b: BatchShape) -> float:
        """`step_time` of any step, costed whole."""
        seqs = b.decode_seqs + b.prefill_seqs
        b = self._graph_batch(b)
        t, rank_t = self._step_tokens(b)
        if t <= 0:
            return 0.0
        s = self._gpu_time(b, t, rank_t)
        if self._joules:
            s = max(s, self._step_joules(b, t, rank_t) / self._power_w)
        if self._host_seq:
            s += self._host_time(seqs)
        return s

    def _before_attention(self, b: BatchShape, t: int, rank_t: int) -> float:
        """The T-dependent ops, the fixed overheads and the LM head: the step's kernels but attention and drafting."""
        s = self._tokens_time(t, rank_t) + self._step_overhead
        r = b.decode_seqs * self._verify + b.prefill_seqs
        if r:
            lm = self._lm_head(r)
            s += lm.seconds + lm.launch
        return s

    def _gpu_time(self, b: BatchShape, t: int, rank_t: int) -> float:
        """The step's kernels and fixed overheads at full clocks (no power limit, no host work); `rank_t` tokens on
        the busiest attention-DP rank."""
        s = self._before_attention(b, t, rank_t)
        if b.prefill_attn_pairs:
            s += self._prefill_attention(b) + self._prefill_attn_launch
        if b.decode_seqs:
            s += self._decode_attention(b.decode_seqs, b.decode_context, b.attn_rank_seqs,
                                        b.attn_rank_context) + self._attn_launch
            if self._depth:
                s += self._draft(b.decode_seqs)
        return s

    # ---- the power limit --------------------------------------------------------------------------
    def _joules_before_attention(self, b: BatchShape, t: int, rank_t: int) -> float:
        """Tensor-core joules of the T-dependent ops and the LM head on the busiest GPU."""
        j = t * self._token_j + rank_t * self._rank_token_j
        return j + (b.decode_seqs * self._verify + b.prefill_seqs) * self._lm_j

    def _draft_joules(self, seqs: int) -> float:
        """Tensor-core joules of MTP drafting over `seqs` decode rows."""
        layer = (seqs * self._token_j + self._busiest(seqs, seqs) * self._rank_token_j) / self._layers
        return self._depth * (layer + seqs * self._lm_j)

    def _step_joules(self, b: BatchShape, t: int, rank_t: int) -> float:
        """Tensor-core energy of a step on the busiest GPU: each kernel's FLOPs times joules per FLOP of its
        precision (GEMMs, experts, LM head, attention, MTP drafting)."""
        j = self._joules_before_attention(b, t, rank_t)
        if b.prefill_attn_pairs:
            j += self._attention_work(b.prefill_attn_pairs, b.prefill_tokens, b.prefill_seqs or 1) * self._pair_j
        if b.decode_seqs:
            j += self._decode_kv(b.decode_seqs, b.decode_context, b.attn_rank_seqs, b.attn_rank_context) * self._kv_j
            if self._depth:
                j += self._draft_joules(b.decode_seqs)
        return j

    def _host_time(self, seqs: int) -> float:
        """Host work of a step: host_seq_us per sequence of the busiest attention-DP rank (one host each)."""
        return self._host_seq * self._busiest(seqs, seqs) if seqs else 0.0

    def _lm_head(self, rows: int) -> OpTime:
        """The LM head over `rows` sampled rows (cached per rows)."""
        timed = self._lm_cache.get(rows)
        if timed is None:
            timed = self._lm_cache[rows] = self.timer.lm_head(rows)
        return timed

    def _draft(self, seqs: int) -> float:
        """MTP drafting: `depth` sequential passes of one layer and the LM head over the decode rows."""
        layer = self._tokens_time(seqs, -(-seqs // self._dp)) / self._layers
        lm = self._lm_head(seqs)
        return self._depth * (layer + lm.seconds + lm.launch)

    def _prefill_attention(self, b: BatchShape) -> float:
        """Σ layers · causal pairs · seconds per pair, slower for short keys per query (the length curve of
        `attention_prefill_keys_half`); sliding layers cap pairs at tokens · window; linear-attention layers
        are linear in the prompt tokens."""
        pairs = self._attention_work(b.prefill_attn_pairs, b.prefill_tokens, b.prefill_seqs or 1)
        pair_s = self._pair_rate(b.prefill_seqs or 1, b.prefill_tokens, b.prefill_attn_pairs)
        linear = 0.0
        if self._linear_token_s:
            linear = self._linear_token_s * self._busiest(b.prefill_tokens, b.prefill_seqs or 1)
        return pairs * pair_s + linear

    def _decode_attention(self, seqs: int, context: float, rank_seqs: int, rank_context: float) -> float:
        """Σ layers · KV tokens read · seconds per KV token; sliding layers cap at seqs · window;
        linear-attention layers read and write a fixed state per sequence. `seqs` decode sequences read `context`
        KV tokens; with attention DP the busiest rank's (`rank_seqs`, `rank_context`) set the time when the engine
        tracks ranks (`rank_seqs` > 0)."""
        kv = self._decode_kv(seqs, context, rank_seqs, rank_context)
        if self._dp > 1 and rank_seqs:
            kv_s = self._kv_rate(rank_seqs, rank_context / rank_seqs)
            return kv * kv_s + rank_seqs * self._state_s
        kv_s = self._kv_rate(-(-seqs // self._dp), context / seqs)
        return kv * kv_s + self._busiest(seqs, seqs) * self._state_s

    def _decode_kv(self, seqs: int, context: float, rank_seqs: int, rank_context: float) -> float:
        """KV tokens the busiest GPU's decode attention reads over all layers (sliding layers capped)."""
        if self._dp > 1 and rank_seqs:
            return self._attention_work(rank_context, rank_seqs, 1)
        return self._attention_work(context, seqs, seqs)

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
        host = self._host_time(b.decode_seqs + b.prefill_seqs)
        b = self._graph_batch(b)
        t, rank_t = self._step_tokens(b)
        if t <= 0:
            return StepBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, {})
        parts = {"compute": 0.0, "memory": 0.0, "communication": 0.0}
        by_op: dict[str, float] = {}
        launches = 0.0
        items = self._token_items(t, rank_t)
        r = b.decode_seqs * self._verify + b.prefill_seqs
        if r:
            items.append(("lm_head", *self._lm_head(r)))
        if b.prefill_attn_pairs:
            items.append(("attention_prefill", self._prefill_attention(b), "compute", self._prefill_attn_launch))
        if b.decode_seqs:
            attention = self._decode_attention(b.decode_seqs, b.decode_context, b.attn_rank_seqs, b.attn_rank_context)
            items.append(("attention_decode", attention, self._decode_bound, self._attn_launch))
            if self._depth:
                items.append(("mtp_draft", self._draft(b.decode_seqs), "compute", 0.0))
        for name, sec, bound, launch in items:
            parts[bound] += sec
            launches += launch
            by_op[name] = by_op.get(name, 0.0) + sec + launch
        by_op["step_overhead"] = self._step_overhead
        limit = self._step_joules(b, t, rank_t) / self._power_w - self._gpu_time(b, t, rank_t) if self._joules else 0.0
        if limit > 0:  # the clocks drop until the step draws the TDP: the tensor work takes longer
            by_op["power_limit"] = limit
            parts["compute"] += limit
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
