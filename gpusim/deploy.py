"""Choosing a default deployment, and checking any deployment against the hardware and model."""

from __future__ import annotations

from gpusim.errors import InputError
from gpusim.perf.memory import plan_memory
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec

WEIGHT_SHARE = 0.5
"""The default deployment keeps weights under this share of HBM, leaving the rest for the KV cache."""


def check_deployment(hw: Hardware, model: ModelSpec, dep: Deployment, source: str) -> None:
    """Fail with one clear line if `dep` cannot run on `hw` (memory is checked by plan_memory)."""
    domain = hw.domain_gpus
    if dep.gpus_per_instance > domain:
        raise InputError(source, "tp", f"tp×pp = {dep.gpus_per_instance} exceeds the NVLink domain of "
                         f"{hw.id} ({domain} GPUs); valid: tp·pp ≤ {domain}")
    count = dep.instances or 0
    if count * dep.gpus_per_instance > hw.num_gpus:
        most = hw.num_gpus // dep.gpus_per_instance
        raise InputError(source, "instances", f"{count} instances × {dep.gpus_per_instance} GPUs exceed the "
                         f"{hw.num_gpus} GPUs of {hw.systems}× {hw.id}; valid: ≤ {most}")
    if model.moe is None and dep.ep > 1:
        raise InputError(source, "ep", f"{model.id} has no experts; valid: ep = 1")
    if model.moe is not None and dep.ep > model.moe.num_experts:
        raise InputError(source, "ep", f"ep {dep.ep} exceeds {model.id}'s {model.moe.num_experts} experts")
    for field in ("weights", "activations", "kv_cache"):
        dtype = getattr(dep, field)
        if not hw.supports(dtype):
            valid = ", ".join(hw.gpu.dense_tflops)
            raise InputError(source, field, f"{hw.gpu.name} has no {dtype} tensor cores; valid: {valid}")


def instance_count(hw: Hardware, dep: Deployment) -> int:
    """The instances a deployment runs: as many as it names, or as many as fill the hardware."""
    return dep.instances or hw.num_gpus // dep.gpus_per_instance


def default_deployment(hw: Hardware, model: ModelSpec) -> Deployment:
    """The smallest power-of-two TP group whose weights take at most half of HBM.

    Precision: NVFP4 weights and activations (W4A4, as TensorRT-LLM's NVFP4 checkpoints in MLPerf
    submissions on Blackwell run) where the GPU has FP4 tensor cores, FP8 otherwise; FP8 KV cache.
    MoE models shard experts across the whole group
    (ep = tp); MLA models (DeepSeek) use attention data parallelism, so each rank keeps its own
    sequences' latent KV, as TensorRT-LLM's DeepSeek-R1 recipes do. Batch limits scale with the
    attention-DP ranks.
    """
    weights = "fp4" if hw.supports("fp4") else "fp8"
    tp = 1
    while True:
        attention_dp = model.mla is not None and tp > 1
        ranks = tp if attention_dp else 1
        dep = Deployment(
            name=f"default-tp{tp}",
            weights=weights,
            activations=weights,
            tp=tp,
            ep=tp if model.moe is not None else 1,
            attention_dp=attention_dp,
            max_batch_size=256 * ranks,
            max_num_tokens=8192 * ranks,
        )
        plan = plan_memory(hw, model, dep) if 2 * tp > hw.domain_gpus else _try_plan(hw, model, dep)
        if plan is not None and plan.weights_per_gpu <= WEIGHT_SHARE * hw.hbm_bytes:
            return dep
        if 2 * tp > hw.domain_gpus:
            return dep
        tp *= 2


def _try_plan(hw: Hardware, model: ModelSpec, dep: Deployment):
    try:
        return plan_memory(hw, model, dep)
    except InputError:
        return None
