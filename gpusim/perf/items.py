"""Shared pieces of the cost models of item workloads (an image through a vision encoder, a video through a
diffusion transformer, a recommendation query through HSTU): one GPU's achievable GEMM, attention and memory
rates under a software profile, and the `ItemCost` interface the engine and the capacity estimate use.

An item workload enters the engine as requests of one output token whose prompt is the item's work (one unit
per video, a user history's tokens per recommendation query): an instance's prefill step of `prefill_seqs`
items is the whole batch, so the engine, the load generator and the metrics are those of the LLMs
(docs/workloads.md). The rates follow the roofline of `gpusim/perf/roofline.py` with the software
profile's efficiencies; no constant here is fitted.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpusim.perf.ops import DTYPE_BYTES
from gpusim.perf.roofline import gemm_efficiency, op_time, prompt_attention_seconds
from gpusim.perf.step import BatchShape
from gpusim.specs.hardware import Dtype, Hardware
from gpusim.specs.software import SoftwareProfile


@runtime_checkable
class ItemCost(Protocol):
    """A cost model whose requests are whole items: the seconds of a batch step, and a steady item rate."""

    def step_time(self, b: BatchShape) -> float: ...

    def items_per_s(self, batch: int, work: float) -> float:
        """Items per second one instance serves at `batch` items of mean work `work` per step."""
        ...


class Kernels:
    """One GPU's roofline under a software profile (the same efficiencies the LLM step model uses)."""

    def __init__(self, hw: Hardware, sw: SoftwareProfile) -> None:
        self.hw, self.sw = hw, sw
        self._bw = hw.hbm_bandwidth * sw.hbm_bandwidth_fraction.value
        self._launch = sw.value("gemm_kernel_us") * 1e-6
        self._attn_launch = sw.value("attention_prefill_kernel_us") * 1e-6
        self._m_half = sw.gemm_m_half.value

    def gemm(self, flops: float, weight_bytes: float, rows: float, dtype: Dtype, act_bytes: float = 0.0) -> float:
        """A GEMM of `flops` over `rows` rows reading `weight_bytes` of weights and `act_bytes` of activations."""
        eff = gemm_efficiency(rows, self.sw.gemm_efficiency(dtype), self._m_half)
        bw = self.hw.hbm_bandwidth * self.sw.gemm_bandwidth_fraction(dtype)
        t, _ = op_time(flops, weight_bytes + act_bytes, self.hw.peak_flops(dtype), bw, max(eff, 1e-9), 1.0,
                       self._launch)
        return t

    def attention(self, flops: float, exps: float, dtype: Dtype = "bf16") -> float:
        """Attention of `flops` tensor-core FLOPs and `exps` exponentials (one per query-key pair and head), timed
        as the LLM step model times prompt attention (`roofline.prompt_attention_seconds`) at the profile's
        prefill attention fraction."""
        full_rate = prompt_attention_seconds(flops, exps, self.hw.peak_flops(dtype), self.hw.exp_per_s)
        return full_rate / self.sw.attention_prefill_flops_fraction.value + self._attn_launch

    def memory(self, bytes_: float) -> float:
        """Memory-bound traffic (norms, elementwise, gathers) at the profile's HBM fraction."""
        return bytes_ / self._bw

    @staticmethod
    def bytes_per_value(dtype: Dtype) -> float:
        return DTYPE_BYTES[dtype]


__all__ = ["ItemCost", "Kernels"]
