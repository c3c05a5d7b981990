"""Agent-session traces of gpusim's own format (JSONL, one LLM call per line), as a `Workload` of sessions.

Fields of a call (docs/agentic.md):
- `session` (string or integer): the session it belongs to.
- `call` (string or integer): its name, unique within the session.
- `agent` (string or integer, default 0): the agent making it; an agent's calls share one growing context.
- `new_tokens` (integer ≥ 1): the tokens it adds to its agent's context (the first call: its whole prompt; later
  ones: a tool result, a user message, sub-agents' answers). Its prompt is the agent's previous prompt, that call's
  answer and these tokens, so the engine's prefix cache may hold all but the new part.
- `output_tokens` (integer ≥ 1): its answer.
- `start_s` (seconds ≥ 0): a session's first call only, when the session starts.
- `after` (list of calls of the session, on earlier lines) and `delay_s` (seconds ≥ 0, default 0): every other
  call starts `delay_s` (a tool call) after the last of those it waits for completes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpusim.errors import InputError
from gpusim.loadgen.agentic import block_hashes
from gpusim.loadgen.jsonl import json_objects
from gpusim.loadgen.workload import Workload

FIELDS = "session, call, agent, new_tokens, output_tokens, start_s (first call) or after and delay_s"


def is_agent_trace(first: dict) -> bool:
    """Whether a JSONL trace's first record is a call of this format."""
    return "session" in first and "new_tokens" in first


def _count(src: str, rec: dict, key: str, lineno: int) -> int:
    v = rec.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(src, key, f"line {lineno}: must be an integer >= 1, got {v!r}")
    return v


def _seconds(src: str, rec: dict, key: str, lineno: int) -> float:
    v = rec.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
        raise InputError(src, key, f"line {lineno}: must be a number of seconds >= 0, got {v!r}")
    return float(v)


def read_agent_trace(path: Path, limit: int | None = None) -> Workload:
    """The calls of `path` (the first `limit` lines' worth), sessions ordered by their start."""
    src = str(path)
    calls: list[dict] = []
    where: dict[tuple, int] = {}  # (session, call) → index in `calls`
    context: dict[tuple, tuple[int, int, int, int]] = {}  # (session, agent) → (agent id, calls, prompt, output)
    seen: set = set()
    for lineno, rec in json_objects(path):
        if "session" not in rec or "call" not in rec:
            raise InputError(src, "session", f"line {lineno}: a call needs {FIELDS}")
        session, name, agent = rec["session"], rec["call"], rec.get("agent", 0)
        if (session, name) in where:
            raise InputError(src, "call", f"line {lineno}: call {name!r} of session {session!r} appears twice")
        new, out = _count(src, rec, "new_tokens", lineno), _count(src, rec, "output_tokens", lineno)
        after = rec.get("after") or []
        if not isinstance(after, list):
            raise InputError(src, "after", f"line {lineno}: must be a list of calls of the session")
        missing = [a for a in after if (session, a) not in where]
        if missing:
            raise InputError(src, "after", f"line {lineno}: waits for {missing!r}, not calls of session "
                             f"{session!r} on earlier lines")
        first = session not in seen
        seen.add(session)
        if first and after:
            raise InputError(src, "after", f"line {lineno}: a session's first call waits for nothing")
        if not first and not after:
            raise InputError(src, "after", f"line {lineno}: every call but a session's first waits for "
                             "earlier calls (after)")
        start = _seconds(src, rec, "start_s", lineno) if first else None
        if first and "start_s" not in rec:
            raise InputError(src, "start_s", f"line {lineno}: a session's first call says when it starts")
        agent_id, n, prompt, prev_out = context.get((session, agent), (len(context), 0, 0, 0))
        prompt += prev_out + new
        context[(session, agent)] = (agent_id, n + 1, prompt, out)
        where[(session, name)] = len(calls)
        calls.append({"session": session, "start": start, "prompt": prompt, "output": out,
                      "after": [where[(session, a)] for a in after], "delay": _seconds(src, rec, "delay_s", lineno),
                      "hashes": block_hashes(agent_id, n, prompt, out)})
        if limit is not None and len(calls) >= limit:
            break
    if not calls:
        raise InputError(src, "file", "empty trace: no calls")
    return _ordered(calls, path.stem, src)


def _ordered(calls: list[dict], name: str, src: str) -> Workload:
    """Sessions in the order they start (calls of one session in file order), waits renumbered to match."""
    starts: dict = {}
    for c in calls:
        if c["start"] is not None:
            starts[c["session"]] = c["start"]
    sessions = sorted(starts, key=starts.__getitem__)  # stable: sessions starting together stay in file order
    number = {s: i for i, s in enumerate(sessions)}
    order = sorted(range(len(calls)), key=lambda i: number[calls[i]["session"]])  # stable: file order within
    new_index = {old: new for new, old in enumerate(order)}
    first = min(starts.values())
    picked = [calls[i] for i in order]
    return Workload.create(
        np.array([starts[c["session"]] - first for c in picked]), [c["prompt"] for c in picked],
        [c["output"] for c in picked], prefix_hashes=[c["hashes"] for c in picked], answer_hashed=True,
        after=[[new_index[a] for a in c["after"]] for c in picked], delay_s=[c["delay"] for c in picked],
        session=[number[c["session"]] for c in picked], name=name, source=src)


__all__ = ["FIELDS", "is_agent_trace", "read_agent_trace"]
