"""GPU, system and fabric profiles (hardware_profiles/*.yaml) and the resolved `Hardware` a run uses."""

from __future__ import annotations

import math
from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusim.errors import InputError
from gpusim.specs import torus
from gpusim.specs.catalog import is_path, load_ref, names, resolve, shipped_dir, shipped_root
from gpusim.specs.loading import load_yaml_model
from gpusim.specs.sourced import Grade, Sourced, non_negative, positive

Num = TypeVar("Num", int, float, np.ndarray)

Dtype = Literal["bf16", "fp8", "fp4"]
"""Tensor-core precisions gpusim models. `fp4` means NVFP4 (block-scaled FP4)."""

PROFILES = shipped_root("hardware_profiles")
"""The shipped hardware profiles (the package data `gpusim.hardware_profiles`)."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuSpec(_Spec):
    """One GPU: dense peak FLOPS per precision, HBM, links and power."""

    id: str
    name: str
    architecture: str
    variant_of: str | None = None
    dense_tflops: dict[Dtype, Sourced]
    """Dense (no 2:4 sparsity) tensor-core TFLOPS per precision; absent precisions are unsupported."""
    hbm_capacity_gib: Sourced
    """Capacity usable by the application (as nvidia-smi reports it)."""
    hbm_bandwidth_tbps: Sourced
    nvlink: str
    """Fabric id of the GPU's NVLink generation (hardware_profiles/fabrics/)."""
    scaleout_nic: str
    """Fabric id of the GPU's scale-out NIC (hardware_profiles/fabrics/)."""
    tdp_w: Sourced
    exp_tera_per_s: Sourced | None = None
    """Softmax exponentials per second (MUFU.EX2 on the SFUs), 10^12/s. Prompt attention spends one per
    query-key pair and head beside its tensor-core FLOPs (`perf.timer`); absent, only the FLOPs count."""
    tensor_pj_per_flop: dict[Dtype, Sourced] = Field(default_factory=dict)
    """Energy per dense tensor-core FLOP per precision, picojoules. Where it is given, a step's tensor work
    cannot draw more than the TDP (`perf.step`: the power limit); absent, the power limit is not modelled."""

    _positive = field_validator("hbm_capacity_gib", "hbm_bandwidth_tbps", "tdp_w", "exp_tera_per_s")(positive)

    def key_grade(self) -> Grade:
        """The weakest evidence grade among the numbers that set its speed: dense FLOPS, the softmax's exponential
        rate, HBM capacity and bandwidth, and the energy per FLOP where the power limit is modelled."""
        exp = (self.exp_tera_per_s,) if self.exp_tera_per_s is not None else ()
        return max(s.grade for s in (*self.dense_tflops.values(), *self.tensor_pj_per_flop.values(), *exp,
                                     self.hbm_capacity_gib, self.hbm_bandwidth_tbps))

    @field_validator("dense_tflops", "tensor_pj_per_flop")
    @classmethod
    def _positive_values(cls, v: dict[Dtype, Sourced]) -> dict[Dtype, Sourced]:
        for s in v.values():
            positive(s)
        return v


class FabricSpec(_Spec):
    """An interconnect, per GPU: a scale-up fabric inside a domain (NVLink, AMD Infinity Fabric / xGMI, UALink,
    TPU ICI) or a scale-out NIC generation (InfiniBand, RDMA Ethernet)."""

    id: str
    name: str
    kind: Literal["nvlink", "xgmi", "ualink", "ici", "infiniband", "ethernet"]
    """The technology, for the reader; the model reads `topology`, the rates and the latencies."""
    bandwidth_gbps_per_dir: Sourced
    """Per-GPU bandwidth in one direction, GB/s (bytes): on a full mesh, the sum of the GPU's `links`."""
    latency_us: Sourced
    """One-way small-message latency per hop (alpha), microseconds."""
    switch_latency_us: Sourced | None = None
    """Latency added per switch traversal (InfiniBand), microseconds."""
    sharp: bool = False
    """In-network reduction (NVLink SHARP / NVLS, InfiniBand SHARP) available."""
    topology: Literal["switched", "full_mesh", "torus"] = "switched"
    """How a domain's GPUs reach each other. `switched` (NVSwitch): every GPU reaches any peer at its full
    bandwidth. `full_mesh` (an 8-GPU Infinity Fabric platform): one direct link per peer pair, each
    `bandwidth_gbps_per_dir / links`, so a GPU moves its full bandwidth only while it talks to `links` peers
    at once. `torus` (TPU ICI): a link to each neighbour along each axis of `torus_dims`, so what a GPU moves
    depends on the axes its group spans and on the pattern (`gpusim.specs.torus`; `Hardware.domain_bandwidth`)."""
    links: int | None = Field(None, ge=1, le=2**10)
    """`full_mesh`: direct links per GPU, one to each peer (the domain may hold at most links + 1 GPUs).
    `torus`: two per axis, one to each neighbour (derived from `torus_dims` where not given)."""
    torus_dims: list[int] | None = None
    """`torus`: the chips along each axis of the torus a domain is (4, 4, 4 for a TPU cube)."""

    _positive = field_validator("bandwidth_gbps_per_dir")(positive)
    _non_negative = field_validator("latency_us", "switch_latency_us")(non_negative)

    @model_validator(mode="before")
    @classmethod
    def _torus_links(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("topology") == "torus" and data.get("links") is None \
                and isinstance(data.get("torus_dims"), list):
            data = {**data, "links": 2 * len(data["torus_dims"])}
        return data

    @model_validator(mode="after")
    def _mesh_links(self) -> FabricSpec:
        if self.topology == "full_mesh" and self.links is None:
            raise ValueError("links: a full_mesh fabric needs its links per GPU; valid: an integer >= 1")
        if self.topology == "switched" and self.links is not None:
            raise ValueError("links: only a full_mesh or torus fabric has links per GPU; valid: topology: "
                             "full_mesh or torus, or no links")
        if self.topology == "torus":
            dims = self.torus_dims
            if not dims or any(d < 1 for d in dims):
                raise ValueError("torus_dims: a torus fabric needs the chips along each axis; valid: a list of "
                                 "integers >= 1, e.g. [4, 4, 4]")
            if self.links != 2 * len(dims):
                raise ValueError(f"links: a {len(dims)}-axis torus has {2 * len(dims)} links per chip, one to "
                                 f"each neighbour; valid: {2 * len(dims)} or no links")
        elif self.torus_dims is not None:
            raise ValueError("torus_dims: only a torus fabric has axes; valid: topology: torus, or no torus_dims")
        return self

    def domain_gpus_max(self) -> int | None:
        """The most GPUs one domain of this fabric connects (None: as many as the system has)."""
        if self.topology == "full_mesh" and self.links is not None:
            return self.links + 1
        if self.topology == "torus" and self.torus_dims:
            return math.prod(self.torus_dims)
        return None


KVTierName = Literal["host", "storage", "network"]
KV_TIER_ORDER: tuple[KVTierName, ...] = ("host", "storage", "network")
"""The tiers below HBM, nearest first: host memory, local drives, shared storage over the network."""


class KVTier(_Spec):
    """Memory below HBM that an engine's KV block manager offloads prefix blocks to and reloads them from (Dynamo
    KVBM's G2 host and G3 disk tiers, LMCache): its capacity and read bandwidth, each per GPU."""

    name: KVTierName
    capacity_gb_per_gpu: Sourced
    """Gigabytes (1e9) of KV blocks the tier keeps for each GPU."""
    bandwidth_gbps_per_gpu: Sourced
    """Gigabytes per second one GPU reads its KV back at: the narrower of its link (NVLink-C2C, PCIe) and its share
    of the memory's or drives' bandwidth."""
    latency_us: Sourced
    """Fixed time of one reload (a transfer's set-up), microseconds."""

    _positive = field_validator("capacity_gb_per_gpu", "bandwidth_gbps_per_gpu")(positive)


class SystemSpec(_Spec):
    """A system: GPUs in NVLink domains, CPUs, scale-out NICs, power."""

    id: str
    name: str
    gpu: str
    gpus: int = Field(ge=1, le=2**16)
    """GPUs in one system (a rack for NVL72, a node for HGX)."""
    nvlink_domain_gpus: int = Field(ge=1, le=2**16)
    cpu: str | None = None
    cpus: int = Field(0, ge=0)
    nvlink: str
    scaleout: str
    power_kw: Sourced
    """Power of the whole system at full load (rack or node), kW."""
    form_factor: Literal["hgx", "oam", "rack", "edge"]
    """hgx: an NVIDIA 8-GPU baseboard node; oam: an OCP OAM 8-GPU baseboard node (AMD Instinct platform); rack:
    a rack-scale domain; edge: one module."""
    software: str | None = None
    """The serving stack (a software profile) the system's rule deployment runs where it has no searched
    default (`deploy.default_with_origin`): the stack its vendor's MLPerf submissions use. Absent: trtllm."""
    base: str | None = None
    """The shipped system this one is derived from (a what-if on its numbers): it runs that system's searched
    default deployments (`gpusim.defaults`) unless a deployment is given or searched."""
    kv_tiers: list[KVTier] = []
    """Memory below HBM for offloaded KV (host, storage, network), at most one of each, in `KV_TIER_ORDER`
    (`Deployment.kv_offload`)."""
    source: str | None = None

    _positive = field_validator("power_kw")(positive)

    @field_validator("kv_tiers")
    @classmethod
    def _tiers_in_order(cls, tiers: list[KVTier]) -> list[KVTier]:
        names = [t.name for t in tiers]
        if names != sorted(set(names), key=KV_TIER_ORDER.index):
            raise ValueError(f"at most one tier of each kind, in the order {', '.join(KV_TIER_ORDER)}; got {names}")
        return tiers

    @field_validator("base")
    @classmethod
    def _shipped_base(cls, base: str | None) -> str | None:
        if base is not None and base not in shipped_systems():
            raise ValueError(f"{base!r} is not a shipped system; valid: {', '.join(shipped_systems())}")
        return base


class Hardware(_Spec):
    """A system with its GPU and fabrics resolved: what the cost model and the engine use."""

    system: SystemSpec
    gpu: GpuSpec
    nvlink: FabricSpec
    scaleout: FabricSpec
    systems: int = 1
    oversubscription: float = 1.0
    """Scale-out fat tree: traffic between systems gets the NIC bandwidth divided by this."""

    @property
    def id(self) -> str:
        return self.system.id

    @property
    def num_gpus(self) -> int:
        return self.system.gpus * self.systems

    @property
    def domain_gpus(self) -> int:
        return self.system.nvlink_domain_gpus

    def peak_flops(self, dtype: Dtype) -> float:
        """Dense FLOP/s at `dtype`; a missing precision falls back to the next wider one."""
        return _at_or_wider(self.gpu.dense_tflops, dtype, self.gpu.id, "dense_tflops") * 1e12

    def tensor_joules_per_flop(self) -> dict[Dtype, float]:
        """Joules per dense tensor-core FLOP per precision (empty: the power limit is not modelled); a missing
        precision costs what the next wider one does, as `peak_flops` runs it there."""
        e = self.gpu.tensor_pj_per_flop
        return {d: _at_or_wider(e, d, self.gpu.id, "tensor_pj_per_flop") * 1e-12 for d in _WIDER} if e else {}

    def supports(self, dtype: Dtype) -> bool:
        return dtype in self.gpu.dense_tflops

    @property
    def exp_per_s(self) -> float:
        """Softmax exponentials per second (inf where the profile gives none: exponentials cost nothing)."""
        e = self.gpu.exp_tera_per_s
        return e.value * 1e12 if e is not None else float("inf")

    @property
    def hbm_bytes(self) -> float:
        return self.gpu.hbm_capacity_gib.value * 2**30

    @property
    def hbm_bandwidth(self) -> float:
        """Bytes/s."""
        return self.gpu.hbm_bandwidth_tbps.value * 1e12

    @property
    def nvlink_bandwidth(self) -> float:
        """Per-GPU, per-direction bytes/s of the domain's fabric (NVLink, Infinity Fabric), all links together."""
        return self.nvlink.bandwidth_gbps_per_dir.value * 1e9

    def domain_bandwidth(self, peers: Num, alltoall: bool = False) -> Num:
        """Per-GPU, per-direction bytes/s a GPU moves while it sends to `peers` GPUs of its domain at once: a
        point-to-point transfer has 1, a collective over a group of n GPUs n - 1 (its ring or one-shot steps
        keep every peer's link busy). Switched: the full `nvlink_bandwidth` whatever the peers. Full mesh:
        one link per peer, `nvlink_bandwidth / links` each, at most all `links`. Torus: the links the group's
        axes give a ring collective, or, for an `alltoall`, what the torus' bisection lets through
        (`gpusim.specs.torus`)."""
        fabric = self.nvlink
        if fabric.topology == "switched" or fabric.links is None:
            return self.nvlink_bandwidth
        per_link = self.nvlink_bandwidth / fabric.links
        if fabric.topology == "full_mesh":
            return per_link * np.clip(peers, 1, fabric.links)  # also a column of groups
        dims, rate = fabric.torus_dims or [], torus.alltoall_links if alltoall else torus.ring_links
        links = np.vectorize(lambda p: rate(dims, int(p) + 1), otypes=[float])(peers)
        return per_link * (float(links) if np.ndim(links) == 0 else links)

    def links_between(self, src_gpus: int, dst_gpus: int) -> float:
        """Bytes/s per direction of the direct links joining two instances of one domain: on a full mesh one link
        per pair of their GPUs; on a torus their boxes meet face to face, one link per GPU of the smaller."""
        pairs = src_gpus * dst_gpus if self.nvlink.topology == "full_mesh" else min(src_gpus, dst_gpus)
        return self.domain_bandwidth(1) * pairs

    @property
    def scaleout_bandwidth(self) -> float:
        """Per-GPU, per-direction scale-out bytes/s between systems (NIC rate over the oversubscription)."""
        return self.scaleout.bandwidth_gbps_per_dir.value * 1e9 / self.oversubscription

    def derived(self) -> dict[str, float]:
        """Totals users ask for: system FLOPS per precision, HBM, NVLink bandwidth, and where the power limit is
        modelled the dense FLOPS the TDP sustains (`_at_tdp`)."""
        g = self.system.gpus
        out = {f"system_{d}_pflops": t.value * g / 1e3 for d, t in self.gpu.dense_tflops.items()}
        out["system_hbm_tb"] = self.hbm_bytes * g / 1e12
        out["system_hbm_bandwidth_tbps"] = self.gpu.hbm_bandwidth_tbps.value * g
        out["system_nvlink_tbps_bidir"] = 2 * self.nvlink.bandwidth_gbps_per_dir.value * g / 1e3
        out["system_scaleout_tbps_per_dir"] = self.scaleout.bandwidth_gbps_per_dir.value * g / 1e3
        out["system_power_kw"] = self.system.power_kw.value
        tdp = self.gpu.tdp_w.value
        for d, joules in self.tensor_joules_per_flop().items():  # what the power limit lets dense work sustain
            if d in self.gpu.dense_tflops:
                out[f"system_{d}_pflops_at_tdp"] = min(self.peak_flops(d), tdp / joules) * g / 1e15
        return out


_WIDER: list[Dtype] = ["fp4", "fp8", "bf16"]


def _at_or_wider(values: dict[Dtype, Sourced], dtype: Dtype, gpu: str, field: str) -> float:
    """The value of `dtype`, else of the next wider precision that has one."""
    wider = _WIDER[_WIDER.index(dtype):]
    for d in wider:
        if d in values:
            return values[d].value
    raise InputError(gpu, field, f"no value at or above {dtype}; valid: give {' or '.join(wider)}")


def system_names() -> list[str]:
    return names("systems")


def load_system(name: str, source: str = "command line") -> SystemSpec:
    """A system profile by name or path; its `gpu`, `nvlink` and `scaleout` may be files beside it. A shipped
    or `GPUSIM_PATH` profile's id must be its file's name."""
    spec = load_ref(SystemSpec, "systems", name, "hardware", source,
                    refs={"gpu": "gpus", "nvlink": "fabrics", "scaleout": "fabrics", "software": "software"})
    if not is_path(name) and spec.id != name:
        raise InputError(str(resolve("systems", name, source, "hardware")), "id",
                         f"{spec.id!r} is not the file's name; valid: {name!r}")
    return spec


def load_gpu(name: str, source: str = "command line") -> GpuSpec:
    return load_ref(GpuSpec, "gpus", name, "gpu", source, refs={"nvlink": "fabrics", "scaleout_nic": "fabrics"})


def load_fabric(name: str, source: str = "command line") -> FabricSpec:
    return load_ref(FabricSpec, "fabrics", name, "fabric", source)


def load_hardware(name: str, systems: int = 1, oversubscription: float = 1.0) -> Hardware:
    """Resolve system `name` (a profile name, or a system YAML by path) with its GPU and fabrics."""
    if systems < 1:
        raise InputError("command line", "systems", f"must be a positive integer, got {systems}")
    if oversubscription < 1:
        raise InputError("command line", "oversubscription", f"must be >= 1, got {oversubscription}")
    sys_spec = load_system(name)
    nvlink = load_fabric(sys_spec.nvlink, sys_spec.id)
    most = nvlink.domain_gpus_max()
    if most is not None and sys_spec.nvlink_domain_gpus > most:
        how = f"a {'x'.join(map(str, nvlink.torus_dims or []))} torus" if nvlink.topology == "torus" else \
            f"{nvlink.links} links per GPU, fully connected"
        raise InputError(str(resolve("systems", name, "command line", "hardware")), "nvlink_domain_gpus",
                         f"{sys_spec.nvlink_domain_gpus} GPUs do not fit {nvlink.id}'s domain ({how}); "
                         f"valid: at most {most}")
    return Hardware(
        system=sys_spec,
        gpu=load_gpu(sys_spec.gpu, sys_spec.id),
        nvlink=nvlink,
        scaleout=load_fabric(sys_spec.scaleout, sys_spec.id),
        systems=systems,
        oversubscription=oversubscription,
    )


def _values(doc: object) -> object:
    """A dumped profile without its provenance (sources, grades, notes): the numbers and names that matter."""
    if isinstance(doc, dict):
        return {k: _values(v) for k, v in doc.items() if k not in ("source", "grade", "note")}
    return [_values(v) for v in doc] if isinstance(doc, list) else doc


def hardware_key(hw: Hardware) -> object:
    """What the model sees of a system, one system of it: equal for a renamed copy of a profile (another id,
    name, or sources) and different as soon as a number, a GPU or a fabric differs."""
    naming = {"id", "name", "gpu", "nvlink", "scaleout", "variant_of", "scaleout_nic", "base"}
    return _values([part.model_dump(exclude=naming) for part in (hw.system, hw.gpu, hw.nvlink, hw.scaleout)])


def shipped_systems() -> list[str]:
    """The names of the systems gpusim ships."""
    return [p.stem for p in sorted(shipped_dir("systems").glob("*.yaml"))]


def same_as_shipped(hw: Hardware) -> str | None:
    """The shipped system whose hardware `hw` is (its own id when it is one), or None: what a system's searched
    defaults (`gpusim.defaults`) are keyed by, so a renamed copy of a shipped profile runs as the original."""
    shipped = shipped_systems()
    if hw.id in shipped:
        return hw.id
    key = hardware_key(hw)
    return next((name for name in shipped if hardware_key(load_hardware(name)) == key), None)


def all_profiles() -> dict[str, list[str]]:
    """Every profile name by kind, for `gpusim list hardware`."""
    return {kind: names(kind) for kind in ("systems", "gpus", "fabrics")}


__all__ = ["Dtype", "FabricSpec", "GpuSpec", "Hardware", "SystemSpec", "load_hardware", "load_yaml_model"]
