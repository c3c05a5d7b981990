"""Cost of ranking with a generative recommender (DLRMv3, HSTU) on one instance.

A query is a user's interaction history (UIH) with the candidates to score appended: its prompt is U + C
tokens. An instance is `tp` GPUs that shard the embedding tables row-wise and run the dense HSTU stack data
parallel (each GPU a share of the batch), as TorchRec serving does. Per batch step:

- embedding lookups: every sequence token reads its item-id and category rows; a share (g − 1)/g of the
  rows lives on other GPUs and crosses NVLink (an all-to-all), less the GPU embedding cache's hit rate
  (`Deployment.embedding_cache_hit_rate`); local rows are a memory-bound gather;
- HSTU layers: the fused u/v/q/k and output projections per token, and pointwise (SiLU) attention over
  causal pairs within the history plus each candidate against the history (candidates do not see each
  other): U²/2 + C·U pairs, each 2·heads·(qk + linear) FLOPs.
"""

from __future__ import annotations

from gpusim.errors import InputError
from gpusim.perf.items import Kernels
from gpusim.perf.ops import wider
from gpusim.perf.step import BatchShape
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware
from gpusim.specs.recsys import RecsysModelSpec
from gpusim.specs.software import SoftwareProfile, load_software

BF16 = 2.0
WORKSPACE_SHARE = 0.1
"""HBM kept for activations and the framework beside the tables and weights (grade D)."""
DEFAULT_CACHE_HIT_RATE = 0.0
"""Without a GPU embedding cache every remote row crosses the fabric (the rule when the deployment sets none)."""


class RecsysCost:
    """Seconds of a batch of recommendation queries on one instance (`ItemCost`; its rates count engine
    requests, each `samples_per_request` queries)."""

    def __init__(self, hw: Hardware, model: RecsysModelSpec, dep: Deployment, samples_per_request: int = 1,
                 software: SoftwareProfile | None = None, source: str = "deployment") -> None:
        sw = (software or load_software(dep.software)).for_architecture(hw.gpu.architecture)
        self.hw, self.model, self.dep = hw, model, dep
        self.k = Kernels(hw, sw)
        self.gpus = dep.tp * dep.pp
        self.per_request = samples_per_request
        """Queries in one engine request (a SUT batch of queries of the request's sequence length)."""
        self.dtype = wider(dep.weights, dep.activations)
        hit = dep.embedding_cache_hit_rate
        self.hit_rate = DEFAULT_CACHE_HIT_RATE if hit is None else hit
        inside = self.gpus <= hw.domain_gpus
        self._bw = (hw.domain_bandwidth(self.gpus - 1, alltoall=True) if inside else hw.scaleout_bandwidth) * \
            sw.alltoall_efficiency.value
        self._alpha = sw.alltoall_hop_latency_us.value * 1e-6 if inside else \
            sw.alltoall_scaleout_hop_latency_us.value * 1e-6
        self._launch = sw.step_overhead_us.value * 1e-6
        self.check_memory(source)

    def tables_per_gpu(self) -> float:
        return self.model.embedding_bytes / self.gpus

    def check_memory(self, source: str) -> None:
        need = (self.tables_per_gpu() + self.model.dense_params * BF16) / (1 - WORKSPACE_SHARE)
        if need > self.hw.hbm_bytes:
            least = -(-self.model.embedding_bytes // (self.hw.hbm_bytes * (1 - WORKSPACE_SHARE)))
            raise InputError(source, "tp", f"{self.model.id}'s {self.model.embedding_bytes / 1e12:.2f} TB of "
                             f"embedding tables need {need / 2**30:.0f} GiB on each of {self.gpus} GPUs but "
                             f"{self.hw.gpu.name} has {self.hw.hbm_bytes / 2**30:.0f} GiB; valid: tp ≥ {int(least)}")

    def parts(self, b: BatchShape) -> dict[str, float]:
        """Seconds of one step by part, per GPU (the batch split evenly over the instance's GPUs)."""
        m, g = self.model, self.gpus
        r = self.per_request
        queries, tokens = b.prefill_seqs * r, b.prefill_tokens * r
        if queries <= 0:
            return {}
        c = min(m.candidates, tokens / queries)
        # the engine counts the causal pairs of the whole sequence; candidates do not attend to each other
        pairs = max(b.prefill_attn_pairs * r - queries * c * (c - 1) / 2, 0.0)
        t_gpu, pairs_gpu = tokens / g, pairs / g
        lookup = tokens * m.lookup_bytes_per_token
        remote = lookup * (g - 1) / g * (1 - self.hit_rate) / g
        wbytes = Kernels.bytes_per_value(self.dep.weights)
        dense = m.num_layers * self.k.gemm(2 * t_gpu * m.layer_params, m.layer_params * wbytes, t_gpu, self.dtype,
                                           act_bytes=t_gpu * m.embedding_dim * BF16 * 6)
        attn = m.num_layers * self.k.attention(pairs_gpu * 2 * m.num_heads * (m.qk_dim + m.linear_dim),
                                               pairs_gpu * m.num_heads)  # one SiLU exponential per score
        return {"embedding_gather": self.k.memory(lookup / g),
                "embedding_alltoall": (remote / self._bw + self._alpha) if g > 1 else 0.0,
                "hstu_dense": dense, "hstu_attention": attn, "overhead": self._launch}

    def step_time(self, b: BatchShape) -> float:
        return sum(self.parts(b).values())

    def items_per_s(self, batch: int, work: float) -> float:
        shape = BatchShape(prefill_tokens=int(batch * work), prefill_attn_pairs=batch * work * (work + 1) / 2,
                           prefill_seqs=batch)
        return batch / self.step_time(shape)


__all__ = ["RecsysCost"]
