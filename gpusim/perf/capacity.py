"""A first estimate of the request rate a deployment sustains, from the cost model alone.

MLPerf submitters size an Offline run from the `target_qps` they expect (LoadGen issues
max(min_query_count, 1.1 · min_duration · target_qps) samples); they find it with a trial run. This
estimate plays that role: an instance decodes a full batch (limited by `max_batch_size` and by the KV
cache at the mean context) and prefills each prompt in token-budget chunks. An aggregated instance
does both in turn; a disaggregated deployment runs at the pace of its slower pool.
"""

from __future__ import annotations

from gpusim.perf.items import ItemCost
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment


def decode_rate(cost: StepCostModel, kv_capacity_tokens: int, dep: Deployment, isl: float, osl: float,
                batch: int | None = None) -> float:
    """Requests per second one instance finishes decoding at `batch` sequences (default: a full batch)."""
    full = max(1, min(dep.max_batch_size, int(kv_capacity_tokens // (isl + osl))))
    batch = full if batch is None else max(1, min(batch, full))
    step = cost.step_time(BatchShape(decode_seqs=batch, decode_context=batch * (isl + osl / 2)))
    rate = dep.mtp.expected_tokens_per_step if dep.mtp else 1.0
    return batch * rate / (step * osl)


def prefill_rate(cost: StepCostModel, dep: Deployment, isl: float) -> float:
    """Requests per second one instance prefills in full token-budget chunks."""
    chunk = max(1, dep.max_num_tokens)
    seqs = max(1, int(chunk / isl))
    step = cost.step_time(BatchShape(prefill_tokens=chunk, prefill_attn_pairs=chunk * (isl + 1) / 2,
                                     prefill_seqs=seqs))
    return chunk / (step * isl)


def instance_rate(role: str, cost: StepCostModel, kv_capacity_tokens: int, dep: Deployment,
                  isl: float, osl: float) -> float:
    """Requests per second one instance of `role` sustains: prefill and decode in turn when aggregated."""
    if isinstance(cost, ItemCost):  # whole items (gpusim/perf/items.py): a full batch of the mean work
        return cost.items_per_s(dep.max_batch_size, isl)
    p = prefill_rate(cost, dep, isl) if role != "decode" else float("inf")
    d = decode_rate(cost, kv_capacity_tokens, dep, isl, osl) if role != "prefill" else float("inf")
    return 1 / (1 / p + 1 / d)
