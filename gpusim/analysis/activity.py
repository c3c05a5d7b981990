"""What a run did over time, and where the time of its typical steps goes (for `gpusim report`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import pandas as pd

from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.perf.timer import RooflineTimer
from gpusim.sim.cluster import Pool, SimStats

if TYPE_CHECKING:
    from gpusim.loadgen.workload import Workload


def timeline_frame(stats: SimStats, kv_capacity_tokens: int, simulated_s: float) -> pd.DataFrame | None:
    """The engine's time-binned activity as a table (None when the engine kept no timeline)."""
    if stats.timeline is None:
        return None
    return stats.timeline.frame(stats.instances, kv_capacity_tokens, simulated_s)


def typical_steps(pool: Pool, stats: SimStats, workload: Workload) -> dict[str, dict]:
    """The step cost model's breakdown (compute, memory, communication, overhead; by op) of two steps of
    `pool` (a run's last): a decode step at the run's busy-time mean batch and context, and a prefill chunk of one mean
    prompt (capped at max_num_tokens). Empty for measured-table timing, whose parts are not the roofline's."""
    if not isinstance(pool.cost, StepCostModel) or not isinstance(pool.cost.timer, RooflineTimer):
        return {}
    shapes: dict[str, BatchShape] = {}
    tl = stats.timeline
    if tl is not None and sum(tl.sums["batch_s"]) > 0 and pool.role != "prefill":
        batch = max(1, round(sum(tl.sums["batch_s"]) / sum(tl.sums["busy_s"])))
        context = sum(tl.sums["kv_s"]) / sum(tl.sums["batch_s"])
        shapes["decode"] = BatchShape(decode_seqs=batch, decode_context=batch * context)
    if len(workload) and pool.role != "decode":
        chunk = int(min(float(workload.input_tokens.mean()), pool.deployment.max_num_tokens))
        shapes["prefill"] = BatchShape(prefill_tokens=chunk, prefill_attn_pairs=chunk * (chunk + 1) / 2,
                                       prefill_seqs=1)
    return {name: {"shape": asdict(shape), **asdict(pool.cost.breakdown(shape))} for name, shape in shapes.items()}
