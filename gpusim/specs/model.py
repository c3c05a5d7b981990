"""Model architectures (workloads/models/*.yaml) with parameter and KV-cache sizes derived from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gpusim.specs.catalog import load_ref, names
from gpusim.specs.hardware import Dtype
from gpusim.specs.sourced import Grade, Sourced
from gpusim.specs.vision import VisionEncoder

Size = Annotated[int, Field(ge=1, le=10**7)]
"""A width, a head count, a layer count: at least one, and not astronomically many."""
Count = Annotated[int, Field(ge=0, le=10**7)]
"""A count that may be zero."""


def tokens_per_step(acceptance: Sequence[float]) -> float:
    """Tokens one MTP step yields when draft i is accepted with probability acceptance[i] given the ones before
    were: 1 + a1 + a1·a2 + … + a1⋯ak (docs/design.md: Formulas)."""
    total, run = 1.0, 1.0
    for a in acceptance:
        run *= a
        total += run
    return total


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MLA(_Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): a compressed latent is cached instead of K and V."""

    q_lora_rank: Size | None
    kv_lora_rank: Size
    qk_nope_head_dim: Size
    qk_rope_head_dim: Size
    v_head_dim: Size


class MTPMeasurement(_Spec):
    """Tokens per step the MTP module was measured to yield on one kind of prompt at one draft depth."""

    prompts: str
    """Which prompts, e.g. `random, chat template` (InferenceX's MTP benchmarks)."""
    drafts: int = Field(ge=1, le=8)
    tokens_per_step: float = Field(ge=1)
    source: str
    grade: Grade


class ExpertLoad(_Spec):
    """The busiest expert-parallel rank's token load over the mean, measured with the experts where the checkpoint
    puts them (no load balancer) at `ep` ranks: the mean over the MoE layers of each layer's ratio."""

    ep: Size
    busiest_over_mean: Sourced


class MoE(_Spec):
    """Mixture of experts in every layer from `first_dense_layers` on."""

    num_experts: Size
    top_k: Size
    expert_intermediate_size: Size
    shared_experts: Count = 0
    first_dense_layers: Count = 0
    """Leading layers with a dense FFN of `ModelSpec.intermediate_size` instead of experts."""
    min_activations: Dtype | None = None
    """Narrowest activation precision the experts' kernels take: narrower deployments run the expert
    GEMMs at this precision (e.g. MXFP4 experts with MXFP8 activations)."""
    min_activations_source: str | None = None
    unbalanced_load: ExpertLoad | None = None
    """How unevenly the model's routing loads the EP ranks without a load balancer (`perf.ops.popularity_imbalance`)."""


class LinearAttention(_Spec):
    """Gated DeltaNet layers (Qwen3.5, Qwen3-Next): a fixed-size recurrent state per sequence replaces the
    KV cache; a short causal convolution runs over q, k and v."""

    layers: Count
    """How many of the model's layers are linear attention (the others are full attention)."""
    num_key_heads: Size
    key_head_dim: Size
    num_value_heads: Size
    value_head_dim: Size
    conv_kernel: Count = 4
    state_bytes: float = 4.0
    """Bytes per recurrent-state value (fp32)."""

    @property
    def qkv_dim(self) -> int:
        """Width of q, k and v together (the convolution's channels)."""
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim

    def params(self, hidden: int) -> int:
        """One layer's weights: in-projection to q, k, v, the output gate z and the per-head beta and
        decay (a, b), the convolution, and the out-projection."""
        v = self.num_value_heads * self.value_head_dim
        return hidden * (self.qkv_dim + v + 2 * self.num_value_heads) + self.qkv_dim * self.conv_kernel + v * hidden

    @property
    def state_bytes_per_layer(self) -> float:
        """Recurrent state (value heads × key dim × value dim) and convolution state of one sequence."""
        state = self.num_value_heads * self.key_head_dim * self.value_head_dim * self.state_bytes
        return state + self.qkv_dim * (self.conv_kernel - 1) * 2


class ModelSpec(_Spec):
    """A decoder-only transformer as its config.json describes it (the fields that set cost)."""

    id: str
    name: str
    hf_id: str
    num_layers: Size
    hidden_size: Size
    num_attention_heads: Size
    num_kv_heads: Size
    head_dim: Size
    vocab_size: Size
    intermediate_size: Count = 0
    """Dense FFN width (SwiGLU: gate, up and down matrices)."""
    mla: MLA | None = None
    moe: MoE | None = None
    sliding_window: Size | None = None
    sliding_layers: Count = 0
    """How many layers attend only to the last `sliding_window` tokens."""
    linear_attention: LinearAttention | None = None
    attention_output_gate: bool = False
    """Full attention gates its output by a sigmoid of a second query-sized projection (Qwen3.5)."""
    vision: VisionEncoder | None = None
    """The vision encoder of a vision-language model (its cost: gpusim/perf/vision.py)."""
    tied_embeddings: bool = False
    mtp_layers: Count = 0
    """Multi-token-prediction modules (DeepSeek-V3: one extra MoE layer plus a projection)."""
    mtp_acceptance: list[float] | None = None
    """Default acceptance per draft depth when the MTP module drafts (what searches try; see `mtp_source`)."""
    mtp_source: str | None = None
    mtp_measured: list[MTPMeasurement] = []
    """Tokens per step measured on other prompts than `mtp_acceptance`'s (`mtp_acceptance_on`)."""
    source: str

    # ---- per-layer parameter counts -------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """Attention weights of one layer (projections; norms ignored)."""
        h, n = self.hidden_size, self.num_attention_heads
        if self.mla is None:
            d = self.head_dim
            gate = h * n * d if self.attention_output_gate else 0
            return h * n * d + gate + 2 * h * self.num_kv_heads * d + n * d * h
        m = self.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * n * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank * n * qk
        kv_down = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv = kv_down + m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + n * m.v_head_dim * h

    def ffn_params(self, width: int) -> int:
        """One SwiGLU FFN of inner width `width`."""
        return 3 * self.hidden_size * width

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.first_dense_layers

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def expert_params(self) -> int:
        """One routed expert."""
        return 0 if self.moe is None else self.ffn_params(self.moe.expert_intermediate_size)

    @property
    def moe_layer_params(self) -> int:
        """Routed + shared experts + router of one MoE layer."""
        m = self.moe
        if m is None:
            return 0
        return (m.num_experts + m.shared_experts) * self.expert_params + self.hidden_size * m.num_experts

    @property
    def embedding_params(self) -> int:
        """Input embedding plus LM head."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def num_linear_layers(self) -> int:
        return 0 if self.linear_attention is None else self.linear_attention.layers

    @property
    def num_softmax_layers(self) -> int:
        """Layers with (full or sliding-window) softmax attention."""
        return self.num_layers - self.num_linear_layers

    # ---- whole-model counts ---------------------------------------------------------------
    @property
    def total_params(self) -> int:
        """All weights of the main model (MTP modules excluded), embeddings and head included."""
        la = self.linear_attention
        return (
            self.num_softmax_layers * self.attention_params
            + (la.layers * la.params(self.hidden_size) if la else 0)
            + self.num_dense_layers * self.ffn_params(self.intermediate_size)
            + self.num_moe_layers * self.moe_layer_params
            + self.embedding_params
        )

    @property
    def active_params(self) -> int:
        """Weights one token touches: top-k + shared experts per MoE layer, embeddings and head included."""
        if self.moe is None:
            return self.total_params
        m = self.moe
        active_moe = (m.top_k + m.shared_experts) * self.expert_params + self.hidden_size * m.num_experts
        return self.total_params - self.num_moe_layers * (self.moe_layer_params - active_moe)

    def mtp_acceptance_on(self, prompts: str) -> tuple[list[float], MTPMeasurement] | None:
        """The default acceptance per depth scaled by one factor so that it yields the tokens per step measured on
        `prompts` at the measurement's depth (the other depths keep the default's decay: grade C), with that
        measurement; None without one."""
        found = next((m for m in self.mtp_measured if m.prompts == prompts), None)
        if found is None or not self.mtp_acceptance or found.drafts > len(self.mtp_acceptance):
            return None

        def tokens(factor: float) -> float:
            return tokens_per_step([min(1.0, a * factor) for a in self.mtp_acceptance[:found.drafts]])

        low, high = 0.0, 1.0 / min(self.mtp_acceptance)
        target = min(found.tokens_per_step, tokens(high))
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if tokens(mid) < target else (low, mid)
        return [min(1.0, a * low) for a in self.mtp_acceptance], found

    @property
    def mtp_params(self) -> int:
        """Extra weights of the MTP modules: one MoE (or dense) layer and a 2h->h projection each."""
        if not self.mtp_layers:
            return 0
        ffn = self.moe_layer_params if self.moe else self.ffn_params(self.intermediate_size)
        return self.mtp_layers * (self.attention_params + ffn + 2 * self.hidden_size**2)

    # ---- KV cache ---------------------------------------------------------------------------
    @property
    def full_attention_layers(self) -> int:
        return self.num_softmax_layers - self.sliding_layers

    @property
    def state_bytes_per_sequence(self) -> float:
        """Fixed per-sequence memory of the linear-attention layers (0 without them)."""
        la = self.linear_attention
        return la.layers * la.state_bytes_per_layer if la else 0.0

    def kv_bytes_per_token_per_layer(self, dtype_bytes: float) -> float:
        """K and V (or the MLA latent) of one token in one layer."""
        if self.mla is not None:
            return (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * dtype_bytes
        return 2 * self.num_kv_heads * self.head_dim * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: float) -> float:
        """KV bytes per token over the layers whose cache grows with the context (full attention)."""
        return self.full_attention_layers * self.kv_bytes_per_token_per_layer(dtype_bytes)

    def kv_bytes(self, context: int, dtype_bytes: float) -> float:
        """KV bytes of one sequence of `context` tokens; sliding-window layers keep at most the window."""
        window = min(context, self.sliding_window or 0)
        return self.kv_bytes_per_token(dtype_bytes) * context + (
            self.sliding_layers * self.kv_bytes_per_token_per_layer(dtype_bytes) * window
        )


def model_names() -> list[str]:
    return names("models")


def load_model(name: str, source: str = "command line") -> ModelSpec:
    """Load workloads/models/<name>.yaml, a `GPUSIM_PATH` model or a model file by path."""
    return load_ref(ModelSpec, "models", name, "model", source)
