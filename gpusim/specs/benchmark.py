"""MLPerf benchmarks (workloads/benchmarks/*.yaml): model, dataset lengths, scenario limits and counts."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gpusim.errors import InputError
from gpusim.specs.catalog import load_ref, names
from gpusim.specs.diffusion import Generation


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

    def sample_one(self, rng: np.random.Generator) -> int:
        """One length, the value `sample(1, rng)` gives from the same generator state, without an array."""
        if self.kind == "constant":
            return int(self.value if self.value is not None else self.max)
        return round(min(max(rng.lognormal(self.mu, self.sigma), self.min), self.max))


class LatencyLimits(_Spec):
    """`mlperf.conf` latency limits of a Server-type scenario (p99): TTFT and TPOT for token-latency models,
    or the end-to-end `latency_s` of a model with `use_token_latencies = 0` (Qwen3-VL, DLRMv3); an unset
    token limit is unbounded."""

    ttft_s: float = math.inf
    tpot_s: float = math.inf
    latency_s: float | None = None
    source: str


class SecondsDistribution(_Spec):
    """Durations in seconds: a log-normal (parameters of the underlying normal) clipped to [min, max], or constant."""

    kind: Literal["lognormal", "constant"]
    mu: float = 0.0
    sigma: float = 0.0
    value: float | None = Field(None, ge=0)
    min: float = Field(0.0, ge=0)
    max: float = Field(gt=0)
    fitted_to: dict[str, float] = {}
    source: str
    grade: Literal["A", "B", "C", "D"] = "C"

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "constant":
            return np.full(n, self.value if self.value is not None else self.max)
        return np.clip(rng.lognormal(self.mu, self.sigma, n), self.min, self.max)

    def sample_one(self, rng: np.random.Generator) -> float:
        """One duration, the value `sample(1, rng)` gives from the same generator state, without an array."""
        if self.kind == "constant":
            return float(self.value if self.value is not None else self.max)
        return float(min(max(rng.lognormal(self.mu, self.sigma), self.min), self.max))


class SubAgents(_Spec):
    """Sub-agents a main-agent call may start (not its last): each runs `turns` calls over a context of its own
    (`first_prompt`: its task and tools) and hands its last answer back; the main agent's next call waits for all."""

    probability: float = Field(ge=0, le=1)
    """Chance that a main-agent call starts sub-agents."""
    count: int = Field(ge=1, le=64)
    turns: int = Field(ge=1, le=1000)
    first_prompt: LengthDistribution
    source: str


class AgenticSessions(_Spec):
    """Multi-turn agent sessions: a first prompt (system prompt, tool definitions, task), then more calls, each
    adding the previous answer and a new tool result or user message to the context; every call is a request
    over the whole context so far, whose earlier blocks the prefix cache may hold (`gpusim/loadgen/agentic.py`)."""

    turns: int | LengthDistribution
    """Calls of the main agent per session: a count, or a distribution of counts."""
    first_prompt: LengthDistribution
    turn_tokens: LengthDistribution
    """Tokens a turn adds besides the previous answer (a tool result, a user message)."""
    tool_s: SecondsDistribution | None = None
    """Rack-scale sessions: the tool call's time between a call's answer and the next call (None: none)."""
    subagents: SubAgents | None = None
    max_context: int = Field(2**31, ge=1)
    """A session ends before a call whose prompt would pass this many tokens (the model's context window)."""
    prefix_cache: bool = True
    """The rules let the engine reuse a session's earlier context (prefix caching across its turns)."""
    source: str

    def tool_time(self, rng: np.random.Generator) -> float:
        return self.tool_s.sample_one(rng) if self.tool_s is not None else 0.0


WorkloadKind = Literal["llm", "vlm", "diffusion", "recsys"]
"""What a benchmark's requests are: token generation (a VLM's prompts carry image tokens), or items (a video,
a recommendation query) each served whole by one engine step (docs/workloads.md)."""


class BenchmarkSpec(_Spec):
    """One MLPerf Inference benchmark."""

    id: str
    kind: WorkloadKind = "llm"
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
    software: str | None = None
    """The serving stack its submissions run (a software profile), where one stack serves them all; validation
    uses it over the round's rule (`software_source`)."""
    software_source: str | None = None
    text_tokens: float | None = Field(None, gt=0)
    """VLM: mean text tokens of a prompt; the rest of `input_tokens` are image tokens (`text_tokens_source`)."""
    text_tokens_source: str | None = None
    samples_per_request: int = Field(1, ge=1)
    """LoadGen samples one engine request carries: a recommender's SUT batches user queries into fixed model
    batches (`samples_per_request_source`), and the engine serves each batch as one request."""
    samples_per_request_source: str | None = None
    generation: Generation | None = None
    agentic: AgenticSessions | None = None
    """Multi-turn agent traffic (the edge agentic scenario): requests are turns of sessions with growing
    context (`gpusim/loadgen/agentic.py`); `input_tokens` then only sizes a mean prompt."""
    """Diffusion: what one request generates (resolution, frames, denoising steps, guidance)."""
    source: str

    def limits(self, scenario: str) -> LatencyLimits | None:
        """Latency limits of `scenario` (None for Offline, SingleStream and non-MLPerf scenarios)."""
        return {"server": self.server, "interactive": self.interactive}.get(scenario)

    def require_limits(self, scenario: str, source: str) -> LatencyLimits:
        """`limits(scenario)`; an InputError naming the scenarios this benchmark judges where it has none."""
        found = self.limits(scenario)
        if found is None:
            judged = [s for s in ("server", "interactive") if self.limits(s) is not None]
            raise InputError(source, "scenario", f"{self.id} has no {scenario} latency limits; valid: offline, "
                             f"singlestream, concurrency or trace{''.join(', ' + s for s in judged)}")
        return found


def benchmark_names() -> list[str]:
    return names("benchmarks")


def load_benchmark(name: str, source: str = "command line") -> BenchmarkSpec:
    """Load workloads/benchmarks/<name>.yaml, a `GPUSIM_PATH` benchmark or a benchmark file by path (its
    `model` may be a model file beside it)."""
    return load_ref(BenchmarkSpec, "benchmarks", name, "benchmark", source, refs={"model": "models"})
