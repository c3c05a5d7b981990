"""How a model is deployed on the hardware: precisions, parallelism, batching limits, serving features."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from gpusim.specs.hardware import Dtype, KVTierName
from gpusim.specs.model import tokens_per_step

Role = Literal["aggregated", "prefill", "decode", "encode"]
"""What a pool of instances does: serve whole requests, only their prefill or their decode, or encode a
VLM's images before its language model (`gpusim.items.encoder_pool`)."""


class Parallelism(BaseModel):
    """The shape and limits of one instance (a model replica): parallelism and batching."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: int = Field(1, ge=1, le=2**16)
    """Tensor parallelism: GPUs sharing each layer (attention heads, dense FFN)."""
    pp: int = Field(1, ge=1, le=2**16)
    """Pipeline stages."""
    ep: int = Field(1, ge=1, le=2**16)
    """Expert parallelism across the TP group (experts split `ep` ways, each expert `tp/ep` ways)."""
    attention_dp: bool = False
    """Attention data parallelism: each of the `tp` ranks runs attention for its own requests."""
    instances: int | None = Field(None, ge=1, le=2**16)
    """Replicas; None fills the hardware (floor(GPUs / (tp·pp)), or the GPUs left to this role)."""
    max_batch_size: int = Field(256, ge=1, le=2**20)
    """Most sequences in one step, per instance."""
    max_num_tokens: int = Field(8192, ge=1, le=2**22)
    """Token budget of one step (prefill chunk tokens + one per decode sequence)."""

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> Parallelism:
        if self.tp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide tp ({self.tp})")
        return self

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp

    @property
    def attention_tp(self) -> int:
        """GPUs sharing one sequence's attention (heads split this many ways): one under attention DP, else tp."""
        return 1 if self.attention_dp else self.tp

    @property
    def attention_ranks(self) -> int:
        """Ranks that run attention for their own sequences: tp under attention DP, else one."""
        return self.tp if self.attention_dp else 1


class MTP(BaseModel):
    """Multi-token prediction / speculative decoding: `depth` drafted tokens per step, each accepted with
    probability `acceptance[i]` given that the previous ones were (1 + a1 + a1·a2 + … tokens per step)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    depth: int = Field(ge=1, le=8)
    acceptance: tuple[float, ...]
    source: str = "user"

    @model_validator(mode="after")
    def _one_rate_per_depth(self) -> MTP:
        if len(self.acceptance) != self.depth or not all(0 <= a <= 1 for a in self.acceptance):
            raise ValueError(f"acceptance needs {self.depth} probabilities in [0, 1], got {self.acceptance}")
        return self

    @property
    def expected_tokens_per_step(self) -> float:
        """1 + a1 + a1·a2 + … + a1⋯ak (docs/design.md: Formulas)."""
        return tokens_per_step(self.acceptance)


class AdpBalance(BaseModel):
    """TensorRT-LLM's attention-DP balance (`attention_dp_config` with `enable_balance`): new context
    requests run when every attention-DP rank has one, else after `timeout_iters` scheduler iterations;
    with every rank generating, `batching_wait_iters` more (defaults: TensorRT-LLM's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_iters: int = Field(50, ge=1)
    batching_wait_iters: int = Field(10, ge=0)


class BatchWait(BaseModel):
    """TensorRT-LLM's batch waiting without attention DP (`batch_wait_timeout_iters`,
    `batch_wait_max_tokens_ratio`): while generation runs, new context requests wait until they and the
    generation tokens reach `max_tokens_ratio` × `max_num_tokens`, or for `timeout_iters` iterations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_iters: int = Field(ge=1)
    max_tokens_ratio: float = Field(ge=0, le=1)


class Serving(BaseModel):
    """What every pool of a deployment shares: precisions, software, serving features. Every field is a
    what-if knob; defaults follow TensorRT-LLM's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    software: str = "trtllm"
    """Software profile (hardware_profiles/software/<name>.yaml): kernel efficiencies, overheads."""
    weights: Dtype = "fp8"
    activations: Dtype = "fp8"
    kv_cache: Dtype = "fp8"
    chunked_prefill: bool = True
    scheduler_recv_interval: int = Field(1, ge=1)
    """SGLang's --scheduler-recv-interval: new requests are read only every this many pure-decode steps
    (and right after a step with prefill); 1 reads before every step, as vLLM and TensorRT-LLM do."""
    adp_balance: AdpBalance | None = None
    """Hold new context requests until every attention-DP rank has one (TensorRT-LLM; attention DP only)."""
    batch_wait: BatchWait | None = None
    """Hold new context requests while generation runs until they fill a share of the token budget
    (TensorRT-LLM; pools without attention DP only, as TensorRT-LLM ignores it with attention DP)."""
    kv_block_tokens: int = Field(32, ge=1)
    gpu_memory_fraction: float | None = Field(None, gt=0, le=1)
    """The engine's KV memory knob, read by its software profile's `kv_memory` rule: TensorRT-LLM's
    free_gpu_memory_fraction (of the HBM weights and workspace leave) or vLLM's gpu_memory_utilization (of
    all HBM). None: the engine's default."""
    router: Literal["round_robin", "least_loaded", "kv_aware"] = "least_loaded"
    """How the front end picks an instance for each request, and for a disaggregated deployment the decode
    instance its KV cache goes to (`kv_aware` there picks the least loaded: the cache moves anyway)."""
    front_ends: int = Field(1, ge=1)
    """Front ends routing independently, each request reaching one of them (srt-slurm stands up ten Dynamo
    frontends behind nginx unless a recipe turns that off). Under `round_robin` each keeps its own turn over its
    own order of the instances, so requests that follow each other may land on the same one; the load-reading
    policies see one shared state, and replicas change nothing there."""
    mtp: MTP | None = None
    expert_imbalance: float | None = Field(None, ge=1)
    """Busiest expert-parallel rank's load over the mean; None takes the software profile's value."""
    redundant_experts: int = Field(0, ge=0)
    """Extra expert replicas per MoE layer spread over the EP ranks (EPLB), which lower the imbalance."""
    expert_balancer: bool = True
    """The engine balances the experts' load over the EP ranks (EPLB or the like). False: the experts stay where the
    checkpoint puts them, and where the model states its measured imbalance (`MoE.unbalanced_load`) the busiest
    rank carries that (`perf.ops.popularity_imbalance`)."""
    prefix_cache: bool = False
    """Keep finished requests' prompt blocks (LRU within the KV capacity) and skip their prefill."""
    kv_offload: list[KVTierName] = []
    """Prefix blocks evicted from HBM go down to these memory tiers of the system (`SystemSpec.kv_tiers`) and are
    reloaded from there rather than recomputed (Dynamo KVBM, LMCache); needs `prefix_cache`."""
    frontend: Literal["loadgen", "http"] | None = None
    """How requests reach the engine. `loadgen`: an in-process harness with pre-tokenised prompts. `http`:
    an OpenAI-compatible server and a streaming client, as the silicon sample was measured and as MLPerf
    v6 submissions serve DeepSeek-R1 and GPT-OSS (LoadGen drives HTTP endpoints); it adds the software
    profile's front-end constants, `request_overhead_ms` per request and `host_seq_us` per sequence per
    step. Unset: the benchmark's `frontend` (how its submissions serve it)."""
    vision_encoder_gpus: int | None = Field(None, ge=1)
    """A vision-language model's encoder on its own pool of this many GPUs (one-GPU instances) in front of
    the language model, as vLLM + Dynamo submissions run it; None: on the language model's GPUs."""
    embedding_cache_hit_rate: float | None = Field(None, ge=0, le=1)
    """A recommender's share of remote embedding rows found in a GPU cache (no fabric traffic); None: 0."""


class Deployment(Serving, Parallelism):
    """An aggregated deployment: instances of one shape (its parallelism fields) that prefill and decode
    alike; also what one pool of a `DisaggregatedDeployment` runs (`DisaggregatedDeployment.role`)."""

    mode: Literal["aggregated"] = "aggregated"

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, mode: object) -> object:
        if mode != "aggregated":
            raise ValueError(f"unknown mode {mode!r}; valid: aggregated, or disaggregated with prefill and decode "
                             "pools")
        return mode

    @model_validator(mode="before")
    @classmethod
    def _pools_need_disaggregated(cls, data: object) -> object:
        """Pools belong to a disaggregated deployment; empty ones (`prefill: null`, as deployments dumped
        before the two types were apart wrote) are dropped."""
        if not isinstance(data, dict) or ("prefill" not in data and "decode" not in data):
            return data
        if data.get("prefill") is not None or data.get("decode") is not None:
            raise ValueError("prefill/decode pools need mode: disaggregated")
        return {k: v for k, v in data.items() if k not in ("prefill", "decode")}

    def role(self, name: Literal["prefill", "decode"]) -> Deployment:
        """This deployment as one pool sees it: itself."""
        return self


class DisaggregatedDeployment(Serving):
    """Disaggregated serving: a `prefill` pool and a `decode` pool, each with its own parallelism; the KV
    cache moves from prefill to decode instances over the fabric. The parallelism lives in the pools only
    (a top-level tp, ep, … would be a third, meaningless shape)."""

    mode: Literal["disaggregated"]
    prefill: Parallelism
    decode: Parallelism

    @model_validator(mode="before")
    @classmethod
    def _parallelism_in_pools(cls, data: object) -> object:
        top = [k for k in Parallelism.model_fields if isinstance(data, dict) and k in data]
        if top:
            raise ValueError(f"{top[0]}: a disaggregated deployment's parallelism lives in its pools; set "
                             f"prefill.{top[0]} and decode.{top[0]} instead")
        return data

    def role(self, name: Literal["prefill", "decode"]) -> Deployment:
        """One pool as a deployment of its own: the pool's parallelism, everything else shared."""
        pool: Parallelism = getattr(self, name)
        shared = {k: getattr(self, k) for k in Serving.model_fields}
        return Deployment(**shared, **{k: getattr(pool, k) for k in Parallelism.model_fields})


def deployment_type(data: Mapping) -> type[Deployment] | type[DisaggregatedDeployment]:
    """The type a deployment mapping describes, by its `mode` (aggregated when it names none)."""
    return DisaggregatedDeployment if data.get("mode") == "disaggregated" else Deployment


def _mode(value: object) -> str:
    return str(value.get("mode", "aggregated") if isinstance(value, Mapping) else getattr(value, "mode", "aggregated"))


AnyDeployment = Annotated[Annotated[Deployment, Tag("aggregated")]
                          | Annotated[DisaggregatedDeployment, Tag("disaggregated")], Discriminator(_mode)]
"""A deployment as a user writes it: aggregated (the default mode) or disaggregated, told apart by `mode`."""
