"""Where the HBM of one GPU goes: weights, activation workspace, and the KV cache that fits in the rest.

Weights per GPU under TP t, EP e, PP p (docs/design.md: Formulas): attention and dense FFN layers / (t·p) (attention
DP replicates attention weights: / p); routed experts split e ways and each expert t/e ways, i.e.
/ (t·p); shared experts / (t·p); router replicated; embedding and LM head (bf16) / t, on the first and
last stage (the LM head / attention TP where the engine keeps a copy per attention-DP rank, `LmHeadSplit`).
Layers are spread evenly over stages (the average stage; uneven splits are ignored).

KV cache per GPU per token (full-attention layers of one stage): GQA heads split by tp
(ceil(kv_heads / tp): replicated when kv_heads < tp); the MLA latent is replicated on every TP rank.
With attention DP each rank keeps the whole KV of its own sequences, so the instance holds tp times
as many tokens. Sliding-window layers hold at most the window per sequence and are not counted.
Linear-attention layers keep a fixed state per sequence instead: slots for max_batch_size sequences
are reserved before the KV cache is sized.

Workspace (an estimate of TensorRT-LLM's activation buffers for max_num_tokens tokens): per token
4 hidden-size bf16 buffers (residual, normed input, attention output, FFN output) plus the widest
per-GPU FFN intermediate (gate and up, bf16: 2 · width · 2 bytes; MoE: top_k expert rows), plus fp32
logits for max_batch_size rows of vocab / tp.

The KV pool is what the engine's rule (`SoftwareProfile.kv_memory`) grants: TensorRT-LLM takes a
fraction of the HBM left after weights and workspace, vLLM a fraction of all HBM less weights and
workspace.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusim.errors import InputError
from gpusim.perf.ops import BF16, DTYPE_BYTES, ceil_div, mixer_params_per_gpu
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import SoftwareProfile, load_software

GiB = 2**30


@dataclass(frozen=True)
class MemoryPlan:
    """HBM use of one GPU and the KV capacity of one instance."""

    weights_per_gpu: float
    """Bytes."""
    workspace_per_gpu: float
    kv_per_gpu: float
    """Bytes the KV cache may take (`kv_budget_per_gpu`, less any linear-attention state)."""
    kv_bytes_per_token_per_gpu: float
    kv_capacity_tokens: int
    """KV tokens one instance can hold (full-attention layers)."""


def weights_per_gpu(model: ModelSpec, dep: Deployment, lm_head_ways: int | None = None) -> float:
    """Weight bytes one GPU holds (see the module docstring), the LM head split `lm_head_ways` ways (default tp)."""
    tp, pp = dep.tp, dep.pp
    wb = DTYPE_BYTES[dep.weights]
    layers = mixer_params_per_gpu(model, dep) * wb
    layers += model.num_dense_layers * model.ffn_params(model.intermediate_size) / tp * wb
    if model.moe is not None:
        m = model.moe
        experts = (m.num_experts + m.shared_experts) * model.expert_params / tp * wb
        router = model.hidden_size * m.num_experts * BF16
        layers += model.num_moe_layers * (experts + router)
        layers += model.num_moe_layers * dep.redundant_experts * model.expert_params / tp * wb
    if dep.mtp is not None:
        layers += model.mtp_params / tp * wb  # the MTP module, on the last stage (averaged over stages)
    embed = model.vocab_size * model.hidden_size * BF16 / tp
    if pp == 1 and not model.tied_embeddings:
        embed += model.vocab_size * model.hidden_size * BF16 / (lm_head_ways or tp)
    return layers / pp + embed


def kv_bytes_per_token_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """KV bytes one GPU keeps per token of a sequence it holds (full-attention layers of one stage)."""
    kvb = DTYPE_BYTES[dep.kv_cache]
    tp = dep.attention_tp
    if model.mla is not None:
        per_layer = model.kv_bytes_per_token_per_layer(kvb)
    else:
        per_layer = 2 * ceil_div(model.num_kv_heads, tp) * model.head_dim * kvb
    return model.full_attention_layers * per_layer / dep.pp


def state_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """Linear-attention state slots reserved for `max_batch_size` sequences (as vLLM and SGLang
    pre-allocate them): state heads split by tp; under attention DP each rank keeps its own sequences."""
    if model.linear_attention is None:
        return 0.0
    ranks = dep.attention_ranks
    share = dep.attention_tp
    return ceil_div(dep.max_batch_size, ranks) * model.state_bytes_per_sequence / share / dep.pp


def workspace_per_gpu(model: ModelSpec, dep: Deployment) -> float:
    """Activation workspace for max_num_tokens tokens (the estimate in the module docstring)."""
    width = model.intermediate_size / dep.tp
    if model.moe is not None:
        m = model.moe
        width = max(width, (m.top_k + m.shared_experts) * m.expert_intermediate_size / dep.tp)
    per_token = 4 * model.hidden_size * BF16 + 2 * width * BF16
    logits = dep.max_batch_size * model.vocab_size / dep.tp * 4
    return dep.max_num_tokens * per_token + logits


def kv_budget_per_gpu(hbm: float, weights: float, workspace: float, dep: Deployment,
                      software: SoftwareProfile) -> float:
    """Bytes of one GPU's HBM the engine gives its KV cache (and any linear-attention state), by the
    profile's `kv_memory` rule with the deployment's `gpu_memory_fraction` or the engine's default."""
    rule = software.kv_memory
    fraction = dep.gpu_memory_fraction or rule.fraction
    if rule.rule == "total":
        return hbm * fraction - weights - workspace
    return (hbm - weights - workspace) * fraction


def plan_memory(
    hardware: Hardware, model: ModelSpec, deployment: Deployment, software: SoftwareProfile | None = None,
) -> MemoryPlan:
    """Weights, workspace and KV cache per GPU (the KV pool by `software`'s rule, the deployment's
    profile when None); InputError when the weights do not fit or leave no KV cache."""
    dep = deployment
    sw = software or load_software(dep.software)
    w = weights_per_gpu(model, dep, sw.lm_head.ways(dep))
    ws = workspace_per_gpu(model, dep)
    hbm = hardware.hbm_bytes
    free = hbm - w - ws
    if free <= 0:
        usable = hbm - ws
        if 2 * dep.tp * dep.pp <= hardware.domain_gpus:
            field = "tp"
        elif dep.weights != "fp4" and hardware.supports("fp4"):
            field = "weights"
        else:
            field = "pp"
        raise InputError(
            "deployment", field,
            f"weights need {w / GiB:.1f} GiB per GPU but the GPU has {usable / GiB:.1f} GiB usable: "
            f"short by {-free / GiB:.1f} GiB; use a larger tp/ep, more pp"
            + (" or fp4 weights" if hardware.supports("fp4") and dep.weights != "fp4" else ""),
        )
    budget = kv_budget_per_gpu(hbm, w, ws, dep, sw)
    if budget <= 0:
        raise InputError(
            "deployment", "gpu_memory_fraction",
            f"{sw.name} leaves no KV cache: weights take {w / GiB:.1f} GiB per GPU and its {sw.kv_memory.rule} "
            f"rule grants {budget / GiB:.1f} GiB; use a larger tp/ep or a higher gpu_memory_fraction")
    state = state_per_gpu(model, dep)
    kv = budget - state
    if kv <= 0:
        raise InputError("deployment", "max_batch_size", f"linear-attention state for {dep.max_batch_size} "
                         f"sequences needs {state / GiB:.1f} GiB per GPU, more than the "
                         f"{budget / GiB:.1f} GiB left; use a smaller max_batch_size or more tp")
    per_tok = kv_bytes_per_token_per_gpu(model, dep)
    ranks = dep.attention_ranks
    capacity = int(kv // per_tok) * ranks if per_tok > 0 else 0
    return MemoryPlan(w, ws, kv, per_tok, capacity)


__all__ = ["MemoryPlan", "kv_budget_per_gpu", "kv_bytes_per_token_per_gpu", "plan_memory", "state_per_gpu",
           "weights_per_gpu", "workspace_per_gpu"]
