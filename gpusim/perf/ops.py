"""A model as a list of operations, each with its FLOPs and HBM bytes on ONE GPU of an instance.

Conventions (docs/design.md: Modelling decisions, Formulas):
- Tensor parallelism `tp` splits attention heads and FFN width; KV heads fewer than `tp` are
  replicated (ceil(kv_heads / tp) per GPU). Expert parallelism `ep` splits the routed experts `ep`
  ways and each expert `tp/ep` ways, so experts spread over all `tp` GPUs of a stage.
- Attention data parallelism replicates the attention weights; each of the `tp` ranks runs the
  attention projections and attention for its own sequences (the busiest rank gets ceil(T / tp)
  tokens). FFN/MoE layers still see all T tokens of the instance.
- Weight bytes per value: bf16 2, fp8 1, fp4 (NVFP4) 0.5 + 1/16 (one fp8 scale per 16 values).
  GEMMs compute at the wider of the weight and activation precisions; the embedding, LM head and
  router stay in bf16 (quantised checkpoints exclude them).
- MoE weights read in a step count only the experts hit, on the busiest of the `ep` ranks: the expected
  maximum over ranks of Binomial(ceil(E_local), 1 − (1 − k/E)^T) (docs/design.md: Formulas).
- Attention: prefill FLOPs per causal query-key pair and layer are 2·heads·(qk_dim + v_dim)
  (= 4·heads·head_dim for MHA/GQA; MLA with its qk/v head dims); decode reads
  context · KV bytes per token per layer (MLA latent, absorbed: 2·heads·(2·kv_lora + rope) FLOPs).
  Sliding-window layers see at most `sliding_window` keys per query. Linear-attention (Gated
  DeltaNet) layers have their own projections and cost per prompt token (chunked delta rule) and,
  in decode, one read and write of their fixed per-sequence state.
- Activation traffic of a GEMM: input at the activation precision, output in bf16; SwiGLU FFNs
  write and re-read their intermediate at the activation precision (fused activation). Norms and
  rotary embeddings are not modelled as separate kernels (TensorRT-LLM fuses them).
- With pipeline parallelism the ops are those of the whole model on one GPU's TP/EP share: the
  stages run one after another (sum of stages), so the per-step cost is the sum over all layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Dtype
from gpusim.specs.model import ExpertLoad, ModelSpec

NVFP4_BYTES = 0.5 + 1 / 16
DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp8": 1.0, "fp4": NVFP4_BYTES}
"""Bytes per value stored at each precision (NVFP4: 4-bit values + one fp8 scale per 16)."""
_ORDER: list[Dtype] = ["fp4", "fp8", "bf16"]
BF16 = 2.0


def wider(a: Dtype, b: Dtype) -> Dtype:
    """The wider of two precisions (the GEMM compute precision of weights `a` times activations `b`)."""
    return a if _ORDER.index(a) >= _ORDER.index(b) else b


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def expected_max_normal(n: int) -> float:
    """E[max of n standard normal draws] by Blom's approximation (0.589 at 2 against the exact 1/√π = 0.564, within
    1% from 8 draws on); 0 at one draw."""
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n > 1 else 0.0


def popularity_imbalance(load: ExpertLoad, experts: int, ep: int) -> float:
    """The busiest of `ep` ranks' expert load over the mean, without a load balancer: each rank holds experts/ep
    experts whose loads vary with one coefficient of variation cv, so the busiest rank's sum exceeds the mean by
    about cv · √(ep / experts) · E[max of ep normals]; cv from the model's measurement at its own width
    (`ExpertLoad`). DeepSeek-R1 (2.56 at EP32): 1.28 at EP4, 1.54 at EP8, 1.94 at EP16."""
    def spread(n: int) -> float:
        return math.sqrt(n / experts) * expected_max_normal(n)
    cv = (load.busiest_over_mean.value - 1) / spread(load.ep)
    return 1 + cv * spread(ep)


@lru_cache(maxsize=4096)
def expected_max_binomial(n: int, p: float, draws: int) -> float:
    """E[max of `draws` independent Binomial(n, p) counts] = Σ_{x<n} (1 − F(x)^draws); n·p at one draw."""
    if draws <= 1 or p <= 0.0 or p >= 1.0:
        return n * min(max(p, 0.0), 1.0)
    total, cdf = 0.0, 0.0
    for x in range(n):
        cdf += math.comb(n, x) * p**x * (1.0 - p) ** (n - x)
        total += 1.0 - min(cdf, 1.0) ** draws
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmOp:
    """A dense matrix multiply (or a memory-bound kernel with `flops_per_token` 0) run `count` times a step."""

    name: str
    count: int
    """Occurrences per step over the whole instance (e.g. layers)."""
    weight_bytes: float
    """Weights one GPU reads per occurrence."""
    flops_per_token: float
    io_bytes_per_token: float
    dtype: Dtype
    split: int = 1
    """Tokens are divided over this many ranks (attention DP); the busiest gets ceil(T / split)."""
    kernels: int = 1
    shapes: tuple[tuple[int, int], ...] = ()
    """(n, k) of each GEMM kernel of one occurrence (for the measured-table timing; empty: not a GEMM)."""

    def tokens(self, t: int) -> int:
        return ceil_div(t, self.split)

    def gemm_m(self, t: int) -> float:
        return float(self.tokens(t))

    def flops(self, t: int) -> float:
        return self.tokens(t) * self.flops_per_token

    def bytes(self, t: int) -> float:
        return self.weight_bytes + self.tokens(t) * self.io_bytes_per_token


@dataclass(frozen=True, slots=True, kw_only=True)
class MoEOp:
    """Routed experts of one MoE layer on one GPU (grouped GEMMs: gate/up and down)."""

    name: str
    count: int
    num_experts: int
    top_k: int
    experts_local: float
    """Routed experts this GPU holds a share of (E / ep)."""
    expert_bytes: float
    """Bytes of this GPU's share of one expert (expert params · bytes · ep / tp)."""
    flops_per_assignment: float
    """FLOPs per (token, expert) assignment on this GPU: 2 · expert params / tp."""
    io_bytes_per_assignment: float
    ep: int
    imbalance: float
    """Busiest EP rank over the mean (applied only when ep > 1)."""
    dtype: Dtype
    inter_local: float
    """Expert intermediate size on this GPU (intermediate · ep / tp): sets the grouped GEMMs' efficiency."""
    kernels: int = 2
    split: int = 1
    """Routed experts see every token of the step (never split over attention-DP ranks)."""

    def hit_fraction(self, t: int) -> float:
        """Expected fraction of experts hit by t tokens routed top-k of E uniformly: 1 − (1 − k/E)^t."""
        return 1.0 - (1.0 - self.top_k / self.num_experts) ** t

    def distinct_local(self, t: int) -> float:
        """Expected distinct experts hit on the busiest EP rank, whose weight reads the step waits for: the
        maximum over `ep` ranks of Binomial(ceil(E_local), 1 − (1 − k/E)^t), each expert hit independently
        (docs/design.md: Formulas); E_local · (1 − (1 − k/E)^t) without expert parallelism."""
        if self.ep <= 1:
            return self.experts_local * self.hit_fraction(t)
        return expected_max_binomial(math.ceil(self.experts_local - 1e-9), self.hit_fraction(t), self.ep)

    def gemm_m(self, t: int) -> float:
        """Tokens per hit expert: t·k / (E · hit fraction); 1 at t = 1."""
        hit = self.hit_fraction(t)
        return t * self.top_k / (self.num_experts * hit) if hit > 0 else 0.0

    def _load(self) -> float:
        return self.imbalance if self.ep > 1 else 1.0

    def flops(self, t: int) -> float:
        return t * self.top_k * self.flops_per_assignment * self._load()

    def bytes(self, t: int) -> float:
        rows = t * self.top_k / self.ep * self._load()
        return self.distinct_local(t) * self.expert_bytes + rows * self.io_bytes_per_assignment


@dataclass(frozen=True, slots=True, kw_only=True)
class CommOp:
    """A collective run `count` times a step: per-token bytes over a group of GPUs."""

    name: str
    kind: Literal["allreduce", "alltoall", "p2p"]
    count: int
    group: int
    bytes_per_token: float
    """All-reduce / p2p: bytes per token of the message. All-to-all: hidden · dtype bytes."""
    split: int = 1
    """Tokens one rank holds: ceil(T / split)."""
    top_k: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionOp:
    """Attention of all layers, per GPU; linear in causal pairs (prefill) and KV tokens read (decode)."""

    full_layers: int
    sliding_layers: int
    window: int
    prefill_flops_per_pair: float
    """Per layer, per causal query-key pair, on one GPU."""
    prefill_exps_per_pair: float
    """Softmax exponentials per layer and causal pair on one GPU: one per query head."""
    decode_flops_per_kv: float
    decode_bytes_per_kv: float
    """Per layer, per KV token read, on one GPU."""
    dtype: Dtype
    dp: int
    """Attention-DP ranks (1 without attention DP)."""
    linear_layers: int = 0
    linear_flops_per_token: float = 0.0
    """Linear attention (chunked delta rule), per layer, per prompt token, on one GPU."""
    linear_state_bytes: float = 0.0
    """Linear attention decode: recurrent and convolution state one GPU reads and writes per layer and
    sequence."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOps:
    """Everything the step cost model needs, per GPU of one instance."""

    token_ops: tuple[GemmOp | MoEOp, ...]
    """Ops whose cost depends only on T = tokens in the step."""
    comm_ops: tuple[CommOp, ...]
    lm_head: GemmOp
    """Runs on the rows that sample a token (decode sequences + prefill sequences)."""
    attention: AttentionOp


def attention_params_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """Attention projection weights one GPU holds: heads split by tp (KV heads replicated below tp;
    MLA down-projections replicated), all of them under attention DP."""
    tp = dep.attention_tp
    h, n = model.hidden_size, model.num_attention_heads
    if model.mla is None:
        d = model.head_dim
        q = ceil_div(n, tp) * (3 if model.attention_output_gate else 2)  # q (and its gate) in, o out
        return h * d * (q + 2 * ceil_div(model.num_kv_heads, tp))
    m = model.mla
    down = h * (m.kv_lora_rank + m.qk_rope_head_dim) + (h * m.q_lora_rank if m.q_lora_rank else 0)
    return down + (model.attention_params - down) / tp


def linear_params_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """One linear-attention layer's weights on one GPU: heads split by tp (all of them under attention DP)."""
    la = model.linear_attention
    return 0.0 if la is None else la.params(model.hidden_size) / dep.attention_tp


def mixer_params_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """Token-mixing weights of all layers on one GPU: softmax attention plus linear attention."""
    return (model.num_softmax_layers * attention_params_per_gpu(model, dep)
            + model.num_linear_layers * linear_params_per_gpu(model, dep))


def _linear_attention_ops(model: ModelSpec, dep: Deployment, gd: Dtype, ab: float) -> list[GemmOp]:
    la = model.linear_attention
    if la is None:
        return []
    tp = dep.attention_tp
    dp = dep.attention_ranks
    wb, h = DTYPE_BYTES[dep.weights], model.hidden_size
    v = la.num_value_heads * la.value_head_dim / tp
    out_params = v * h
    in_params = linear_params_per_gpu(model, dep) - out_params
    return [
        GemmOp(name="linear_in_proj", count=la.layers, weight_bytes=in_params * wb, flops_per_token=2 * in_params,
               io_bytes_per_token=h * ab + in_params / h * BF16, dtype=gd, split=dp,
               shapes=((round(in_params / h), h),)),
        GemmOp(name="linear_out_proj", count=la.layers, weight_bytes=out_params * wb, flops_per_token=2 * out_params,
               io_bytes_per_token=v * ab + h * BF16, dtype=gd, split=dp, shapes=((h, round(v)),)),
    ]


def _attention_ops(model: ModelSpec, dep: Deployment, gd: Dtype, ab: float) -> list[GemmOp]:
    tp = dep.attention_tp
    dp = dep.attention_ranks
    wb = DTYPE_BYTES[dep.weights]
    h, n, L = model.hidden_size, model.num_attention_heads, model.num_softmax_layers
    nq = ceil_div(n, tp)
    if model.mla is None:
        d = model.head_dim
        o_params = nq * d * h
        qkv_out = (nq * (2 if model.attention_output_gate else 1) + 2 * ceil_div(model.num_kv_heads, tp)) * d
        o_in = nq * d
        in_shapes: tuple[tuple[int, int], ...] = ((qkv_out, h),)
    else:
        m = model.mla
        o_params = n * m.v_head_dim * h / tp
        qkv_out = nq * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.kv_lora_rank + m.qk_rope_head_dim
        o_in = nq * m.v_head_dim
        q_head = nq * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        q = ((m.q_lora_rank, h), (q_head, m.q_lora_rank)) if m.q_lora_rank else ((q_head, h),)
        in_shapes = (*q, (m.kv_lora_rank + m.qk_rope_head_dim, h),
                     (nq * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank))
    in_params = attention_params_per_gpu(model, dep) - o_params
    return [
        GemmOp(name="qkv_proj", count=L, weight_bytes=in_params * wb, flops_per_token=2 * in_params,
               io_bytes_per_token=h * ab + qkv_out * BF16, dtype=gd, split=dp, shapes=in_shapes),
        GemmOp(name="o_proj", count=L, weight_bytes=o_params * wb, flops_per_token=2 * o_params,
               io_bytes_per_token=o_in * ab + h * BF16, dtype=gd, split=dp, shapes=((h, o_in),)),
    ]


def _ffn(name: str, count: int, model: ModelSpec, width_gpu: float, wb: float, ab: float, gd: Dtype) -> GemmOp:
    """SwiGLU FFN (gate/up and down GEMMs) of inner width `width_gpu` on one GPU."""
    h = model.hidden_size
    params = 3 * h * width_gpu
    io = h * (ab + BF16) + 2 * width_gpu * ab
    w = round(width_gpu)
    return GemmOp(name=name, count=count, weight_bytes=params * wb, flops_per_token=2 * params, io_bytes_per_token=io,
                  dtype=gd, kernels=2, shapes=((2 * w, h), (h, w)))


def build_ops(
    model: ModelSpec, dep: Deployment, moe_imbalance: float = 1.0, lm_head_ways: int | None = None,
) -> ModelOps:
    """The per-GPU ops of `model` under `dep` (see the module docstring for the conventions); the LM head split
    `lm_head_ways` ways (default tp: `LmHeadSplit.ways`), its rows over the tp / lm_head_ways ranks that hold a copy."""
    tp, ep, pp = dep.tp, dep.ep, dep.pp
    dp = dep.attention_ranks
    wb, ab, kvb = DTYPE_BYTES[dep.weights], DTYPE_BYTES[dep.activations], DTYPE_BYTES[dep.kv_cache]
    gd = wider(dep.weights, dep.activations)
    h, L, V = model.hidden_size, model.num_layers, model.vocab_size

    ops: list[GemmOp | MoEOp] = [GemmOp(name="embedding", count=1, weight_bytes=0.0, flops_per_token=0.0,
                                        io_bytes_per_token=2 * h * BF16, dtype="bf16")]
    ops += _attention_ops(model, dep, gd, ab)
    ops += _linear_attention_ops(model, dep, gd, ab)
    dense_layers, moe_layers = model.num_dense_layers, model.num_moe_layers
    if dense_layers and model.intermediate_size:
        ops.append(_ffn("ffn", dense_layers, model, model.intermediate_size / tp, wb, ab, gd))
    moe = model.moe
    if moe is not None and moe_layers:
        e = moe.num_experts
        ops.append(GemmOp(name="router", count=moe_layers, weight_bytes=h * e * BF16, flops_per_token=2 * h * e,
                          io_bytes_per_token=h * BF16 + e * 4, dtype="bf16", split=dp, shapes=((e, h),)))
        ie_gpu = moe.expert_intermediate_size * ep / tp
        moe_act = wider(dep.activations, moe.min_activations or dep.activations)
        moe_gd, moe_ab = wider(dep.weights, moe_act), DTYPE_BYTES[moe_act]
        ops.append(MoEOp(
            name="moe_experts", count=moe_layers, num_experts=e, top_k=moe.top_k, experts_local=e / ep,
            expert_bytes=model.expert_params * wb * ep / tp, flops_per_assignment=2 * model.expert_params / tp,
            io_bytes_per_assignment=h * (moe_ab + BF16) + 2 * ie_gpu * moe_ab, ep=ep, imbalance=moe_imbalance,
            dtype=moe_gd, inter_local=ie_gpu,
        ))
        if moe.shared_experts:
            width = moe.shared_experts * moe.expert_intermediate_size / tp
            ops.append(_ffn("shared_experts", moe_layers, model, width, wb, ab, gd))

    comm: list[CommOp] = []
    if tp > 1 and not dep.attention_dp:
        comm.append(CommOp(name="tp_allreduce", kind="allreduce", count=2 * L, group=tp, bytes_per_token=h * BF16))
    elif tp > 1:
        # Attention DP: dense FFNs gather all tokens and scatter the results (all-gather + reduce-scatter,
        # the volume of one all-reduce); MoE layers dispatch and combine with all-to-all when ep == tp.
        if dense_layers:
            comm.append(CommOp(name="dp_gather_scatter", kind="allreduce", count=dense_layers, group=tp,
                               bytes_per_token=h * BF16))
        if moe_layers and ep == tp:
            k = moe.top_k if moe else 1
            comm.append(CommOp(name="ep_dispatch", kind="alltoall", count=moe_layers, group=ep, bytes_per_token=h * ab,
                               split=tp, top_k=k))
            comm.append(CommOp(name="ep_combine", kind="alltoall", count=moe_layers, group=ep,
                               bytes_per_token=h * BF16, split=tp, top_k=k))
        elif moe_layers:
            comm.append(CommOp(name="moe_gather_scatter", kind="allreduce", count=moe_layers, group=tp,
                               bytes_per_token=h * BF16))
    if pp > 1:
        comm.append(CommOp(name="pp_send_recv", kind="p2p", count=pp - 1, group=2, bytes_per_token=h * BF16))

    ways = lm_head_ways or tp
    lm_head = GemmOp(name="lm_head", count=1, weight_bytes=V * h / ways * BF16, flops_per_token=2 * h * V / ways,
                     io_bytes_per_token=h * BF16 + V / ways * 4, dtype="bf16", split=tp // ways,
                     shapes=((ceil_div(V, ways), h),))
    return ModelOps(token_ops=tuple(ops), comm_ops=tuple(comm), lm_head=lm_head,
                    attention=_attention(model, dep, kvb))


def _attention(model: ModelSpec, dep: Deployment, kvb: float) -> AttentionOp:
    tp = dep.attention_tp
    n = model.num_attention_heads
    nq = ceil_div(n, tp)
    if model.mla is None:
        d = model.head_dim
        pair = 4 * nq * d
        dec_flops = 4 * nq * d
        dec_bytes = 2 * ceil_div(model.num_kv_heads, tp) * d * kvb
    else:
        m = model.mla
        pair = 2 * nq * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        dec_flops = 2 * nq * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        dec_bytes = model.kv_bytes_per_token_per_layer(kvb)  # latent replicated across TP ranks
    adt: Dtype = wider(dep.kv_cache, dep.activations)
    if adt == "fp4":
        adt = "fp8"  # no FP4 attention kernels
    return AttentionOp(
        full_layers=model.full_attention_layers,
        sliding_layers=model.sliding_layers,
        window=model.sliding_window or 0,
        prefill_flops_per_pair=pair,
        prefill_exps_per_pair=nq,
        decode_flops_per_kv=dec_flops,
        decode_bytes_per_kv=dec_bytes,
        dtype=adt,
        dp=dep.attention_ranks,
        **_linear_attention(model, tp),
    )


def _linear_attention(model: ModelSpec, tp: int) -> dict[str, float]:
    """Gated DeltaNet per layer on one GPU (value heads split by tp). Prefill, chunked delta rule with
    64-token chunks: per token, the state update and readout (4·heads·dk·dv) and the intra-chunk
    attention (2·64·heads·(dk + dv)). Decode: read and write the state once per token."""
    la = model.linear_attention
    if la is None:
        return {}
    heads = ceil_div(la.num_value_heads, tp)
    dk, dv = la.key_head_dim, la.value_head_dim
    share = heads / la.num_value_heads
    return {"linear_layers": la.layers,
            "linear_flops_per_token": 4 * heads * dk * dv + 2 * 64 * heads * (dk + dv),
            "linear_state_bytes": 2 * la.state_bytes_per_layer * share}


__all__ = [
    "DTYPE_BYTES", "NVFP4_BYTES", "AttentionOp", "CommOp", "GemmOp", "MoEOp", "ModelOps",
    "attention_params_per_gpu", "build_ops", "linear_params_per_gpu",
    "mixer_params_per_gpu", "wider",
]
