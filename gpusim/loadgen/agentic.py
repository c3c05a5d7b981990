"""Agent sessions as a `Workload`: the edge agentic scenario (turns one at a time) and agentic traffic at rack
scale (sessions arriving as a process, calls separated by tool calls, sub-agents).

A session's main agent starts with a first prompt (system prompt, tool definitions, the task); each later call's
prompt is the agent's whole context so far (its earlier prompt and answer) plus the tokens the call adds (a tool
result, a user message, the answers of the sub-agents it waited for). A sub-agent, started after a main-agent call,
runs its own calls over its own growing context; the main agent's next call waits for all of them. Each request
carries the hashes of its sequence's 512-token blocks (prompt, then answer): a full block keeps its hash in every
later call of its agent, so an engine with a prefix cache (`Deployment.prefix_cache`) keeps the blocks a call
filled, its answer's too (as vLLM caches full blocks of generated tokens), skips those the next call's prompt
starts with while it still holds them (in HBM, or in a lower KV tier it reloads them from:
`gpusim/sim/kvtiers.py`) and prefills the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpusim.errors import InputError
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS, BlockHashes, Workload
from gpusim.specs.benchmark import AgenticSessions, BenchmarkSpec, benchmark_names, load_benchmark


def block_hashes(agent: int, call: int, prompt: int, output: int = 0) -> BlockHashes:
    """Hashes of the blocks of a call's sequence, its prompt and its `output`. A full block holds the same tokens
    in every later call of its agent (the context only grows, and the answer is the start of the next prompt), so
    it has one hash per agent and index; the last, partly filled block is this call's own (filled further, it is
    another block in the next call)."""
    full, partial = divmod(prompt + output, PREFIX_BLOCK_TOKENS)
    base = (agent + 1) << 40
    return BlockHashes(base, full, base + ((call + 1) << 24) + full if partial else None)


@dataclass
class _Calls:
    """Calls of sessions as they are generated, in an order where every call follows those it waits for."""

    session: list[int] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    after: list[tuple[int, ...]] = field(default_factory=list)
    delay_s: list[float] = field(default_factory=list)
    hashes: list[BlockHashes] = field(default_factory=list)
    agents: int = 0

    def add(self, session: int, agent: int, call: int, prompt: int, output: int, after: tuple[int, ...],
            delay_s: float) -> int:
        self.session.append(session)
        self.prompt.append(prompt)
        self.output.append(output)
        self.after.append(after)
        self.delay_s.append(delay_s)
        self.hashes.append(block_hashes(agent, call, prompt, output))
        return len(self.prompt) - 1


def _session(calls: _Calls, a: AgenticSessions, bench: BenchmarkSpec, s: int, rng: np.random.Generator) -> None:
    """Append session `s`: its main agent's calls and the sub-agents they start."""
    main = calls.agents
    calls.agents += 1
    turns = a.turns if isinstance(a.turns, int) else a.turns.sample_one(rng)
    prompt, added, prev, waits = a.first_prompt.sample_one(rng), 0, -1, ()
    for t in range(turns):
        if t:
            prompt += calls.output[prev] + added + a.turn_tokens.sample_one(rng)
            if prompt > a.max_context:  # the context window is full: the session ends here
                return
        out = bench.output_tokens.sample_one(rng)
        prev = calls.add(s, main, t, prompt, out, waits, a.tool_time(rng) if t else 0.0)
        waits, added = (prev,), 0
        sub = a.subagents
        if sub is None or t == turns - 1 or rng.random() >= sub.probability:
            continue
        ends = []
        for _ in range(sub.count):  # each starts after this call's tool call, over a context of its own
            agent = calls.agents
            calls.agents += 1
            p, last = sub.first_prompt.sample_one(rng), prev
            for u in range(sub.turns):
                if u:
                    p += calls.output[last] + a.turn_tokens.sample_one(rng)
                    if p > a.max_context:
                        break
                last = calls.add(s, agent, u, p, bench.output_tokens.sample_one(rng), (last,),
                                 a.tool_time(rng))
            ends.append(last)
            added += calls.output[last]  # its answer joins the main agent's next prompt
        waits = (prev, *ends)


def _require(bench: BenchmarkSpec) -> AgenticSessions:
    if bench.agentic is None:
        valid = [n for n in benchmark_names() if load_benchmark(n).agentic is not None]
        raise InputError(bench.id, "agentic", f"the benchmark defines no agent sessions; valid: {', '.join(valid)}, "
                         "or a benchmark file with an agentic: block (docs/agentic.md)")
    return bench.agentic


def _workload(bench: BenchmarkSpec, calls: _Calls, starts: np.ndarray, concurrency: int | None, name: str
              ) -> Workload:
    arrival = starts[np.asarray(calls.session, dtype=np.int64)]
    return Workload.create(arrival, calls.prompt, calls.output, concurrency=concurrency, prefix_hashes=calls.hashes,
                           answer_hashed=True,
                           after=None if concurrency else calls.after, delay_s=None if concurrency else calls.delay_s,
                           session=None if concurrency else calls.session, name=name, source=bench.id)


def agentic_workload(bench: BenchmarkSpec, seed: int, turns: int, concurrency: int = 1) -> Workload:
    """At least `turns` calls of whole sessions, closed loop with `concurrency` in flight (SingleStream: 1): each
    call is issued when one completes, so a session's calls run in order and sessions follow each other."""
    a = _require(bench)
    rng = np.random.default_rng(seed)
    calls, s = _Calls(), 0
    while len(calls.prompt) < turns:
        _session(calls, a, bench, s, rng)
        s += 1
    return _workload(bench, calls, np.zeros(s), concurrency, f"{bench.id} agentic sessions")


def session_workload(bench: BenchmarkSpec, rate: float, duration_s: float, seed: int) -> Workload:
    """Agent sessions starting as a Poisson process at `rate` per second for `duration_s` seconds (at least one),
    each a tree of calls separated by tool calls (`Workload.after`, `Workload.delay_s`)."""
    a = _require(bench)
    if not rate > 0 or not duration_s > 0:
        raise InputError(bench.id, "session_rate", f"sessions need a rate > 0 and a duration > 0, got {rate} per s "
                         f"for {duration_s} s")
    start_rng, shape_rng = np.random.default_rng(seed).spawn(2)
    count = max(1, int(start_rng.poisson(rate * duration_s)))
    starts = np.sort(start_rng.uniform(0.0, duration_s, count))
    starts[0] = 0.0
    calls = _Calls()
    for s in range(count):
        _session(calls, a, bench, s, shape_rng)
    return _workload(bench, calls, starts, None, f"{bench.id} agent sessions at {rate:g}/s")


__all__ = ["agentic_workload", "block_hashes", "session_workload"]
