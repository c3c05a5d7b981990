"""Where instances sit (systems, NVLink domains) and the links a transfer between two of them crosses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpusim.errors import InputError
from gpusim.sim.fabric import Link
from gpusim.specs.hardware import Hardware

FAT_TREE_HOPS = 3
"""Switches between two NICs of a two-level fat tree (leaf, spine, leaf)."""


@dataclass(frozen=True)
class Placement:
    """GPUs [first_gpu, first_gpu + gpus) of the cluster, in `system` and NVLink `domain`."""

    first_gpu: int
    gpus: int
    system: int
    domain: int


@dataclass
class Topology:
    """GPUs grouped in NVLink domains and systems, joined by a scale-out fabric (a fat tree)."""

    systems: int = 1
    gpus_per_system: int = 1 << 20
    domain_gpus: int = 1 << 20
    nvlink_bw: float = 900e9
    """Per GPU, per direction, bytes/s."""
    nvlink_latency: float = 1e-6
    nic_bw: float = 100e9
    """Per GPU, per direction, between systems (after the fat tree's oversubscription), bytes/s."""
    scaleout_latency: float = 5e-6
    """One-way latency across the fat tree (NICs and switch hops)."""
    links_between: Callable[[int, int], float] | None = None
    """A domain of direct links (full mesh, torus): bytes/s per direction of the links joining two instances of
    so many GPUs each (`Hardware.links_between`); None for a switched domain, where a GPU reaches any peer at
    `nvlink_bw`."""
    _links: dict[tuple, Link] = field(default_factory=dict)

    @classmethod
    def from_hardware(cls, hw: Hardware) -> Topology:
        so = hw.scaleout
        hop = so.switch_latency_us.value if so.switch_latency_us else 0.0
        return cls(
            systems=hw.systems, gpus_per_system=hw.system.gpus, domain_gpus=hw.domain_gpus,
            nvlink_bw=hw.nvlink_bandwidth, nvlink_latency=hw.nvlink.latency_us.value * 1e-6,
            nic_bw=hw.scaleout_bandwidth, scaleout_latency=(so.latency_us.value + FAT_TREE_HOPS * hop) * 1e-6,
            links_between=None if hw.nvlink.topology == "switched" else hw.links_between,
        )

    @property
    def total_gpus(self) -> int:
        return self.systems * self.gpus_per_system

    def place(self, gpus_per_instance: list[int]) -> list[Placement]:
        """Lay instances out in order; one that fits in a system never straddles two. Where that runs out of GPUs
        (pools listed one after the other: four racks' prefill instances first leave no rack room for a 68-GPU
        decode instance), the largest instances are placed first, each in the first system with room for it."""
        try:
            return self._in_order(gpus_per_instance)
        except InputError:
            return self._largest_first(gpus_per_instance)

    def _in_order(self, sizes: list[int]) -> list[Placement]:
        out, gpu = [], 0
        for g in sizes:
            start_system = gpu // self.gpus_per_system
            if g <= self.gpus_per_system and (gpu + g - 1) // self.gpus_per_system != start_system:
                gpu = (start_system + 1) * self.gpus_per_system
            if gpu + g > self.total_gpus:
                raise self._no_room(sizes)
            out.append(self._at(gpu, g))
            gpu += g
        return out

    def _largest_first(self, sizes: list[int]) -> list[Placement]:
        """First fit, largest first: an instance larger than a system takes whole free systems in a row."""
        free = [self.gpus_per_system] * self.systems
        out: dict[int, Placement] = {}
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
            g = sizes[i]
            span = -(-g // self.gpus_per_system)
            if g > self.gpus_per_system:
                first = next((s for s in range(self.systems - span + 1)
                              if all(f == self.gpus_per_system for f in free[s:s + span])), None)
                if first is None:
                    raise self._no_room(sizes)
                free[first:first + span] = [0] * span
                out[i] = self._at(first * self.gpus_per_system, g)
                continue
            system = next((s for s in range(self.systems) if free[s] >= g), None)
            if system is None:
                raise self._no_room(sizes)
            out[i] = self._at((system + 1) * self.gpus_per_system - free[system], g)
            free[system] -= g
        return [out[i] for i in range(len(sizes))]

    def _at(self, first_gpu: int, gpus: int) -> Placement:
        return Placement(first_gpu, gpus, first_gpu // self.gpus_per_system, first_gpu // self.domain_gpus)

    def _no_room(self, sizes: list[int]) -> InputError:
        return InputError("deployment", "instances", f"{len(sizes)} instances need more than the "
                          f"{self.total_gpus} GPUs of the cluster (placed whole within systems)")

    def path(self, src: Placement, dst: Placement) -> tuple[tuple[Link, ...], float]:
        """Links (egress, [spine], ingress) and latency of a transfer from `src` to `dst`. In a full-mesh domain
        the two instances' GPUs are joined by one link per pair (src.gpus · dst.gpus of them), which caps the
        transfer below the GPUs' egress and ingress."""
        if src.domain == dst.domain:
            out, into = self._link("nvl_out", src, self.nvlink_bw), self._link("nvl_in", dst, self.nvlink_bw)
            if self.links_between is None:
                return (out, into), self.nvlink_latency
            key = ("mesh", src.first_gpu, dst.first_gpu)
            if key not in self._links:
                self._links[key] = Link(f"mesh@{src.first_gpu}->{dst.first_gpu}",
                                        self.links_between(src.gpus, dst.gpus))
            return (out, self._links[key], into), self.nvlink_latency
        return (self._link("nic_out", src, self.nic_bw), self._link("nic_in", dst, self.nic_bw)), \
            self.scaleout_latency

    def _link(self, kind: str, p: Placement, per_gpu: float) -> Link:
        key = (kind, p.first_gpu)
        if key not in self._links:
            self._links[key] = Link(f"{kind}@{p.first_gpu}", per_gpu * p.gpus)
        return self._links[key]
