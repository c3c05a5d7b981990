"""MLPerf benchmarks (workloads/benchmarks/*.yaml): model, dataset lengths, scenario limits and counts."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from gpusim.specs.catalog import load_ref, names


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LengthDistribution(_Spec):
    """Token lengths of a dataset: a log-normal (parameters of the underlying normal) clipped to [min, max].

    `fitted_to` records the published statistics the parameters were fitted to (e.g. mean, median),
    so a test can check the fit; `source` says where those statistics come from.
    """

    kind: Literal["lognormal", "constant"]
    mu: float = 0.0
    sigma: float = 0.0
    value: int | None = None
    min: int = 1
    max: int
    fitted_to: dict[str, float] = {}
    source: str
    grade: Literal["A", "B", "C", "D"] = "C"

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` integer lengths."""
        if self.kind == "constant":
            return np.full(n, self.value if self.value is not None else self.max, dtype=np.int64)
        x = rng.lognormal(self.mu, self.sigma, n)
        return np.clip(np.rint(x), self.min, self.max).astype(np.int64)


class LatencyLimits(_Spec):
    """`mlperf.conf` token-latency limits of a Server-type scenario (p99)."""

    ttft_s: float
    tpot_s: float
    source: str


class BenchmarkSpec(_Spec):
    """One MLPerf Inference LLM benchmark."""

    id: str
    model: str
    dataset: str
    dataset_samples: int
    """Samples in the performance dataset (MLPerf issues concatenated permutations of it)."""
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    server: LatencyLimits | None = None
    interactive: LatencyLimits | None = None
    offline_min_query_count: int
    server_min_query_count: int = 100
    min_duration_s: float = 600.0
    mtp_allowed_in: list[str] = []
    """Scenarios in which speculative decoding / MTP is allowed by the rules."""
    frontend: Literal["loadgen", "http"] = "loadgen"
    """How the submissions serve it: LoadGen in process with the engine, or LoadGen driving HTTP serving
    endpoints; a deployment that does not set `frontend` runs this way."""
    frontend_source: str | None = None
    source: str

    def limits(self, scenario: str) -> LatencyLimits | None:
        """Latency limits of `scenario` (None for Offline, SingleStream and non-MLPerf scenarios)."""
        return {"server": self.server, "interactive": self.interactive}.get(scenario)


def benchmark_names() -> list[str]:
    return names("benchmarks")


def load_benchmark(name: str, source: str = "command line") -> BenchmarkSpec:
    """Load workloads/benchmarks/<name>.yaml, a `GPUSIM_PATH` benchmark or a benchmark file by path (its
    `model` may be a model file beside it)."""
    return load_ref(BenchmarkSpec, "benchmarks", name, "benchmark", source, refs={"model": "models"})
