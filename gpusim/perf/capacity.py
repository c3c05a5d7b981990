"""A first estimate of the request rate a deployment sustains, from the cost model alone.

MLPerf submitters size an Offline run from the `target_qps` they expect (LoadGen issues
max(min_query_count, 1.1 · min_duration · target_qps) samples); they find it with a trial run. This
estimate plays that role: an instance decodes a full batch (limited by `max_batch_size` and by the KV
cache at the context of a sequence in flight, `Lengths`) and prefills each prompt in token-budget chunks.
An aggregated instance does both in turn; a disaggregated deployment runs at the pace of its slower pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpusim.perf.items import ItemCost
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment


@dataclass(frozen=True)
class Lengths:
    """A dataset's mean prompt and output, and the mean KV context of a sequence in the decoding batch."""

    isl: float
    osl: float
    context: float
    """KV tokens a sequence in flight holds on average. A sequence stays in the batch for as many steps as it
    has output tokens, so the batch holds long outputs more often than the dataset does (length bias):
    E[isl · osl] / E[osl] + E[osl²] / (2 E[osl]), which is isl + osl / 2 when every output is as long."""

    @classmethod
    def fixed(cls, isl: float, osl: float) -> Lengths:
        """Every request with the same lengths."""
        return cls(isl, osl, isl + osl / 2)

    @classmethod
    def of(cls, isl: np.ndarray, osl: np.ndarray) -> Lengths:
        """A dataset's lengths, request by request."""
        steps = float(osl.sum())
        return cls(float(isl.mean()), float(osl.mean()),
                   float((isl * osl).sum() + (osl.astype(float) ** 2).sum() / 2) / steps)

    def kv_batch(self, kv_capacity_tokens: float) -> int:
        """The most sequences whose KV fits in `kv_capacity_tokens` once the batch has turned over. An engine
        that admits more (its batch cap above this) runs out of KV as their contexts grow and preempts
        sequences to recompute them: it thrashes."""
        return max(1, int(kv_capacity_tokens // self.context))


def decode_rate(cost: StepCostModel, kv_capacity_tokens: int, dep: Deployment, lengths: Lengths,
                batch: int | None = None) -> float:
    """Requests per second one instance finishes decoding at `batch` sequences (default: a full batch)."""
    full = min(dep.max_batch_size, lengths.kv_batch(kv_capacity_tokens))
    batch = full if batch is None else max(1, min(batch, full))
    step = cost.step_time(BatchShape(decode_seqs=batch, decode_context=batch * lengths.context))
    rate = dep.mtp.expected_tokens_per_step if dep.mtp else 1.0
    return batch * rate / (step * lengths.osl)


def prefill_rate(cost: StepCostModel, dep: Deployment, isl: float) -> float:
    """Requests per second one instance prefills in full token-budget chunks."""
    chunk = max(1, dep.max_num_tokens)
    seqs = max(1, int(chunk / isl))
    step = cost.step_time(BatchShape(prefill_tokens=chunk, prefill_attn_pairs=chunk * (isl + 1) / 2,
                                     prefill_seqs=seqs))
    return chunk / (step * isl)


def instance_rate(role: str, cost: StepCostModel, kv_capacity_tokens: int, dep: Deployment,
                  lengths: Lengths) -> float:
    """Requests per second one instance of `role` sustains: prefill and decode in turn when aggregated."""
    if isinstance(cost, ItemCost):  # whole items (gpusim/perf/items.py): a full batch of the mean work
        return cost.items_per_s(dep.max_batch_size, lengths.isl)
    p = prefill_rate(cost, dep, lengths.isl) if role != "decode" else float("inf")
    d = decode_rate(cost, kv_capacity_tokens, dep, lengths) if role != "prefill" else float("inf")
    return 1 / (1 / p + 1 / d)
