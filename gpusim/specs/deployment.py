"""How a model is deployed on the hardware: precisions, parallelism, batching limits, routing."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpusim.specs.hardware import Dtype


class Deployment(BaseModel):
    """One serving deployment. Every field is a what-if knob; defaults follow TensorRT-LLM's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    software: str = "trtllm"
    """Software profile (hardware_profiles/software/<name>.yaml): kernel efficiencies, overheads."""
    weights: Dtype = "fp8"
    activations: Dtype = "fp8"
    kv_cache: Dtype = "fp8"
    tp: int = Field(1, ge=1)
    """Tensor parallelism: GPUs sharing each layer (attention heads, dense FFN)."""
    pp: int = Field(1, ge=1)
    """Pipeline stages."""
    ep: int = Field(1, ge=1)
    """Expert parallelism across the TP group (experts split `ep` ways, each expert `tp/ep` ways)."""
    attention_dp: bool = False
    """Attention data parallelism: each of the `tp` ranks runs attention for its own requests."""
    instances: int | None = Field(None, ge=1)
    """Model replicas; None fills the hardware (floor(GPUs / (tp·pp)))."""
    max_batch_size: int = Field(256, ge=1)
    """Most sequences in one step, per instance."""
    max_num_tokens: int = Field(8192, ge=1)
    """Token budget of one step (prefill chunk tokens + one per decode sequence)."""
    chunked_prefill: bool = True
    kv_block_tokens: int = Field(32, ge=1)
    gpu_memory_fraction: float = Field(0.9, gt=0, le=1)
    """Fraction of HBM left after weights and workspace that the KV cache may take."""
    router: Literal["round_robin", "least_loaded"] = "least_loaded"

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> Deployment:
        if self.tp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide tp ({self.tp})")
        return self

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp
