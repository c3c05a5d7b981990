"""Multi-turn agent sessions as a `Workload` (the edge agentic scenario).

A session starts with a first prompt (system prompt, tool definitions, the task); each later turn's prompt is
the whole context so far (every earlier prompt and answer) plus the tokens the turn adds (a tool result or a
user message). Turns run in order within a session. Each request carries the hashes of its prompt's 512-token
blocks: a full block keeps its hash in every later turn, so an engine with a prefix cache
(`Deployment.prefix_cache`) skips the earlier prompts' full blocks it still holds and prefills the rest (the
last partial block, the previous answer and the new message).

SingleStream issues one turn at a time (closed loop, concurrency 1); sessions follow each other.
"""

from __future__ import annotations

import math

import numpy as np

from gpusim.errors import InputError
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS, Workload
from gpusim.specs.benchmark import BenchmarkSpec


def session_turns(bench: BenchmarkSpec, sessions: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(session, turn, prompt tokens, output tokens) of every turn of `sessions` sessions, in issue order."""
    a = bench.agentic
    if a is None:
        raise InputError(bench.id, "agentic", "the benchmark defines no agent sessions")
    n = sessions * a.turns
    first = a.first_prompt.sample(sessions, rng)
    added = a.turn_tokens.sample(n, rng).reshape(sessions, a.turns)
    out = bench.output_tokens.sample(n, rng).reshape(sessions, a.turns)
    prompts = np.empty((sessions, a.turns), dtype=np.int64)
    prompts[:, 0] = first
    for t in range(1, a.turns):
        prompts[:, t] = prompts[:, t - 1] + out[:, t - 1] + added[:, t]
    sid, turn = np.divmod(np.arange(n), a.turns)
    return sid, turn, prompts.ravel(), out.ravel()


def block_hashes(session: int, turn: int, prompt: int) -> tuple[int, ...]:
    """Hashes of a turn's prompt blocks. A full block holds the same tokens in every later turn of its session
    (the context only grows), so it has one hash per session and index; the last, partly filled block is this
    turn's own (filled further, it is another block in the next turn)."""
    full = prompt // PREFIX_BLOCK_TOKENS
    blocks = math.ceil(prompt / PREFIX_BLOCK_TOKENS)
    base = (session + 1) << 24
    return tuple(base + b if b < full else base + ((turn + 1) << 16) + b for b in range(blocks))


def agentic_workload(bench: BenchmarkSpec, seed: int, turns: int, concurrency: int = 1) -> Workload:
    """At least `turns` turns of whole sessions, closed loop with `concurrency` in flight (SingleStream: 1)."""
    a = bench.agentic
    if a is None:
        raise InputError(bench.id, "agentic", "the benchmark defines no agent sessions")
    rng = np.random.default_rng(seed)
    sessions = max(1, math.ceil(turns / a.turns))
    sid, turn, prompts, out = session_turns(bench, sessions, rng)
    hashes = [block_hashes(int(s), int(t), int(p)) for s, t, p in zip(sid, turn, prompts, strict=True)]
    return Workload.create(np.zeros(len(prompts)), prompts, out, concurrency=concurrency, prefix_hashes=hashes,
                           name=f"{bench.id} agentic sessions", source=bench.id)


__all__ = ["agentic_workload", "block_hashes", "session_turns"]
