"""Software profiles (hardware_profiles/software/*.yaml): kernel efficiencies and overheads of a serving stack.

These are the only fitted constants of the cost model (docs/design.md: Modelling decisions, Accuracy
discipline): achievable fractions of the hardware's peak bandwidth and FLOPS, the GEMM shape curve,
collective efficiencies and latencies, and fixed per-kernel / per-step overheads. Each is a `Sourced`
with a grade (B measured publicly, C derived, D assumed or fitted). A profile may override any constant
for one GPU architecture (`overrides: {hopper: {gemm_efficiency_max: {...}}}`); `for_architecture`
applies them. A profile may name a `base` profile and state only what differs from it: an older
generation of the same engine is its base's kernels with the kernels and features its own round ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusim.specs.catalog import clear_cache, load_ref, names, shipped_dir
from gpusim.specs.deployment import AdpBalance, Deployment, DisaggregatedDeployment
from gpusim.specs.sourced import Grade, Sourced

SOFTWARE = shipped_dir("software")

DEFAULTS: dict[str, str | float] = {
    "hbm_bandwidth_fraction_fp4": "hbm_bandwidth_fraction",
    "gemm_efficiency_fp8": "gemm_efficiency_max",
    "gemm_efficiency_fp4": "gemm_efficiency_max",
    "moe_efficiency": 1.0,
    "moe_efficiency_fp8": "moe_efficiency",
    "moe_efficiency_fp4": "moe_efficiency",
    "moe_inter_half": 0.0,
    "moe_inter_half_fp8": "moe_inter_half",
    "moe_inter_half_fp4": "moe_inter_half",
    "gemm_kernel_us": "kernel_launch_us",
    "attention_kernel_us": "kernel_launch_us",
    "attention_prefill_kernel_us": "attention_kernel_us",
    "moe_kernel_us": "kernel_launch_us",
    "moe_kernel_us_fp8": "moe_kernel_us",
    "moe_kernel_us_fp4": "moe_kernel_us",
    "collective_kernel_us": 0.0,
    "alltoall_kernel_us": 0.0,
    "allreduce_small_busbw_fraction": "allreduce_busbw_fraction",
    "allreduce_knee_mb": 0.0,
    "attention_prefill_keys_half": 0.0,
    "request_overhead_ms": 0.0,
    "layer_overhead_us": 0.0,
    "handoff_overhead_ms": 0.0,
    "host_seq_us": 0.0,
    "attention_decode_flops_fraction": "attention_prefill_flops_fraction",
}
"""Optional constants and what an absent one means: another constant's value, or a neutral number."""
OPTIONAL = tuple(DEFAULTS)

CONSTANTS = (
    "hbm_bandwidth_fraction",
    "gemm_efficiency_max",
    "gemm_m_half",
    "attention_prefill_flops_fraction",
    "attention_decode_bandwidth_fraction",
    "allreduce_busbw_fraction",
    "nvlink_hop_latency_us",
    "alltoall_efficiency",
    "alltoall_hop_latency_us",
    "alltoall_scaleout_hop_latency_us",
    "moe_imbalance",
    "kernel_launch_us",
    "step_overhead_us",
    *OPTIONAL,
)
FRACTIONS = frozenset({
    "hbm_bandwidth_fraction", "hbm_bandwidth_fraction_fp4", "gemm_efficiency_max", "attention_prefill_flops_fraction",
    "attention_decode_bandwidth_fraction", "allreduce_busbw_fraction", "alltoall_efficiency",
    "gemm_efficiency_fp8", "gemm_efficiency_fp4", "moe_efficiency", "moe_efficiency_fp8", "moe_efficiency_fp4",
    "attention_decode_flops_fraction", "allreduce_small_busbw_fraction",
})


def precision_constant(name: str, dtype: str) -> str:
    """The profile constant `name` for a compute precision: BF16's is `name` itself (the GEMM efficiency's
    is `gemm_efficiency_max`), FP8's and FP4's carry the suffix (`moe_kernel_us_fp8`)."""
    if dtype == "bf16":
        return "gemm_efficiency_max" if name == "gemm_efficiency" else name
    return f"{name}_{dtype}"


class KvMemory(BaseModel):
    """How the engine sizes its KV cache pool on each GPU (`perf.memory.kv_budget_per_gpu`).

    `free`: `fraction` of the HBM weights and the activation workspace leave (TensorRT-LLM's
    free_gpu_memory_fraction). `total`: `fraction` of all HBM, less weights and workspace (vLLM's
    gpu_memory_utilization). A deployment's `gpu_memory_fraction` replaces `fraction`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Literal["free", "total"] = "free"
    fraction: float = Field(0.9, gt=0, le=1)
    """The engine's default."""
    source: str = "TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction default 0.9"
    grade: Grade = "B"


class OfferedAdpBalance(AdpBalance):
    """The attention-DP balance a software generation offers, as its MLPerf submissions configure it."""

    source: str
    grade: Grade

    def config(self) -> AdpBalance:
        """The deployment's `adp_balance` that runs it."""
        return AdpBalance(timeout_iters=self.timeout_iters, batching_wait_iters=self.batching_wait_iters)


class ServingFeatures(BaseModel):
    """What a software generation runs beyond its kernels' speed. A round's software is its kernels (the
    constants) and these features: the deployment search tries only what they allow, and a deployment that
    needs one the profile lacks is refused. Every field is a what-if: copy a profile and change it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mtp: bool = True
    """Speculative decoding with the model's multi-token-prediction module."""
    disaggregated: bool = True
    """Prefill and decode in separate pools, the KV cache moved between them."""
    max_ep: int | None = Field(None, ge=1)
    """The widest expert-parallel group the generation runs (None: any; 8: no wide EP beyond one HGX board)."""
    source: str = "the engines' current releases run all of them (docs/mlperf.md)"
    grade: Grade = "B"

    def lacks(self, dep: Deployment | DisaggregatedDeployment) -> tuple[str, str] | None:
        """(field, what is missing) for the first feature `dep` needs that these lack; None if it runs."""
        if dep.mtp is not None and not self.mtp:
            return "mtp", "MTP speculative decoding (features.mtp: false)"
        if dep.mode == "disaggregated" and not self.disaggregated:
            return "mode", "disaggregated serving (features.disaggregated: false)"
        wide = max(dep.role(r).ep for r in ("prefill", "decode"))
        if self.max_ep is not None and wide > self.max_ep:
            return "ep", f"expert parallelism beyond {self.max_ep} GPUs (features.max_ep: {self.max_ep})"
        return None


class GraphBatches(BaseModel):
    """The decode batch sizes an engine runs as captured graphs (CUDA graphs; XLA's compiled shapes on TPU), and
    whether it pads to them. A step that only
    generates runs the graph of the smallest captured size that holds its busiest attention-DP rank's
    sequences: padded to that size, the GEMMs, experts, collectives and LM head compute the dummy rows too
    (their attention reads next to nothing). A batch above the largest size runs without a graph, unpadded,
    and so does a step with prompt tokens in it. Absent from a profile: every size is captured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_sizes: tuple[int, ...] = Field(min_length=1)
    """Captured sizes, sequences per attention-DP rank (per instance without attention DP)."""
    padding: bool = True
    token_sizes: tuple[int, ...] | None = None
    """Compiled token counts for steps with prompt tokens in them, per instance: an engine that compiles every
    step's shape (XLA on TPU: vLLM TPU pads a step's scheduled tokens to the next power of two) runs such a step
    padded to the next size, its GEMMs, experts and collectives computing the dummy tokens (attention and the
    LM head see the real ones). Absent: steps with prompt tokens run unpadded (CUDA engines)."""
    source: str
    grade: Grade

    @field_validator("batch_sizes", "token_sizes")
    @classmethod
    def _sorted(cls, sizes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if sizes is None:
            return None
        if not sizes or min(sizes) < 1:
            raise ValueError(f"sizes must be at least 1, got {list(sizes)}")
        return tuple(sorted(set(sizes)))

    def rows(self, seqs: int) -> int:
        """Sequences a generation-only step of `seqs` (per rank) computes: the next captured size, if padding."""
        return self._padded(self.batch_sizes, seqs)

    def tokens(self, tokens: int) -> int:
        """Tokens a step with prompt tokens computes: the next compiled token count, if the engine has them."""
        return self._padded(self.token_sizes, tokens) if self.token_sizes else tokens

    def _padded(self, sizes: tuple[int, ...], n: int) -> int:
        """`n` padded to the next of `sizes`; unpadded without padding or above the largest size."""
        if not self.padding or n > sizes[-1]:
            return n
        return next(s for s in sizes if s >= n)


class LmHeadSplit(BaseModel):
    """How an engine splits the LM head (and its logits) under attention DP. `tp`: the vocabulary over the
    instance's whole TP group, the hidden states of every rank gathered first (SGLang's default,
    `enable_dp_lm_head` false). `attention_tp`: each attention-DP rank holds the whole head (split only over
    its own attention TP, 1 under TensorRT-LLM's attention DP) and computes its own sequences' logits, so a
    step reads tp / attention_tp times the weights. Without attention DP both are the instance's tp."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    over: Literal["tp", "attention_tp"] = "tp"
    source: str = "SGLang's ParallelLMHead over the TP group unless enable_dp_lm_head (default false)"
    grade: Grade = "B"

    def ways(self, dep: Deployment) -> int:
        """GPUs one copy of the LM head is split over under `dep`."""
        return dep.attention_tp if self.over == "attention_tp" and dep.attention_dp else dep.tp


class SoftwareProfile(BaseModel):
    """Kernel efficiencies and overheads of one serving stack (TensorRT-LLM, vLLM, ... at a version)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    base: str | None = None
    """The profile this one derives from: its constants and settings hold except where this file states its
    own. A constant stated at the top level holds on every architecture, replacing the base's overrides of
    it, unless this file's own `overrides` say otherwise."""
    inherited_grade: Grade | None = None
    """With `base`: the constants this file takes from its base were measured on another stack and are carried
    over unmeasured, so each takes this grade and a source that says so (vLLM's constants on ROCm or TPU)."""
    hbm_bandwidth_fraction: Sourced
    """Achievable fraction of peak HBM bandwidth for weight/activation streaming (memory-bound ops)."""
    hbm_bandwidth_fraction_fp4: Sourced | None = None
    """The same for dense GEMMs computing at NVFP4: block-scaled 4-bit kernels stream their weights more
    slowly at decode sizes than BF16 and FP8 ones do (`python -m gpusim.calibrate.kernels --streaming`);
    absent: `hbm_bandwidth_fraction`. MoE experts keep `hbm_bandwidth_fraction`, their own constants
    fitted with it."""
    gemm_efficiency_max: Sourced
    """eff_max of BF16 GEMMs in the shape curve eff(m) = eff_max · m / (m + m_half), m = tokens in the GEMM."""
    gemm_m_half: Sourced
    """Tokens at which a GEMM reaches half of eff_max (small batches run below peak)."""
    attention_prefill_flops_fraction: Sourced
    """Achievable fraction of peak FLOPS for prefill attention math on long prompts: the peak of the length
    curve eff(L) = fraction · L / (L + `attention_prefill_keys_half`), L = keys per query."""
    attention_decode_bandwidth_fraction: Sourced
    """Achievable fraction of peak HBM bandwidth when decode attention reads the KV cache."""
    allreduce_busbw_fraction: Sourced
    """NCCL-style bus bandwidth of an all-reduce as a fraction of the per-direction link bandwidth."""
    nvlink_hop_latency_us: Sourced
    """Per-hop latency (alpha) of collectives inside the NVLink domain, microseconds."""
    alltoall_efficiency: Sourced
    """Achievable fraction of per-direction link bandwidth for MoE all-to-all dispatch/combine."""
    alltoall_hop_latency_us: Sourced
    """Alpha of an MoE all-to-all (dispatch or combine) inside the NVLink domain: α·log2(EP), µs."""
    alltoall_scaleout_hop_latency_us: Sourced
    """Alpha of an MoE all-to-all across systems (InfiniBand): α·log2(EP), µs."""
    moe_imbalance: Sourced
    """Load of the busiest expert-parallel rank relative to the mean (>= 1)."""
    kernel_launch_us: Sourced
    """Fixed time added to every kernel (launch gap, tail), microseconds."""
    step_overhead_us: Sourced
    """Fixed time per engine step: scheduler, sampling, host synchronisation, microseconds."""
    gemm_efficiency_fp8: Sourced | None = None
    """eff_max of FP8 GEMMs (block-scaled kernels reach a lower fraction of their doubled peak)."""
    gemm_efficiency_fp4: Sourced | None = None
    """eff_max of NVFP4 GEMMs."""
    moe_efficiency: Sourced | None = None
    """Fraction of the GEMM efficiency that grouped MoE expert GEMMs reach (routing, permutes, small groups);
    BF16 experts, and FP8/FP4 ones where their own constant is absent."""
    moe_efficiency_fp8: Sourced | None = None
    """The same for experts computing at FP8 (block-scaled FP8, MXFP4 weights with MXFP8 activations)."""
    moe_efficiency_fp4: Sourced | None = None
    """The same for NVFP4 experts (FP4 weights and activations)."""
    moe_inter_half: Sourced | None = None
    """Expert intermediate size per GPU at which grouped BF16 expert GEMMs reach half their efficiency:
    the moe_efficiency of an expert i wide on a GPU is scaled by i / (i + moe_inter_half) (small experts
    fill tensor-core tiles poorly and pay routing/permute per expert); 0 or absent: no shape term."""
    moe_inter_half_fp8: Sourced | None = None
    """The same for FP8 experts."""
    moe_inter_half_fp4: Sourced | None = None
    """The same for NVFP4 experts."""
    gemm_kernel_us: Sourced | None = None
    """Fixed time per dense GEMM kernel (launch, prologue, tail wave), µs; replaces kernel_launch_us there."""
    attention_kernel_us: Sourced | None = None
    """Fixed time per attention kernel per layer (prefill or decode), µs."""
    moe_kernel_us: Sourced | None = None
    """Fixed time per grouped MoE GEMM kernel (incl. routing/permute kernels around it), µs; BF16 experts,
    and FP8/FP4 ones where their own constant is absent."""
    moe_kernel_us_fp8: Sourced | None = None
    """The same for experts computing at FP8 (a backend's FP8 grouped kernel may be another kernel)."""
    moe_kernel_us_fp4: Sourced | None = None
    """The same for NVFP4 experts."""
    collective_kernel_us: Sourced | None = None
    """Fixed time per all-reduce / send-recv call beyond its alpha-beta cost, µs."""
    alltoall_kernel_us: Sourced | None = None
    """Fixed time per MoE dispatch or combine call inside the NVLink domain beyond α·log2(EP) and its bytes, µs:
    a one-sided all-to-all's synchronisation and layout kernels, which cost the same from EP 8 to EP 64."""
    allreduce_small_busbw_fraction: Sourced | None = None
    """Bus bandwidth of all-reduces well below `allreduce_knee_mb` inside the NVLink domain, as a fraction of
    the link bandwidth (`collectives.allreduce_seconds`); absent: `allreduce_busbw_fraction` (one rate)."""
    allreduce_knee_mb: Sourced | None = None
    """Message size (MB, 10^6 bytes) around which NVLink all-reduces pass from the small-message rate to
    `allreduce_busbw_fraction`; absent or 0: one rate."""
    attention_prefill_kernel_us: Sourced | None = None
    """Fixed time of one prefill-attention kernel (per layer and step), µs; absent: `attention_kernel_us`."""
    attention_prefill_keys_half: Sourced | None = None
    """Keys per query (a prompt chunk's causal pairs over its tokens, about half a full prompt's length) at
    which prefill attention reaches half of `attention_prefill_flops_fraction`; absent or 0: no length
    dependence."""
    request_overhead_ms: Sourced | None = None
    """Per-request front-end time before the engine sees a request (HTTP, tokenizer, scheduler), ms; paid
    behind an HTTP front end (`Deployment.frontend`)."""
    handoff_overhead_ms: Sourced | None = None
    """Disaggregated serving: fixed time of a prefill → decode handoff beyond moving the KV bytes
    (transfer setup and completion polling, decode-side admission), ms."""
    layer_overhead_us: Sourced | None = None
    """Fixed time per transformer layer per step that serving does not hide (small kernels between the
    modelled ones, CUDA-graph gaps, synchronisation), µs; each step adds it once per layer to step_overhead_us."""
    attention_decode_flops_fraction: Sourced | None = None
    """Achievable fraction of peak FLOPS for decode attention math (compute-bound MLA decode, MTP verify);
    the decode kernels differ from the prefill ones (FlashMLA decode against FlashAttention prefill)."""
    host_seq_us: Sourced | None = None
    """Host time per scheduled sequence per step (scheduling, sampling bookkeeping, response handling), µs.
    The part the overlap scheduler does not hide: behind an HTTP front end (`Deployment.frontend`) it adds
    seqs · host_seq_us to the step (busiest attention-DP rank)."""
    kv_memory: KvMemory = KvMemory()
    """How the engine sizes its KV cache pool (TensorRT-LLM's rule unless the profile says otherwise)."""
    adp_balance: OfferedAdpBalance | None = None
    """The attention-DP balance this generation offers. The deployment search runs its attention-DP
    candidates with it, as submitters do; elsewhere a deployment's own `adp_balance` runs (the engines'
    default: none). Absent: the generation has none."""
    features: ServingFeatures = ServingFeatures()
    """The serving features this generation runs (`ServingFeatures`)."""
    graph_batches: GraphBatches | None = None
    """The decode batch sizes captured as graphs and padded to (`GraphBatches`); absent: every size."""
    lm_head: LmHeadSplit = LmHeadSplit()
    """How the LM head is split under attention DP (`LmHeadSplit`)."""
    overrides: dict[str, dict[str, Sourced]] = {}
    """Per GPU architecture (`GpuSpec.architecture`, e.g. hopper, blackwell, rubin): constants replaced."""
    table_timing: dict[str, Sourced] = {}
    """Constants replaced on every architecture under `timing: table`, whose kernel times come from the
    measured tables with each kernel's fixed time in them: the serving overheads refitted with those
    kernel times (`gpusim calibrate --timing table`, recorded in `table_calibration`)."""
    table_calibration: dict[str, object] | None = None
    source: str | None = None
    calibration: dict[str, object] | None = None
    """How the constants were fitted: `command`, `date`, `data`, `fit` and `held_out` errors (gpusim calibrate)."""

    @model_validator(mode="before")
    @classmethod
    def _inherit(cls, data: object) -> object:
        """A profile with a `base`: the base's fields, then this file's (`base` docstring)."""
        if not isinstance(data, dict) or not data.get("base"):
            return data
        own = dict(data)
        base = load_software(str(own["base"]), f"software profile {own.get('id', '?')}, field base")
        merged = base.model_dump(exclude_none=True, exclude={"id", "name", "base", "source", "inherited_grade"})
        if own.get("inherited_grade"):
            merged = cls._carried(merged, base.id, str(own["inherited_grade"]))
        overrides = {arch: {k: v for k, v in over.items() if k not in own}
                     for arch, over in merged.get("overrides", {}).items()}
        for arch, over in (own.pop("overrides", None) or {}).items():
            overrides[arch] = {**overrides.get(arch, {}), **over}
        return {**merged, **own, "overrides": {a: o for a, o in overrides.items() if o}}

    @staticmethod
    def _carried(merged: dict, base: str, grade: str) -> dict:
        """The base's top-level constants carried over at `grade`; its per-architecture overrides, table timing
        and calibration (measured on the base's own stack) are left behind."""
        out = {k: v for k, v in merged.items()
               if k not in ("overrides", "table_timing", "table_calibration", "calibration")}
        for name in CONSTANTS:
            if name in out:
                c = out[name]
                out[name] = {"value": c["value"], "grade": grade,
                             "source": f"assumed: {base}'s value, grade {c['grade']} there ({c['source']})",
                             "note": f"not measured on this stack; {base}'s constant is carried over unchanged"}
        return out

    @model_validator(mode="after")
    def _check(self) -> SoftwareProfile:
        for where, consts in (*((f"overrides.{a}", c) for a, c in self.overrides.items()),
                              ("table_timing", self.table_timing)):
            bad = sorted(set(consts) - set(CONSTANTS))
            if bad:
                raise ValueError(f"{where}: unknown constant(s) {bad}; valid: {', '.join(CONSTANTS)}")
        for name in CONSTANTS:
            if getattr(self, name) is None:
                continue
            v = getattr(self, name).value
            if name in FRACTIONS and not 0 < v <= 1:
                raise ValueError(f"{name} must be a fraction in (0, 1], got {v}")
            if v < 0:
                raise ValueError(f"{name} must not be negative, got {v}")
        if self.moe_imbalance.value < 1:
            raise ValueError("moe_imbalance must be >= 1 (busiest rank over mean)")
        return self

    def value(self, name: str) -> float:
        """A constant's value, an absent optional one resolved by `DEFAULTS`."""
        c = getattr(self, name)
        if c is not None:
            return float(c.value)
        d = DEFAULTS[name]
        return self.value(d) if isinstance(d, str) else float(d)

    def gemm_efficiency(self, dtype: str, expert_inter: float | None = None) -> float:
        """eff_max of a GEMM computing at `dtype` (bf16, fp8, fp4); with `expert_inter` (the expert
        intermediate size on one GPU), of grouped MoE expert GEMMs that wide."""
        eff = self.value(precision_constant("gemm_efficiency", dtype))
        if expert_inter is None:
            return eff
        half = self.value(precision_constant("moe_inter_half", dtype))
        return eff * self.value(precision_constant("moe_efficiency", dtype)) * expert_inter / (expert_inter + half)

    def gemm_bandwidth_fraction(self, dtype: str) -> float:
        """Achievable fraction of peak HBM bandwidth of a dense GEMM computing at `dtype` (bf16, fp8, fp4)."""
        return self.value("hbm_bandwidth_fraction_fp4" if dtype == "fp4" else "hbm_bandwidth_fraction")

    def moe_kernel_s(self, dtype: str) -> float:
        """Fixed seconds per grouped MoE kernel computing at `dtype` (bf16, fp8, fp4)."""
        return self.value(precision_constant("moe_kernel_us", dtype)) * 1e-6

    def for_architecture(self, architecture: str) -> SoftwareProfile:
        """This profile with the overrides of `architecture` applied (itself when there are none)."""
        over = self.overrides.get(architecture)
        return self.model_copy(update=over) if over else self

    def for_timing(self, timing: str) -> SoftwareProfile:
        """This profile as `timing` uses it: under `table`, `table_timing`'s constants on every architecture."""
        if timing != "table" or not self.table_timing:
            return self
        t = self.table_timing
        overrides = {arch: {k: v for k, v in over.items() if k not in t} for arch, over in self.overrides.items()}
        return self.model_copy(update={**t, "overrides": overrides})


_OVERLAY: dict[str, SoftwareProfile] = {}
"""Profiles given as data (`software_overlay`), which `load_software` returns in place of the files."""


def software_names() -> list[str]:
    """The profiles' names: the shipped and `GPUSIM_PATH` files', then any overlaid one without a file."""
    files = names("software")
    return files + [n for n in _OVERLAY if n not in files]


def load_software(name: str, source: str = "command line") -> SoftwareProfile:
    """The overlaid profile `name` (`software_overlay`), else hardware_profiles/software/<name>.yaml, a
    `GPUSIM_PATH` profile or a software file by path."""
    return _OVERLAY[name] if name in _OVERLAY else load_ref(SoftwareProfile, "software", name, "software", source)


def reload_software() -> None:
    """Forget the profile files read so far (after one is rewritten)."""
    clear_cache()


def overlaid() -> tuple[SoftwareProfile, ...]:
    """The profiles `software_overlay` gives now (`gpusim.parallel` hands them to its worker processes)."""
    return tuple(_OVERLAY.values())


@contextmanager
def software_overlay(*profiles: SoftwareProfile) -> Iterator[None]:
    """Within the block `load_software(p.id)` is `p` for each of `profiles`, whatever the files hold: a
    calibration's trial constants reach the engine as data and the tracked files stay as they are."""
    saved = dict(_OVERLAY)
    _OVERLAY.update({p.id: p for p in profiles})
    try:
        yield
    finally:
        _OVERLAY.clear()
        _OVERLAY.update(saved)


__all__ = ["CONSTANTS", "DEFAULTS", "GraphBatches", "KvMemory", "OfferedAdpBalance", "SoftwareProfile", "load_software",
           "overlaid", "reload_software", "software_names", "software_overlay"]
