"""Deciding a run's deployment: the default, a deployment file completed from it, and the checks of any
deployment against the hardware and model (the schema itself: gpusim/specs/deployment.py)."""

from __future__ import annotations

from pathlib import Path

from gpusim.defaults import searched_default
from gpusim.errors import InputError, unknown_name
from gpusim.items import AnyModel, is_item, item_deployment, load_workload_model
from gpusim.perf.memory import plan_memory
from gpusim.specs.benchmark import BenchmarkSpec, load_benchmark
from gpusim.specs.catalog import is_path, resolve
from gpusim.specs.deployment import (
    AnyDeployment,
    Deployment,
    DisaggregatedDeployment,
    Parallelism,
    Role,
    deployment_type,
)
from gpusim.specs.experiment import RunSpec
from gpusim.specs.hardware import Hardware, load_hardware, same_as_shipped
from gpusim.specs.loading import read_yaml, validate
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import load_software, software_names

WEIGHT_SHARE = 0.5
"""The default deployment keeps weights under this share of HBM, leaving the rest for the KV cache."""


def roles(dep: AnyDeployment) -> list[tuple[Role, Deployment]]:
    """The pools of a deployment: one aggregated pool, or a prefill and a decode pool."""
    if isinstance(dep, Deployment):
        return [("aggregated", dep)]
    return [("prefill", dep.role("prefill")), ("decode", dep.role("decode"))]


def pool_counts(hw: Hardware, dep: AnyDeployment, source: str = "deployment") -> list[int]:
    """Instances of each pool of `roles(dep)`: as many as named; an unnamed pool fills the GPUs left."""
    parts = roles(dep)
    named = sum((d.instances or 0) * d.gpus_per_instance for _, d in parts)
    unnamed = [role for role, d in parts if d.instances is None]
    if len(unnamed) > 1:
        raise InputError(source, "prefill.instances", "disaggregated pools need the instance count of at "
                         "least one pool; valid: prefill.instances or decode.instances set")
    left = hw.num_gpus - named
    counts = [d.instances or left // d.gpus_per_instance for _, d in parts]
    for (role, d), n in zip(parts, counts, strict=True):
        field = "instances" if role == "aggregated" else f"{role}.instances"
        if n < 1:
            raise InputError(source, field, f"no GPUs left for the {role} pool ({d.gpus_per_instance} GPUs per "
                             f"instance, {max(left, 0)} of {hw.num_gpus} free)")
    used = sum(n * d.gpus_per_instance for (_, d), n in zip(parts, counts, strict=True))
    if used > hw.num_gpus:
        raise InputError(source, "instances", f"the pools use {used} GPUs but {hw.systems}× {hw.id} has "
                         f"{hw.num_gpus}; valid: at most {hw.num_gpus}")
    return counts


def check_deployment(hw: Hardware, model: ModelSpec, dep: AnyDeployment, source: str) -> None:
    """Fail with one clear line if `dep` cannot run on `hw` (memory is checked by plan_memory)."""
    for role, d in roles(dep):
        _check_parallelism(hw, model, d, source, "" if role == "aggregated" else f"{role}.")
    _check_offload(hw, dep, source)
    for field in ("weights", "activations", "kv_cache"):
        dtype = getattr(dep, field)
        if field == "weights" and dep.weights != dep.activations:
            continue  # weight-only quantisation: dequantised to the activation dtype inside the GEMM
        if not hw.supports(dtype):
            valid = ", ".join(hw.gpu.dense_tflops)
            raise InputError(source, field, f"{hw.gpu.name} has no {dtype} tensor cores; valid: {valid}")
    missing = load_software(dep.software, source).features.lacks(dep)
    if missing:
        raise InputError(source, missing[0], f"software {dep.software} does not run {missing[1]}; valid: a "
                         "deployment without it, or a software profile whose features include it")
    pool_counts(hw, dep, source)


def _check_offload(hw: Hardware, dep: AnyDeployment, source: str) -> None:
    """KV offload needs the prefix cache whose blocks it keeps, and tiers the system has."""
    if dep.kv_offload and not dep.prefix_cache:
        raise InputError(source, "kv_offload", "offloads prefix-cache blocks: set prefix_cache: true, or "
                         "kv_offload: []")
    have = [t.name for t in hw.system.kv_tiers]
    for name in dep.kv_offload:
        if name not in have:
            raise InputError(source, "kv_offload", f"{hw.id} has no {name} KV tier; valid: "
                             f"{', '.join(have) or 'none (the system profile lists no kv_tiers)'}")


def _check_parallelism(hw: Hardware, model: ModelSpec, d: Deployment, source: str, prefix: str) -> None:
    """One pool's parallelism. A TP group must sit inside one NVLink domain; wider instances are
    pipeline stages on several domains, or attention DP plus expert parallelism (wide EP), and their
    traffic between domains pays the scale-out fabric."""
    domain = hw.domain_gpus
    wide_ep = d.attention_dp and d.ep == d.tp and d.pp == 1 and model.moe is not None
    if d.tp > domain and not wide_ep:
        raise InputError(source, f"{prefix}tp", f"tp = {d.tp} exceeds the NVLink domain of {hw.id} ({domain} "
                         f"GPUs); valid: tp ≤ {domain} (pipeline stages may span systems), or attention_dp "
                         "with ep = tp (wide EP)")
    if d.gpus_per_instance > hw.num_gpus:
        raise InputError(source, f"{prefix}tp", f"tp×pp = {d.gpus_per_instance} exceeds the {hw.num_gpus} GPUs "
                         f"of {hw.systems}× {hw.id}")
    heads = model.num_attention_heads
    if heads % d.attention_tp:
        divisors = ", ".join(str(k) for k in range(1, heads + 1) if heads % k == 0 and k <= domain)
        raise InputError(source, f"{prefix}tp", f"tp = {d.tp} does not divide {model.id}'s {heads} attention heads; "
                         f"valid: {divisors}, or attention_dp")
    if model.moe is None and d.ep > 1:
        raise InputError(source, f"{prefix}ep", f"{model.id} has no experts; valid: ep = 1")
    if model.moe is not None and d.ep > model.moe.num_experts:
        raise InputError(source, f"{prefix}ep", f"ep {d.ep} exceeds {model.id}'s {model.moe.num_experts} experts")


SEARCHED_AS = {"offline": "offline", "server": "server", "trace": "server", "concurrency": "server",
              "sessions": "server"}
"""Which searched default (hardware_profiles/defaults/) serves each scenario: traces, closed-loop runs and agent
sessions are served like Server."""


def default_deployment(hw: Hardware, model: ModelSpec, scenario: str | None = None,
                       software: str | None = None) -> AnyDeployment:
    """What a submitter would run: the shipped searched deployment for `scenario` (`gpusim.defaults`), else
    `rule_deployment` (`default_with_origin` says which and why)."""
    return default_with_origin(hw, model, scenario, software)[0]


def default_with_origin(hw: Hardware, model: ModelSpec, scenario: str | None = None,
                        software: str | None = None) -> tuple[AnyDeployment, str]:
    """`default_deployment` and where it comes from, in words: the searched default of the system (or of the
    system `hw` is based on), or the rule deployment and why no searched one serves. `software` (default: the
    system's own stack, `SystemSpec.software`, else trtllm) is the stack both run."""
    software = software or system_software(hw)
    as_scenario = SEARCHED_AS.get(scenario or "offline", scenario or "")
    shipped = same_as_shipped(hw)
    system = shipped or hw.system.base
    searched = searched_default(hw, model.id, as_scenario, software, system)
    if searched is not None and system == shipped:
        return searched, f"searched default ({system}, {model.id}, {as_scenario})"
    if searched is not None:
        try:
            check_deployment(hw, model, searched, f"{system}'s default")
            for _, role in roles(searched):
                plan_memory(hw, model, role)
            return searched, f"searched default of its base {system} ({model.id}, {as_scenario})"
        except InputError as exc:
            why = f"its base {system}'s searched default does not fit ({exc.field}: {exc.message})"
    elif system is None:
        why = f"{hw.id} is not a shipped system and names no `base:`"
    else:
        why = f"{system} has no searched default for {model.id} in {as_scenario} with {software}"
    return rule_deployment(hw, model, software), f"fallback: rule deployment, since {why}"


def default_for(hw: Hardware, bench: BenchmarkSpec, model: AnyModel, scenario: str | None) -> AnyDeployment:
    """The default deployment of a question: an item model's rule deployment (`gpusim.items`), else the searched
    default or the rule (`default_deployment`); a benchmark whose rules let agent turns reuse their context
    turns the prefix cache on, and routes a session's calls to where its context lives (`kv_aware`)."""
    default = item_deployment(hw, model, scenario) if is_item(model) else default_deployment(hw, model, scenario)
    if bench.agentic is not None and bench.agentic.prefix_cache:
        default = default.model_copy(update={"prefix_cache": True, "router": "kv_aware"})
    return default


def deployment_origin(spec: RunSpec, hw: Hardware, model: AnyModel) -> str:
    """Where a run's deployment comes from, in words (a run's `deployment_origin`)."""
    given = spec.deployment
    if given == "best":
        return "searched now for this question (deployment: best)"
    if isinstance(given, str) and given != "default":
        return f"file {given}, completed from the default"
    if given not in (None, "default"):
        return "given"
    if is_item(model):
        return "rule deployment of an item model (gpusim.items)"
    return default_with_origin(hw, model, spec.scenario)[1]


def spec_default(spec: RunSpec) -> AnyDeployment:
    """`default_for` an experiment's hardware, systems, benchmark, model (or its benchmark's) and scenario."""
    bench = load_benchmark(spec.benchmark)
    model = load_workload_model(bench, spec.model)
    return default_for(load_hardware(spec.hardware, spec.systems), bench, model, spec.scenario)


def decide(hw: Hardware, bench: BenchmarkSpec, model: AnyModel, scenario: str | None,
           given: str | AnyDeployment | None, source: str, software: str | None = None) -> tuple[AnyDeployment, str]:
    """The deployment a run uses and the name of where it came from (for error messages): without one (or with
    `default`) the default for `scenario` (`default_for`); a deployment file completed from that default
    (`complete`); a Deployment object as it is. `software` (a profile name or file) replaces its software and
    keeps the rest: the what-if of one deployment on another software generation."""
    default = default_for(hw, bench, model, scenario)
    if given is None or given == "default":
        dep, dep_source = default, source
    elif isinstance(given, str):
        dep, dep_source = load_deployment(given)
        dep = complete(dep, default, dep_source)
    else:
        dep, dep_source = given, "deployment"
    if software is None:
        return dep, dep_source
    return dep.model_copy(update={"software": software_ref(software, source)}), dep_source


def software_ref(software: str, source: str, base: Path | None = None) -> str:
    """A software profile as a deployment names it: a shipped or `GPUSIM_PATH` name, or a file path (relative to
    `base`); InputError naming the valid ones otherwise."""
    if is_path(software):
        return str(resolve("software", software, source, "software", base))
    if software not in software_names():
        raise unknown_name(source, "software", software, software_names())
    return software


def load_deployment(spec: str | AnyDeployment) -> tuple[AnyDeployment, str]:
    """The deployment object and the name of where it came from (for error messages)."""
    if isinstance(spec, Deployment | DisaggregatedDeployment):
        return spec, "deployment"
    path = Path(spec)
    data = read_yaml(path)
    if isinstance(data.get("software"), str):  # a software profile may lie beside the deployment file
        data["software"] = software_ref(data["software"], spec, path.parent)
    return validate(deployment_type(data), data, spec), spec


def complete(given: AnyDeployment, default: AnyDeployment, source: str) -> AnyDeployment:
    """A hand-written deployment with every field it does not state taken from `default`: precisions, software,
    serving knobs and, where it states no layout, the layout. Where it states a layout (tp, pp, ep, attention
    DP, pools), its unstated batch limits are the default's per attention rank times its own ranks, and the
    default's layout-bound features (MTP, balance, batch wait, redundant experts) are not carried over."""
    stated = given.model_fields_set
    layout = stated & LAYOUT_FIELDS
    kind = type(given) if layout else type(default)  # the mode is part of the layout
    data = {k: v for k, v in given.model_dump().items() if k in kind.model_fields or k in stated}
    for name in kind.model_fields:
        if name in stated or (layout and name in LAYOUT_FIELDS | LAYOUT_BOUND):
            continue
        if layout and name in ("max_batch_size", "max_num_tokens"):
            if isinstance(given, Deployment) and isinstance(default, Deployment):
                data[name] = max(1, getattr(default, name) // default.attention_ranks * given.attention_ranks)
        else:
            data[name] = getattr(default, name)
    return validate(kind, data, source)


LAYOUT_FIELDS = {"tp", "pp", "ep", "attention_dp", "instances", "mode", "prefill", "decode"}
LAYOUT_BOUND = {"name", "mtp", "adp_balance", "batch_wait", "redundant_experts", "expert_imbalance"}


def system_software(hw: Hardware) -> str:
    """The serving stack a system's default deployments run: the one its profile names, else trtllm."""
    return hw.system.software or "trtllm"


def rule_deployment(hw: Hardware, model: ModelSpec, software: str | None = None) -> Deployment:
    """The smallest power-of-two TP group whose weights take at most half of HBM (for hardware or models without
    a searched default), run by `software` (default: the system's stack, `system_software`).

    Precision: NVFP4 weights and activations (W4A4, as TensorRT-LLM's NVFP4 checkpoints in MLPerf
    submissions on Blackwell run) where the GPU has FP4 tensor cores, FP8 otherwise; FP8 KV cache.
    MoE models shard experts across the whole group
    (ep = tp); MLA models (DeepSeek) use attention data parallelism, so each rank keeps its own
    sequences' latent KV, as TensorRT-LLM's DeepSeek-R1 recipes do. Batch limits scale with the
    attention-DP ranks.
    """
    weights = "fp4" if hw.supports("fp4") else "fp8"
    fits = None
    for tp, pp in _shapes(hw):
        par = Parallelism(tp=tp, attention_dp=model.mla is not None and tp > 1)
        ranks = par.attention_ranks
        dep = Deployment(
            name=f"default-tp{tp}" + (f"-pp{pp}" if pp > 1 else ""),
            software=software or system_software(hw),
            weights=weights,
            activations=weights,
            tp=tp,
            pp=pp,
            ep=tp if model.moe is not None else 1,
            attention_dp=par.attention_dp,
            max_batch_size=256 * ranks,
            max_num_tokens=8192 * ranks,
        )
        plan = _try_plan(hw, model, dep)
        if plan is not None and plan.weights_per_gpu <= WEIGHT_SHARE * hw.hbm_bytes:
            return dep
        fits = fits or (dep if plan is not None else None)
    return fits or dep  # the largest group even if it does not fit: plan_memory then says by how much


def _shapes(hw: Hardware) -> list[tuple[int, int]]:
    """(tp, pp) in the order the rule tries them: TP groups within the NVLink domain, then pipeline stages
    of a full domain across systems."""
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= hw.domain_gpus]
    pps = [p for p in (2, 4, 8) if tps[-1] * p <= hw.num_gpus]
    return [(t, 1) for t in tps] + [(tps[-1], p) for p in pps]


def _try_plan(hw: Hardware, model: ModelSpec, dep: Deployment):
    try:
        return plan_memory(hw, model, dep)
    except InputError:
        return None
