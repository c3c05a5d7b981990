"""Workloads whose requests are items (a video, a recommendation query) and the vision encoder of a VLM, as
pools of the same engine: their models, cost models, default deployments and checks (docs/workloads.md).

An item request has one output token and a prompt of its work (one unit per video; a query's history and
candidate tokens), so an instance's prefill step serves a batch of whole items; the engine's KV accounting
does not bind them (`ITEM_KV_TOKENS`).
"""

from __future__ import annotations

import numpy as np

from gpusim.errors import InputError
from gpusim.perf.diffusion import DiffusionCost
from gpusim.perf.recsys import RecsysCost
from gpusim.perf.vision import VisionCost, VisionEncoderCost, VisionStepCost, image_tokens
from gpusim.sim.cluster import Pool
from gpusim.specs.benchmark import BenchmarkSpec
from gpusim.specs.catalog import load_ref, resolve
from gpusim.specs.deployment import Deployment
from gpusim.specs.diffusion import DiffusionModelSpec
from gpusim.specs.hardware import Hardware
from gpusim.specs.loading import read_yaml
from gpusim.specs.model import ModelSpec, load_model
from gpusim.specs.recsys import RecsysModelSpec
from gpusim.specs.software import load_software

ItemModel = DiffusionModelSpec | RecsysModelSpec
AnyModel = ModelSpec | ItemModel
ITEM_KV_TOKENS = 2**40
"""KV capacity of an item instance: items hold no KV cache, so admission is bounded by the batch alone."""
ITEM_CLASSES: dict[str, type[ItemModel]] = {"diffusion": DiffusionModelSpec, "recsys": RecsysModelSpec}
VISION_SAMPLE = 2000
"""Prompts whose images set a dataset's mean encoder seconds per prompt token."""


def is_item(model: AnyModel) -> bool:
    return isinstance(model, (DiffusionModelSpec, RecsysModelSpec))


def load_workload_model(bench: BenchmarkSpec, name: str | None = None, source: str = "command line") -> AnyModel:
    """The benchmark's model (or `name`), read with the schema of the benchmark's kind."""
    ref = name or bench.model
    cls = ITEM_CLASSES.get(bench.kind)
    return load_model(ref, source) if cls is None else load_ref(cls, "models", ref, "model", source)


def load_any_model(name: str, source: str = "command line") -> AnyModel:
    """A model of any kind by name or path: the file's `kind` picks the schema (a transformer without one)."""
    path = resolve("models", name, source, "model")
    cls = ITEM_CLASSES.get(str(read_yaml(path).get("kind")))
    return load_model(name, source) if cls is None else load_ref(cls, "models", name, "model", source)


def item_deployment(hw: Hardware, model: ItemModel, scenario: str | None) -> Deployment:
    """The rule deployment of an item model. Diffusion: SingleStream spreads one video over a whole NVLink
    domain (the lowest latency); otherwise one GPU per video (no communication, the most videos per second).
    Recommendation: the fewest GPUs (a power of two in the domain) whose HBM holds the sharded tables, one
    request (a SUT batch of `samples_per_request` queries) per step."""
    weights = "fp8" if hw.supports("fp8") else "bf16"
    common = {"weights": weights, "activations": weights, "kv_cache": "bf16", "chunked_prefill": False,
              "software": "trtllm"}
    if isinstance(model, DiffusionModelSpec):
        tp = min(hw.domain_gpus, hw.num_gpus) if scenario == "singlestream" else 1
        return Deployment(name=f"diffusion-gpus{tp}", tp=tp, max_batch_size=1, max_num_tokens=1, **common)
    need = model.embedding_bytes / (hw.hbm_bytes * 0.9)
    tp = next((t for t in (1, 2, 4, 8, 16, 32, 64) if t >= need and t <= hw.domain_gpus), hw.domain_gpus)
    return Deployment(name=f"recsys-tp{tp}", tp=tp, max_batch_size=1, max_num_tokens=2**22, **common)


def check_item(hw: Hardware, dep: Deployment, source: str) -> None:
    """An item instance's GPUs must exist; beyond one NVLink domain its traffic pays the scale-out fabric."""
    if dep.mode != "aggregated":
        raise InputError(source, "mode", "item workloads run aggregated instances; valid: aggregated")
    if dep.gpus_per_instance > hw.num_gpus:
        raise InputError(source, "tp", f"tp×pp = {dep.gpus_per_instance} exceeds the {hw.num_gpus} GPUs of "
                         f"{hw.systems}× {hw.id}")
    if dep.max_num_tokens < dep.max_batch_size:
        raise InputError(source, "max_num_tokens", f"must be ≥ max_batch_size ({dep.max_batch_size}) for items")


def item_cost(hw: Hardware, model: ItemModel, bench: BenchmarkSpec, dep: Deployment, source: str):
    """The cost model of one item instance."""
    if isinstance(model, DiffusionModelSpec):
        if bench.generation is None:
            raise InputError(bench.id, "generation", "a diffusion benchmark needs its generation settings")
        return DiffusionCost(hw, model, bench.generation, dep, source=source)
    return RecsysCost(hw, model, dep, bench.samples_per_request, source=source)


def item_pools(hw: Hardware, bench: BenchmarkSpec, model: ItemModel, dep: Deployment, source: str) -> tuple[Pool]:
    """One aggregated pool of item instances filling the hardware (or `dep.instances`)."""
    check_item(hw, dep, source)
    count = dep.instances or hw.num_gpus // dep.gpus_per_instance
    return (Pool("aggregated", item_cost(hw, model, bench, dep, source), ITEM_KV_TOKENS, dep, count),)


ENCODER_BATCH = 64
"""Images one encoder instance encodes per step (grade D: vLLM batches encoder inputs up to a budget)."""


def encoder_pool(hw: Hardware, model: AnyModel, bench: BenchmarkSpec, dep: Deployment, source: str) -> Pool | None:
    """A VLM's encoder as its own pool of one-GPU instances (`Deployment.vision_encoder_gpus`), or None when
    the encoder shares the LM's GPUs."""
    n = dep.vision_encoder_gpus
    if n is None:
        return None
    if not isinstance(model, ModelSpec) or model.vision is None:
        raise InputError(source, "vision_encoder_gpus", f"{model.id} has no vision encoder; valid: unset")
    if n >= hw.num_gpus:
        raise InputError(source, "vision_encoder_gpus", f"{n} leaves no GPU of {hw.num_gpus} for the language "
                         f"model; valid: 1 to {hw.num_gpus - 1}")
    if dep.mode != "aggregated":
        raise InputError(source, "vision_encoder_gpus", "an encoder pool runs beside aggregated LM instances; "
                         "valid: mode aggregated")
    enc = dep.model_copy(update={"tp": 1, "pp": 1, "ep": 1, "attention_dp": False, "instances": n,
                                 "max_batch_size": ENCODER_BATCH, "max_num_tokens": 2**22, "chunked_prefill": False,
                                 "prefix_cache": False, "mtp": None})
    sw = load_software(dep.software).for_architecture(hw.gpu.architecture)
    vision = VisionCost(hw, model.vision, sw, "bf16" if dep.activations == "bf16" else "fp8")
    return Pool("encode", VisionEncoderCost(vision, bench.text_tokens or 0.0), ITEM_KV_TOKENS, enc, n)


def lm_share(hw: Hardware, dep: Deployment, source: str) -> Deployment:
    """The language model's deployment on the GPUs the encoder pool leaves (aggregated instances, checked by
    `encoder_pool`)."""
    left = hw.num_gpus - dep.vision_encoder_gpus
    count = dep.instances or left // dep.gpus_per_instance
    if count < 1 or count * dep.gpus_per_instance > left:
        raise InputError(source, "instances", f"{dep.vision_encoder_gpus} encoder GPUs leave {left} for "
                         f"instances of {dep.gpus_per_instance} GPUs; valid: at most {left // dep.gpus_per_instance}")
    return dep.model_copy(update={"instances": count})


def with_vision(pool: Pool, hw: Hardware, model: ModelSpec, bench: BenchmarkSpec, prompts: np.ndarray) -> Pool:
    """A VLM pool that prefills (aggregated or prefill) with the encoder on its own GPUs: its prefill steps
    carry the dataset's mean encoder seconds per prompt token (`VisionStepCost`)."""
    if model.vision is None or pool.role == "decode" or pool.deployment.vision_encoder_gpus:
        return pool
    sw = pool.cost.software
    vision = VisionCost(hw, model.vision, sw, "bf16" if pool.deployment.activations == "bf16" else "fp8",
                        tp=pool.deployment.tp)
    sample = prompts[: VISION_SAMPLE]
    per_token = vision.mean_seconds(image_tokens(sample, bench.text_tokens or 0.0)) / float(np.mean(sample))
    cost = VisionStepCost(pool.cost, per_token)
    return Pool(pool.role, cost, pool.kv_capacity_tokens, pool.deployment, pool.count)


__all__ = ["ITEM_KV_TOKENS", "AnyModel", "ItemModel", "check_item", "encoder_pool", "is_item", "item_cost",
           "item_deployment", "item_pools", "lm_share", "load_any_model", "load_workload_model", "with_vision"]
