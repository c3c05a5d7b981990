"""A first estimate of the request rate a deployment sustains, from the cost model alone.

MLPerf submitters size an Offline run from the `target_qps` they expect (LoadGen issues
max(min_query_count, 1.1 · min_duration · target_qps) samples); they find it with a trial run. This
estimate plays that role: each instance decodes a full batch (limited by `max_batch_size` and by the
KV cache at the mean context) and prefills each prompt in token-budget chunks.
"""

from __future__ import annotations

from gpusim.perf.memory import MemoryPlan
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment


def steady_state_qps(
    cost: StepCostModel, memory: MemoryPlan, dep: Deployment, instances: int, mean_isl: float, mean_osl: float
) -> float:
    """Requests per second of `instances` replicas at full batch for requests of the mean lengths."""
    seq_tokens = mean_isl + mean_osl
    batch = max(1, min(dep.max_batch_size, int(memory.kv_capacity_tokens // seq_tokens)))
    context = mean_isl + mean_osl / 2
    decode = cost.step_time(BatchShape(decode_seqs=batch, decode_context=int(batch * context)))
    chunk = max(1, min(dep.max_num_tokens, int(mean_isl * batch)))
    prefill = cost.step_time(BatchShape(prefill_tokens=chunk, prefill_attn_pairs=chunk * (mean_isl + 1) / 2,
                                        prefill_seqs=max(1, int(chunk / mean_isl))))
    seconds_per_request = decode * mean_osl / batch + prefill * mean_isl / chunk
    return instances / seconds_per_request
