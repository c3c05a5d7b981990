"""`gpusim validate silicon`: simulate every row of a silicon sample and score TTFT and TPOT.

A row (shaped like the silicon sample of docs/accuracy.md, AIConfigurator's columns) is one deployment
measured closed-loop at a fixed concurrency with fixed ISL/OSL. Each row maps by rule to a system
profile, a model YAML and a `Deployment`:

- system `h100_sxm`, `gb300`, … → the profile `map_accelerator` finds (h100-hgx, gb300-nvl72, …);
- `model_path` → the model whose id matches the checkpoint name without its quantisation/instruct
  suffix (`nvidia/Llama-3.1-8B-Instruct-FP8` → llama3.1-8b; a point release such as DeepSeek-V3.1
  falls back to its base architecture);
- `gemm_quant_mode` (else `precision`, else the checkpoint suffix, else bf16) → weights/activations:
  fp8 and fp8_block → fp8, nvfp4 → fp4, int4_wo → fp4-sized weights with bf16 activations; on a GPU
  without FP4 tensor cores (Hopper) a 4-bit checkpoint runs weight-only (W4A16, as gpt-oss's MXFP4
  does). KV cache fp8, bf16 for bf16 checkpoints.
- AIC's parallelism: an instance has `tp_size × attention_dp_size` GPUs (gpusim tp), `moe_ep_size`
  (gpusim ep) and attention DP when `attention_dp_size > 1`; `batch_size` is per attention-DP rank.
  A batch below the concurrency does not cap the engine: some sources record `batch_size` as the
  concurrency per GPU (c224 on tp4 → 56), and a closed loop keeps every request in flight anyway.
  A concurrency above even batch × GPUs (c416 with batch 13 on tp2) cannot be one engine's closed loop:
  such an aggregated row is unsupported, with that reason. Columns shaped tp·dp = moe_tp·moe_ep = k² in
  two patterns are an export that multiplied two widths by EP: read as k GPUs by the rule in `ep_squared`.
  One instance per aggregated row. Disaggregated rows get `prefill`/`decode` pools with their worker
  counts; where those are empty, the benchmark InferenceX's search space lists for the row's setup and
  concurrency gives the pools (workers, attention layout, decode batch, MTP, expert load balancer:
  `disagg_recipes`), and where it lists none or several layouts, `unstated_workers` sizes the decode pool
  for the concurrency and `balanced_prefill_workers` the prefill pool for the decode pool's request rate
  (said in the status).
- concurrency: `silicon_concurrency=` in `silicon_data_source`, else `_c<N>` in the id, else
  `batch_size × attention_dp_size` (disaggregated: the decode pool's batch × DP × workers).
- launch recipes (`gpusim/validate/launch_recipes.yaml`, each with its source and grade): the deployment
  fields the measuring harness's launch set on an aggregated row's engine (`gpusim.validate.recipes`).

Prediction: the closed-loop run issues 10 × c requests (InferenceX's num_prompts), each with ISL and OSL
drawn from [0.8·L, L] (its --random-range-ratio), and averages TTFT and TPOT over all of them, as a
benchmark client does: the first wave arrives as one burst, and its queueing is part of the measured
mean. The silicon columns are per-run averages (benchmark_serving/aiperf report mean TTFT and mean
TPOT), so means are compared.
Software: the row's `backend` selects the profile (`trtllm`, `vllm`, `sglang`, each fitted on its own
backend's rows by `gpusim calibrate`); a backend without a profile runs with `trtllm` and says so.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from gpusim.analysis.published import map_system
from gpusim.deploy import roles
from gpusim.errors import InputError
from gpusim.parallel import parallel_map
from gpusim.perf.capacity import Lengths, decode_rate, prefill_rate
from gpusim.perf.memory import plan_memory
from gpusim.perf.step import StepCostModel
from gpusim.sim.topology import Topology
from gpusim.specs.deployment import (
    MTP,
    AnyDeployment,
    Deployment,
    DisaggregatedDeployment,
    Parallelism,
)
from gpusim.specs.experiment import Timing
from gpusim.specs.hardware import Dtype, Hardware, load_hardware
from gpusim.specs.model import ModelSpec, load_model, model_names
from gpusim.specs.software import software_names
from gpusim.validate.csvfile import read_checked_csv
from gpusim.validate.disagg_recipes import DisaggRecipe, find_recipes
from gpusim.validate.errors import (
    error_stats,
    first_wave_weights,
    partition_errors,
    repeat_scatter,
    scatter_stats,
    slot_queueing,
    target_status,
)
from gpusim.validate.fronts import FRONT_BLIND, front_summary
from gpusim.validate.generations import GENERATION_BLIND, generation_ratios, paired
from gpusim.validate.holdout import split_rows
from gpusim.validate.recipes import LaunchedRow, launch_settings
from gpusim.validate.runner import RANGE_RATIO, WAVES, Unsupported, closed_loop_samples, simulate_closed_loop

METRICS = ("ttft", "tpot")
PARTITIONS: dict[str, list[str]] = {
    "system": ["system"],
    "model": ["model_path"],
    "backend": ["backend"],
    "mode": ["mode"],
    "isl/osl": ["isl_osl"],
    "config": ["model_path", "system", "backend", "mode"],
    "reading": ["reading"],
}
"""Partition kinds of the error table: one dimension each, the exact configuration, and the documented
rules a row was read by (`reading`: its status notes, or 'as stated')."""
SCATTER_PARTITIONS = {k: PARTITIONS[k] for k in ("system", "model", "backend", "mode")}
"""Partition kinds of the measurement-scatter table (repeated setups are too few for finer ones)."""
TARGETS = {"ttft": 0.20, "tpot": 0.10}
"""The accuracy targets the report checks: the largest MAPE per metric on every partition with at least
`TARGET_MIN_ROWS` predicted rows (issue 5: TPOT ≤ 10%, TTFT ≤ 20%)."""
TARGET_MIN_ROWS = 20
TARGET_PARTITIONS = {k: v for k, v in PARTITIONS.items() if k != "reading"}
"""The partitions the targets apply to: the measured dimensions and their exact configuration (not the
reading rules, which are gpusim's own)."""

_GEMM_DTYPES: dict[str, tuple[Dtype, Dtype]] = {
    "fp8": ("fp8", "fp8"), "fp8_block": ("fp8", "fp8"), "nvfp4": ("fp4", "fp4"), "fp4": ("fp4", "fp4"),
    "bf16": ("bf16", "bf16"), "int4_wo": ("fp4", "bf16"), "int4": ("fp4", "bf16"),
}
TOKENS_PER_RANK = 8192
"""Token budget per step and attention rank (the engines' default max_num_tokens / max_num_batched_tokens)."""
INFERENCEX_PROMPTS = "random, chat template"
"""The prompts of InferenceX's MTP benchmarks (random tokens under the model's chat template): rows read with MTP
draft at the model's acceptance measured on them (`ModelSpec.mtp_acceptance_on`) where it has one."""

_SUFFIX = re.compile(r"-(fp8|nvfp4|fp4|instruct|hf)$")
_CONCURRENCY_SOURCE = re.compile(r"silicon_concurrency=(\d+)")
_CONCURRENCY_ID = re.compile(r"_c(\d+)(?=_|$)")
_ID_TP_EP = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_")
_DUMP_DATE = re.compile(r"source_file=(\d{4}-\d\d-\d\d)")


@dataclass(frozen=True)
class SiliconCase:
    """What one row asks the simulator to run."""

    hardware: str
    systems: int
    model: str
    deployment: AnyDeployment
    concurrency: int
    isl: int
    osl: int
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """Identical keys simulate identically (the cache of `predict_rows`)."""
        return (self.hardware, self.systems, self.model, self.deployment.model_dump_json(), self.concurrency,
                self.isl, self.osl)


# ---- one row → one case --------------------------------------------------------------------------
def _num(row: Mapping, field: str) -> float | None:
    v = row.get(field)
    if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == "":
        return None
    return float(v)


def _int(row: Mapping, field: str, default: int) -> int:
    v = _num(row, field)
    return default if v is None or v < 1 else int(v)


def map_model(model_path: str) -> str:
    """The model id of a checkpoint path, by rule (module docstring); Unsupported if none describes it."""
    name = model_path.rsplit("/", 1)[-1].lower()
    while _SUFFIX.search(name):
        name = _SUFFIX.sub("", name)
    name = re.sub(r"^(meta-)?llama-(\d)", r"llama\2", name)
    known = set(model_names())
    for candidate in (name, re.sub(r"\.\d+$", "", name)):
        if candidate in known:
            return candidate
    raise Unsupported(f"model {model_path}: no architecture in workloads/models (valid: {', '.join(sorted(known))})")


def row_concurrency(row: Mapping) -> int | None:
    """Concurrency the row was measured at: silicon_concurrency=, else _c<N> in the id, else the (decode)
    batch per rank × attention-DP ranks × workers."""
    for pattern, field in ((_CONCURRENCY_SOURCE, "silicon_data_source"), (_CONCURRENCY_ID, "id")):
        m = pattern.search(str(row.get(field) or ""))
        if m:
            return int(m.group(1))
    prefix = "decode_" if str(row.get("mode")) == "disagg" else ""
    batch = _num(row, f"{prefix}batch_size")
    if batch is None:
        return None
    return int(batch) * _int(row, f"{prefix}attention_dp_size", 1) * _int(row, f"{prefix}num_workers", 1)


def row_software(row: Mapping) -> tuple[str, str]:
    """(software profile, note) of a row: its backend's profile, else trtllm with a note."""
    backend = str(row.get("backend") or "trtllm").lower()
    if backend in software_names():
        return backend, ""
    return "trtllm", f"backend {backend} has no software profile: trtllm used"


def row_dtypes(row: Mapping) -> tuple[Dtype, Dtype, Dtype]:
    """(weights, activations, kv_cache) from gemm_quant_mode, precision or the checkpoint name."""
    mode = row.get("gemm_quant_mode") or row.get("precision")
    if not isinstance(mode, str) or not mode:
        suffix = re.search(r"-(fp8|nvfp4)$", str(row.get("model_path", "")).lower())
        mode = suffix.group(1) if suffix else "bf16"
    if mode not in _GEMM_DTYPES:
        raise Unsupported(f"gemm_quant_mode {mode!r} has no gpusim dtype (valid: {', '.join(_GEMM_DTYPES)})")
    weights, acts = _GEMM_DTYPES[mode]
    return weights, acts, ("bf16" if mode == "bf16" else "fp8")


def ep_squared(row: Mapping, prefix: str, domain_gpus: int) -> tuple[int, str] | None:
    """(k, the attention column written k times too wide) when a role's columns are an EP-squared
    export, else None.

    Data rule: AIC's columns satisfy tp·dp = moe_tp·moe_ep = the instance's GPUs. Some exports (the
    2026-04-06 file and the db-dump) wrote runs of k GPUs with two widths multiplied by k, so that
    tp·dp = moe_tp·moe_ep = k², in one of two patterns:
    - TEP/DEP with tp (or dp) and moe_tp multiplied: moe_tp = moe_ep = k. 125 such rows repeat, to the last
      digit, a measurement that the 2026-03-25 file records with k GPUs. tp is the wide column when it is
      above 1, else dp (whose per-rank batch the export divided by k as well).
    - vLLM TEP with the EP width written into dp, and moe_ep = tp·dp: tp = dp = k, moe_tp 1, moe_ep k².
      The 10 such runs that have a `_tp<k>_ep1` (TPk) twin at the same lengths and concurrency measure a
      TPOT 0–3.4% above it, as TPk attention with k-way EP does (DP attention would not); dp is the wide
      column.
    Their ids say `_tp<k>_ep<k>`. A role is read as k GPUs (the wide column divided by k, MoE EP k) when
    its columns have one of those patterns and either k² GPUs exceed one NVLink domain of the system (so
    the columns cannot describe one engine) or the id's label says `_tp<k>_ep<k>`.
    """
    tp, dp = _int(row, f"{prefix}tp_size", 1), _int(row, f"{prefix}attention_dp_size", 1)
    moe_tp, moe_ep = _int(row, f"{prefix}moe_tp_size", 1), _int(row, f"{prefix}moe_ep_size", 1)
    k = math.isqrt(tp * dp)
    if k < 2 or k * k != tp * dp:
        return None
    if moe_tp == moe_ep == k:
        wide = "tp" if tp > 1 else "dp"
    elif tp == dp == k and moe_tp == 1 and moe_ep == k * k:
        wide = "dp"
    else:
        return None
    label = _ID_TP_EP.search(str(row.get("id") or "")) if not prefix else None
    if k * k > domain_gpus or (label and int(label.group(1)) == int(label.group(2)) == k):
        return k, wide
    return None


def _parallelism(row: Mapping, prefix: str, batch: int | None, is_moe: bool,
                 domain_gpus: int) -> tuple[Parallelism, list[str]]:
    """One role's parallelism from AIC's `<prefix>tp_size`, `attention_dp_size`, `moe_ep_size` fields."""
    tp, dp = _int(row, f"{prefix}tp_size", 1), _int(row, f"{prefix}attention_dp_size", 1)
    ep = _int(row, f"{prefix}moe_ep_size", 1) if is_moe else 1
    notes = []
    rank_batch = _num(row, f"{prefix}batch_size")
    squared = ep_squared(row, prefix, domain_gpus) if is_moe else None
    if squared:
        ep, wide = squared
        notes.append(f"{prefix}columns read as an EP-squared export: {ep} GPUs (tp·dp = moe_tp·moe_ep = {ep}²)")
        if wide == "tp":
            tp //= ep
        else:  # the export divided each rank's batch by the k-times-too-wide dp as well
            dp //= ep
            rank_batch = rank_batch and rank_batch * ep
    gpus = tp * dp
    if tp > 1 and dp > 1:
        notes.append(f"{prefix}attention TP inside DP: tp{tp}×dp{dp} modelled as attention DP over {gpus} ranks")
    if gpus % ep:
        raise Unsupported(f"{prefix}moe_ep_size {ep} does not divide the {gpus} GPUs of an instance")
    if not prefix and rank_batch and batch and batch > rank_batch * gpus:
        raise Unsupported(f"concurrency {batch} exceeds batch_size {rank_batch:g} × {gpus} GPUs: the row spans "
                          "more engines than its parallelism describes")
    max_batch = max(int(rank_batch) * dp, batch or 0) if rank_batch else batch
    par = Parallelism(tp=gpus, pp=_int(row, f"{prefix}pp_size", 1), ep=ep, attention_dp=dp > 1,
                      max_batch_size=max(max_batch or 256, 1), max_num_tokens=TOKENS_PER_RANK * dp)
    return par, notes


DISAGG_ROUTER = "round_robin"
"""How InferenceX's disaggregated benchmarks spread requests over workers (grade B): Dynamo's frontend, which
srt-slurm starts for every such recipe with no `--router-mode`, defaults to round-robin (ai-dynamo 0.4.1-0.8.1
`dynamo/frontend/main.py`), and picks the decode worker (from 0.7 the prefill worker too) blind to its load.
How many such frontends a row's requests went through, each with its own turn and worker order, its recipe file
says (`DisaggRecipe.serving`: srt-slurm stands up ten behind nginx unless the file turns that off)."""


SEQS_PER_GPU = 64
"""Rule for disaggregated rows without a decode worker count (grade D): as many decode workers as keep
the concurrency at ≤ 64 sequences per decode GPU (the measured setups were sized for their concurrency;
one worker queued far too much at high concurrency)."""


DEP_SEQS_PER_GPU = 8
"""Rule for the same rows with an MLA model (DeepSeek, Kimi, GLM-5), grade D: the decode worker runs
attention DP with EP over its GPUs (DEP) once it holds ≥ 8 sequences per GPU, tensor-parallel
attention (TEP) below, as InferenceX's DeepSeek-R1 recipes switch from TEP to DEP as concurrency grows;
the rows' decode ep field often repeats the prefill's and cannot say which."""


def unstated_workers(concurrency: int, gpus_per_worker: int) -> int:
    """Decode workers where a disaggregated row leaves their count empty (`SEQS_PER_GPU` rule)."""
    return max(1, math.ceil(concurrency / (SEQS_PER_GPU * gpus_per_worker)))


def balanced_prefill_workers(hw: Hardware, model: ModelSpec, dep: DisaggregatedDeployment, concurrency: int, isl: int,
                             osl: int) -> int:
    """Prefill workers whose prefill rate covers the rate at which `dep`'s decode pool completes requests
    with `concurrency` in flight, at the client's mean lengths (data rule for rows that leave the prefill
    worker count empty, grade D).

    Throughput-tuned disaggregated recipes size their context servers this way (InferenceX's DeepSeek-R1
    recipes run ctx1_gen5 at low concurrency and ctx4_gen1 to ctx10_gen1 at high), so a prefill pool
    often holds far fewer workers than the decode pool. The rule it replaces (as many prefill workers as
    decode workers) gave a DeepSeek-R1 run at concurrency 10,860 43 prefill workers and TTFTs 5-20x short.
    """
    mean = (1 + RANGE_RATIO) / 2
    prefill, decode = dep.role("prefill"), dep.role("decode")
    workers = decode.instances or 1
    try:
        kv = plan_memory(hw, model, decode).kv_capacity_tokens
    except InputError as exc:  # the decode pool cannot hold the weights: no rate to size against
        raise Unsupported(f"{exc.field}: {exc.message}") from None
    lengths = Lengths.fixed(isl * mean, osl * mean)
    completions = workers * decode_rate(StepCostModel(hw, model, decode), kv, decode, lengths,
                                        batch=math.ceil(concurrency / workers))
    return max(1, math.ceil(completions / prefill_rate(StepCostModel(hw, model, prefill), prefill, isl * mean)))


def _disaggregated(row: Mapping, model: ModelSpec, hw: Hardware, concurrency: int,
                   common: dict) -> tuple[DisaggregatedDeployment, int, list[str]]:
    """(deployment, GPUs, notes) of a disaggregated row: its pools as stated; where it leaves the worker counts
    empty, its InferenceX recipe's pools, else a decode count by `unstated_workers` (and `DEP_SEQS_PER_GPU`)
    and a prefill count by `balanced_prefill_workers`."""
    is_moe, domain = model.moe is not None, hw.domain_gpus
    prefill, prefill_notes = _parallelism(row, "prefill_", None, is_moe, domain)
    decode_notes: list[str] = []
    decode_workers = _int(row, "decode_num_workers", 0)
    unstated = not decode_workers
    if unstated:
        per_worker = _parallelism(row, "decode_", None, is_moe, domain)[0].gpus_per_instance
        recipe, recipe_notes = _inferencex_recipe(row, model, prefill, per_worker, concurrency)
        if recipe is not None:
            return *_recipe_deployment(recipe, model, hw, concurrency, prefill.max_batch_size, common), recipe_notes
        decode_notes += recipe_notes
        decode_workers = unstated_workers(concurrency, per_worker)
        decode_notes.append(f"decode workers unstated: {decode_workers} assumed (≤ {SEQS_PER_GPU} sequences per GPU)")
    decode, more = _parallelism(row, "decode_", math.ceil(concurrency / decode_workers), is_moe, domain)
    decode_notes += more
    if unstated and model.mla is not None and concurrency / (decode_workers * decode.tp) >= DEP_SEQS_PER_GPU:
        decode = decode.model_copy(update={"attention_dp": True, "ep": decode.tp,
                                           "max_num_tokens": TOKENS_PER_RANK * decode.tp})
        decode_notes.append(f"unstated decode layout: attention DP + EP{decode.tp} "
                            f"(≥ {DEP_SEQS_PER_GPU} sequences per GPU)")
    decode = decode.model_copy(update={"instances": decode_workers})
    ran = None if unstated else _stated_recipe(row, model, prefill, decode, concurrency)
    if ran is not None and ran.decode_cap is not None:
        decode = decode.model_copy(update={"max_batch_size": ran.decode_cap})
        decode_notes.append(f"decode batch cap from the InferenceX recipe: {ran.label()}")
    if ran is not None:
        common = {**common, **ran.serving}
    prefill_workers = _int(row, "prefill_num_workers", 0)

    def deployment(workers: int) -> DisaggregatedDeployment:
        pools = {"prefill": prefill.model_copy(update={"instances": workers}), "decode": decode}
        return DisaggregatedDeployment(mode="disaggregated", **pools, **common)

    if not prefill_workers:
        prefill_workers = balanced_prefill_workers(hw, model, deployment(1), concurrency, int(row["isl"]),
                                                   int(row["osl"]))
        prefill_notes.insert(0, f"prefill workers unstated: {prefill_workers} sized to the decode pool's request rate")
    gpus = _gpus(hw, [(prefill.gpus_per_instance, prefill_workers), (decode.gpus_per_instance, decode_workers)])
    return deployment(prefill_workers), gpus, prefill_notes + decode_notes


def _inferencex_recipe(row: Mapping, model: ModelSpec, prefill: Parallelism, decode_gpus: int,
                       concurrency: int) -> tuple[DisaggRecipe | None, list[str]]:
    """The one pool layout InferenceX's search space gives a row with unstated workers
    (gpusim/validate/disagg_recipes.py), with its notes; None (and why, if several match) otherwise. Recipes
    that differ only in decode batch caps the row's concurrency does not reach are one layout."""
    dump = _DUMP_DATE.search(str(row.get("silicon_data_source") or ""))
    found = find_recipes(model.id, str(row.get("system")), str(row.get("backend")), str(row.get("precision")),
                         int(row["isl"]), int(row["osl"]), concurrency, dump and dump.group(1),
                         (prefill.gpus_per_instance, prefill.ep), decode_gpus)
    def binding(r: DisaggRecipe) -> tuple:  # a batch cap above the row's sequences per worker sets nothing
        ranks = r.decode_tp if r.decode_dp_attn else 1
        holds = r.decode_batch is not None and r.decode_batch * ranks * r.decode_workers < concurrency
        return r.layout if holds else r.layout[:-1]

    layouts = {binding(r) for r in found}
    if len(layouts) > 1:
        return None, [f"InferenceX recipes disagree: {len(layouts)} pool layouts listed for the setup"]
    if not found:
        return None, []
    mtp = {r.mtp for r in found}
    recipe = found[0] if len(mtp) == 1 else dataclasses.replace(found[0], mtp=False, mtp_depth=None)
    kind = ("InferenceX recipe, MTP unknown" if len(mtp) > 1 else
            "InferenceX recipe with MTP" if recipe.mtp else "InferenceX recipe")
    return recipe, [f"{kind}: {recipe.label()}"]


def _stated_recipe(row: Mapping, model: ModelSpec, prefill: Parallelism, decode: Parallelism,
                   concurrency: int) -> DisaggRecipe | None:
    """The InferenceX recipe a row with stated workers ran: the one layout listed for its setup, with the row's
    decode workers and attention layout; else None. Its decode batch cap is the engine's, where the export's
    decode batch column is the concurrency per decode rank (a recipe's `batch32` runs at concurrencies from 10
    to 180), and its front ends are the ones the row's requests went through."""
    recipe, _ = _inferencex_recipe(row, model, prefill, decode.gpus_per_instance, concurrency)
    if (recipe is None or recipe.decode_workers != decode.instances
            or recipe.decode_dp_attn != decode.attention_dp):
        return None
    return recipe


def _recipe_deployment(recipe: DisaggRecipe, model: ModelSpec, hw: Hardware, concurrency: int,
                       prefill_batch: int, common: dict) -> tuple[DisaggregatedDeployment, int]:
    """(deployment, GPUs) of a row read by its InferenceX recipe: its workers, attention layout, decode batch
    per worker (the concurrency where its file names none, the concurrency per worker without the file), front
    ends where its file names them, MTP depth (the model's where it
    names none), at the model's acceptance, and TensorRT-LLM's expert load balancer where the file names it."""
    def pool(tp: int, ep: int, dp_attn: bool, workers: int, max_batch: int) -> Parallelism:
        ranks = tp if dp_attn else 1
        return Parallelism(tp=tp, pp=1, ep=ep if model.moe is not None else 1, attention_dp=dp_attn,
                           max_batch_size=max_batch, max_num_tokens=TOKENS_PER_RANK * ranks, instances=workers)

    # a file that names no cap leaves the engine's default, above any concurrency a row reaches (SGLang: at least
    # 2,048 requests per DP rank); without the file, the concurrency per worker
    decode_batch = recipe.decode_cap or (concurrency if recipe.file_read
                                         else math.ceil(concurrency / recipe.decode_workers))
    pools = {"prefill": pool(recipe.prefill_tp, recipe.prefill_ep, recipe.prefill_dp_attn, recipe.prefill_workers,
                             prefill_batch),
             "decode": pool(recipe.decode_tp, recipe.decode_ep, recipe.decode_dp_attn, recipe.decode_workers,
                            decode_batch)}
    mtp = None
    if recipe.mtp and model.mtp_acceptance:
        depth = min(recipe.mtp_depth or len(model.mtp_acceptance), len(model.mtp_acceptance))
        measured = model.mtp_acceptance_on(INFERENCEX_PROMPTS)
        acceptance, source = ((measured[0], measured[1].source) if measured is not None
                              else (model.mtp_acceptance, model.mtp_source or "model"))
        mtp = MTP(depth=depth, acceptance=acceptance[:depth], source=source)
    balance = {}
    if recipe.eplb_slots is not None and model.moe is not None:  # eplb0: no balancer; eplbN: N slots, N - E replicas
        balance = {"expert_balancer": recipe.eplb_slots > 0,
                   "redundant_experts": max(0, recipe.eplb_slots - model.moe.num_experts)}
    dep = DisaggregatedDeployment(mode="disaggregated", **pools, **{**common, "mtp": mtp, **balance, **recipe.serving})
    return dep, _gpus(hw, [(recipe.prefill_tp, recipe.prefill_workers), (recipe.decode_tp, recipe.decode_workers)])


def _gpus(hw: Hardware, pools: list[tuple[int, int]]) -> int:
    """GPUs up to the end of the last instance of `pools` ((GPUs per worker, workers), placed in order):
    whole instances per system leave gaps the systems must cover."""
    sizes = [gpus for gpus, workers in pools for _ in range(workers)]
    last = Topology(systems=sum(sizes), gpus_per_system=hw.system.gpus).place(sizes)[-1]
    return last.first_gpu + last.gpus


def row_case(row: Mapping) -> SiliconCase:
    """The run one silicon row describes; Unsupported (with the reason) when it cannot be built."""
    system = str(row.get("system", ""))
    profile = map_system(system)
    if profile is None:
        raise Unsupported(f"system {system!r}: no hardware profile")
    model_id = map_model(str(row.get("model_path", "")))
    model = load_model(model_id)
    concurrency = row_concurrency(row)
    if concurrency is None:
        raise Unsupported("no concurrency: neither silicon_concurrency=, _c<N> in the id nor batch_size")
    weights, acts, kv = row_dtypes(row)
    software, note = row_software(row)
    notes: list[str] = [note] if note else []
    hw = load_hardware(profile[0])
    if weights == acts == "fp4" and not hw.supports("fp4"):
        acts = "bf16"  # Hopper runs 4-bit checkpoints (gpt-oss MXFP4) as W4A16: weights dequantised in the GEMM
        notes.append("4-bit checkpoint on a GPU without FP4 tensor cores: fp4 weights, bf16 activations")
    elif weights == "fp4" and acts == "bf16":
        notes.append("int4 weight-only modelled as NVFP4-sized weights with bf16 activations")
    common = {"weights": weights, "activations": acts, "kv_cache": kv, "name": f"silicon-{row.get('mode')}",
              "software": software, "frontend": "http"}
    if str(row.get("mode")) == "disagg":
        dep, gpus, more = _disaggregated(row, model, hw, concurrency, {**common, "router": DISAGG_ROUTER})
        notes += more
    else:
        par, more = _parallelism(row, "", concurrency, model.moe is not None, hw.domain_gpus)
        notes += more
        launch, more = launch_settings(LaunchedRow(
            str(row.get("backend")), str(row.get("mode")), model_id, system, weights, int(row["isl"]),
            int(row["osl"]), concurrency, par.tp, par.attention_dp, str(row.get("backend_version") or "")))
        notes += more
        if "max_num_tokens" in launch:  # a launch flag's budget is per DP engine, as the default's TOKENS_PER_RANK
            launch["max_num_tokens"] *= par.max_num_tokens // TOKENS_PER_RANK
        gpus = par.gpus_per_instance
        dep = Deployment(**{**par.model_copy(update={"instances": 1}).model_dump(), **common, **launch})
    hardware, systems = map_system(system, gpus) or profile
    return SiliconCase(hardware, systems, model_id, dep, concurrency, int(row["isl"]), int(row["osl"]),
                       tuple(notes))


# ---- simulate ---------------------------------------------------------------------------------------
class Prediction(NamedTuple):
    """One case's prediction (ms); status 'ok' or 'unsupported: …'. The TTFT mean splits into the first
    wave's (the `concurrency` requests sent together at t = 0) and the steady state's after it."""

    ttft_ms: float | None
    tpot_ms: float | None
    status: str
    ttft_first_wave_ms: float | None = None
    ttft_steady_ms: float | None = None


PREDICTION_COLUMNS = ["id", "predicted_ttft_ms", "predicted_tpot_ms", "status", "predicted_ttft_first_wave_ms",
                      "predicted_ttft_steady_ms"]


def predict_case(case: SiliconCase, waves: int = WAVES, timing: Timing = "roofline") -> Prediction:
    """The prediction of one case (its client sending `waves` × concurrency requests, kernels timed by
    `timing`), or why there is none."""
    try:
        hw = load_hardware(case.hardware, case.systems)
        res = simulate_closed_loop(hw, load_model(case.model), case.deployment, case.concurrency, case.isl,
                                   case.osl, closed_loop_samples(case.concurrency, waves),
                                   source=f"silicon row {case.deployment.name}", timing=timing)
    except Unsupported as exc:
        return Prediction(None, None, f"unsupported: {exc}")
    except InputError as exc:
        return Prediction(None, None, f"unsupported: {exc.field}: {exc.message}")
    status = "ok" + (f" ({'; '.join(case.notes)})" if case.notes else "")
    return Prediction(res.ttft_mean_s * 1e3, res.tpot_mean_s * 1e3, status, res.ttft_first_wave_s * 1e3,
                      res.ttft_steady_s * 1e3)


def predict_rows(rows: pd.DataFrame, workers: int = 2, waves: int = WAVES, timing: Timing = "roofline") -> pd.DataFrame:
    """`PREDICTION_COLUMNS` for every row, in order; identical cases run once (`predict_case`, `waves`,
    `timing`)."""
    cases: list[SiliconCase | None] = []
    statuses: list[str] = []
    for row in rows.to_dict("records"):
        try:
            cases.append(row_case(row))
            statuses.append("")
        except (Unsupported, InputError, ValueError) as exc:
            cases.append(None)
            statuses.append(f"unsupported: {_one_line(exc)}")
    unique = {c.key: c for c in cases if c is not None}
    # Longest first (most requests × tokens), so the pool does not end on one long run.
    order = sorted(unique.values(), key=lambda c: -c.concurrency * (c.isl + c.osl))
    runs = parallel_map(partial(predict_case, waves=waves, timing=timing), order, workers)
    results = dict(zip([c.key for c in order], runs, strict=True))
    out = [(row_id, *(results[case.key] if case is not None else Prediction(None, None, status)))
           for row_id, case, status in zip(rows["id"], cases, statuses, strict=True)]
    return pd.DataFrame(out, columns=PREDICTION_COLUMNS)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


# ---- score ----------------------------------------------------------------------------------------------
def scored_table(rows: pd.DataFrame, predictions: pd.DataFrame, sample: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows with their partition columns, measured and predicted values (ms), a `predicted` flag and each
    measurement's `repeat_scatter` among the repeated measurements of its setup in `sample` (the whole
    file the rows come from; default the rows themselves)."""
    predictions = predictions.reindex(columns=PREDICTION_COLUMNS)
    t = pd.DataFrame({
        "id": rows["id"].to_numpy(),
        "system": rows["system"].to_numpy(),
        "model_path": rows["model_path"].to_numpy(),
        "backend": rows["backend"].to_numpy(),
        "mode": rows["mode"].to_numpy(),
        "isl_osl": (rows["isl"].astype(int).astype(str) + "/" + rows["osl"].astype(int).astype(str)).to_numpy(),
        "measured_ttft": rows["silicon_ttft_ms"].astype(float).to_numpy(),
        "measured_tpot": rows["silicon_tpot_ms"].astype(float).to_numpy(),
        "predicted_ttft": predictions["predicted_ttft_ms"].astype(float).to_numpy(),
        "predicted_tpot": predictions["predicted_tpot_ms"].astype(float).to_numpy(),
        "predicted_ttft_first_wave": predictions["predicted_ttft_first_wave_ms"].astype(float).to_numpy(),
        "predicted_ttft_steady": predictions["predicted_ttft_steady_ms"].astype(float).to_numpy(),
        "status": predictions["status"].to_numpy(),
    })
    t["predicted"] = t["status"].str.startswith("ok") & t["predicted_ttft"].notna()
    t["reading"] = t["status"].map(_reading)
    t["generation_setup"] = _setup_keys(rows, GENERATION_BLIND).to_numpy()
    t["front_setup"] = _setup_keys(rows, FRONT_BLIND).str.rsplit("|c", n=1).str[0].to_numpy()
    t["concurrency"] = [row_concurrency(r) for r in rows.to_dict("records")]
    t["osl"] = rows["osl"].astype(int).to_numpy()
    pools = [_row_pools(r) for r in rows.to_dict("records")]
    t["gpus"] = [gpus for gpus, _ in pools]
    t["decode_slots"] = [slots for _, slots in pools]
    sample = rows if sample is None else sample
    setup = _setup_keys(sample)
    for m, col in zip(METRICS, ("silicon_ttft_ms", "silicon_tpot_ms"), strict=True):
        scatter = repeat_scatter(sample[col].astype(float), setup).set_axis(sample["id"])
        t[f"scatter_{m}"] = scatter.reindex(t["id"]).to_numpy()
    return t


def _row_pools(row: Mapping) -> tuple[int | None, int | None]:
    """GPUs the row's case runs on (every pool's instances) and, disaggregated, its decode slots (decode instances ×
    their batch); None where it has no case (or no decode pool)."""
    try:
        pools = roles(row_case(row).deployment)
    except (Unsupported, InputError, ValueError):
        return None, None
    decode = dict(pools).get("decode")
    slots = (decode.instances or 1) * decode.max_batch_size if decode is not None else None
    return sum(d.gpus_per_instance * (d.instances or 1) for _, d in pools), slots


_NOT_SETUP = ("id", "silicon_data_source", "silicon_ttft_ms", "silicon_tpot_ms")


def _setup_keys(rows: pd.DataFrame, blind: tuple[str, ...] = ()) -> pd.Series:
    """One string per row naming what was measured: every column but the id, the source, the results and
    `blind`, and the concurrency (which the source holds)."""
    cols = [c for c in rows.columns if c not in _NOT_SETUP and c not in blind]
    conc = pd.Series([row_concurrency(r) for r in rows.to_dict("records")], index=rows.index)
    return rows[cols].map(str).agg("|".join, axis=1) + "|c" + conc.map(str)


def summarize_table(table: pd.DataFrame) -> dict:
    """The `--json` object: totals, overall MAPE (fractions) and the per-partition table."""
    overall = error_stats(table, METRICS)
    not_predicted = table.loc[~table["predicted"], "status"].map(_reason).value_counts()
    return {
        "rows_total": overall["rows"],
        "rows_predicted": overall["rows_predicted"],
        "mape_ttft": overall["mape_ttft"],
        "mape_tpot": overall["mape_tpot"],
        "median_ape_ttft": overall["median_ape_ttft"],
        "median_ape_tpot": overall["median_ape_tpot"],
        "not_predicted": {k: int(v) for k, v in not_predicted.items()},
        "partitions": partition_errors(table, PARTITIONS, METRICS),
        "measurement_scatter": scatter_stats(table, SCATTER_PARTITIONS, METRICS),
        "first_wave": first_wave_weights(table[table["mode"] == "agg"], "backend"),
        "slot_queueing": slot_queueing(table),
        "generations": generation_ratios(table),
        "fronts": front_summary(table),
        "targets": {"mape": TARGETS, "min_rows": TARGET_MIN_ROWS,
                    "partitions": target_status(table, TARGET_PARTITIONS, TARGETS, TARGET_MIN_ROWS)},
    }


_NUMBER = re.compile(r"(?<![\w.])\d+(\.\d+)?(?![\w.])")


def _reason(status: str) -> str:
    """A status shortened to its cause (row-specific numbers dropped), for counting."""
    return _NUMBER.sub("N", status.split(" (")[0] if status.startswith("ok") else status)[:160]


def _reading(status: str) -> str:
    """The documented rules an `ok (notes)` status names (each note up to its colon); 'as stated' if none."""
    notes = status[len("ok ("):-1].split("; ") if status.startswith("ok (") else []
    return "; ".join(dict.fromkeys(note.split(":")[0] for note in notes)) or "as stated"


def read_sample(path: Path, sample: int | None = None, seed: int = 0, held_out: bool = False) -> pd.DataFrame:
    """The rows of a silicon CSV (all, or only those calibration holds out; then a seeded random `sample` of
    them), in file order."""
    return select_rows(read_rows(path), sample, seed, held_out)


def read_rows(path: Path) -> pd.DataFrame:
    """Every row of a silicon CSV, its columns checked."""
    need = {"id", "system", "model_path", "backend", "mode", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"}
    return read_checked_csv(path, need, "a silicon sample")


def select_rows(rows: pd.DataFrame, sample: int | None = None, seed: int = 0, held_out: bool = False,
                generations: bool = False) -> pd.DataFrame:
    """`rows`, or those calibration holds out, or (`generations`) those whose setup was measured on both GPUs of
    a generation pair (`generations.paired`); then a seeded random `sample` of them, in file order."""
    if held_out:
        rows = split_rows(rows)[1]
    if generations:
        rows = rows[paired(_setup_keys(rows, GENERATION_BLIND), rows["system"])]
    if sample is not None and sample < len(rows):
        rows = rows.sample(n=sample, random_state=seed).sort_index()
    return rows.reset_index(drop=True)


@dataclass
class SiliconValidation:
    """Everything `gpusim validate silicon` reports."""

    table: pd.DataFrame
    summary: dict
    wall_s: float

    @property
    def rows_csv(self) -> pd.DataFrame:
        t = self.table
        return pd.DataFrame({"id": t["id"], "predicted_ttft_ms": t["predicted_ttft"],
                             "predicted_tpot_ms": t["predicted_tpot"], "status": t["status"]})


def validate_silicon(path: Path, sample: int | None = None, workers: int = 2, seed: int = 0,
                     held_out: bool = False, waves: int = WAVES, timing: Timing = "roofline",
                     generations: bool = False) -> SiliconValidation:
    """Predict every row of the silicon CSV at `path` (or those `select_rows` picks), each run as a client
    sending `waves` × concurrency requests with kernels timed by `timing`, and score it."""
    started = time.perf_counter()
    every = read_rows(path)
    rows = select_rows(every, sample, seed, held_out, generations)
    table = scored_table(rows, predict_rows(rows, workers, waves, timing), every)
    summary = summarize_table(table)
    wall = time.perf_counter() - started
    summary["wall_s"] = wall
    summary["waves"] = waves
    summary["timing"] = timing
    return SiliconValidation(table, summary, wall)


__all__ = [
    "PARTITIONS", "TARGETS", "TARGET_MIN_ROWS", "SiliconCase", "SiliconValidation", "map_model",
    "predict_case", "predict_rows",
    "read_rows", "read_sample", "row_case", "row_concurrency", "row_dtypes", "row_software", "scored_table",
    "select_rows", "summarize_table", "validate_silicon",
]
