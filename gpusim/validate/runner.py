"""Simulate a *model* (not an MLPerf benchmark) at a fixed concurrency and fixed ISL/OSL.

`gpusim.api.run_spec` needs a benchmark to pick the model; measured closed-loop points (the silicon
sample) name a model, a deployment and lengths instead. This drives the same pieces run_spec does:
`build.make_setup` (pools with their cost models and memory plans, aggregated or disaggregated) →
closed-loop workload → `Setup.simulate` → `metrics.summarize`. No benchmark is involved: the setup's
`bench` (used only for MLPerf-sized workloads) is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpusim.build import make_setup
from gpusim.loadgen.metrics import add_latency_columns, summarize
from gpusim.loadgen.scenarios import closed_loop
from gpusim.specs.deployment import Deployment
from gpusim.specs.experiment import Timing
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec


class Unsupported(Exception):
    """The simulator cannot model this case yet; the message says why."""


WAVES = 10
"""Requests per closed-loop run, in multiples of the concurrency: InferenceX (SemiAnalysis InferenceMAX)
issues num_prompts = 10 × concurrency."""

RANGE_RATIO = 0.8
"""Each request's ISL and OSL are drawn from [0.8·L, L], as InferenceX's client does (vLLM
benchmark_serving --random-range-ratio 0.8; SemiAnalysisAI/InferenceX README). Applied to every row:
the other sources do not document their client, and fixed lengths keep a simulated closed loop in
lock-step bursts that real clients do not see (on 2,000 rows this halves vLLM's TTFT MAPE)."""


def closed_loop_samples(concurrency: int, waves: int = WAVES) -> int:
    """Requests to issue: `waves` × the concurrency."""
    return waves * concurrency


@dataclass(frozen=True)
class ClosedLoopResult:
    """Means over every request of the run, and its LoadGen-style summary."""

    ttft_mean_s: float
    tpot_mean_s: float
    summary: dict
    ttft_first_wave_s: float
    """Mean TTFT of the first `concurrency` requests, which the client sends together at t = 0."""
    ttft_steady_s: float
    """Mean TTFT of the requests after them, each sent as an earlier one completes."""


def simulate_closed_loop(hw: Hardware, model: ModelSpec, dep: Deployment, concurrency: int, isl: int, osl: int,
                         samples: int | None = None, source: str = "silicon row",
                         timing: Timing = "roofline") -> ClosedLoopResult:
    """Run `dep` of `model` on `hw` with `concurrency` requests in flight, each up to `isl` in and `osl` out."""
    setup = make_setup(hw, None, model, dep, source, timing)  # type: ignore[arg-type]  # no benchmark: closed loop
    workload = closed_loop(concurrency, isl, osl, samples or closed_loop_samples(concurrency), RANGE_RATIO)
    records, _, _ = setup.simulate(workload)
    summary = summarize(records, "concurrency", None, setup.num_gpus)
    # a benchmark client averages every request, the first burst (all `concurrency` at once) included
    df = add_latency_columns(records)
    first = (df["request_id"] < concurrency).to_numpy()
    ttft = df["ttft_s"].to_numpy()
    steady = float(np.mean(ttft[~first])) if (~first).any() else float("nan")
    return ClosedLoopResult(float(np.mean(ttft)), float(np.nanmean(df["tpot_s"])), summary,
                            float(np.mean(ttft[first])), steady)


__all__ = ["RANGE_RATIO", "WAVES", "ClosedLoopResult", "Unsupported", "closed_loop_samples", "simulate_closed_loop"]
