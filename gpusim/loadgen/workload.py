"""A workload: the requests a load generator issues, in issue order, as numpy arrays.

Open loop (MLPerf Offline/Server/Interactive, traces): request `i` is scheduled at `arrival_s[i]`.
Closed loop (SingleStream, fixed concurrency): `concurrency` is set, `arrival_s` is all zeros and
ignored; the engine keeps `concurrency` requests outstanding and schedules the next request at the
moment one completes (its latency is measured from that moment).
Sessions (agentic traffic): a request with entries in `after` waits for those earlier requests to complete
and is scheduled `delay_s` (a tool call's time) after the last of them; one without is scheduled at its
`arrival_s` (a session's start).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from gpusim.errors import InputError

PREFIX_BLOCK_TOKENS = 512
"""Tokens per hashed prompt block (`Workload.prefix_hashes`): the Mooncake traces' block, and the engine's
prefix-cache block."""


class BlockHashes(Sequence[int]):
    """A request's block hashes held as a rule rather than a tuple of them: `full` hashes counting up from `first`,
    then, where the sequence ends inside a block, that block's own hash `last`. An agent's calls hash their blocks so
    (`agentic.block_hashes`); a tuple of a long context's hashes would cost some 40 bytes a block, and a run of agent
    sessions holds millions of blocks' worth. Indexing, slicing and iteration give the tuple's values."""

    __slots__ = ("first", "full", "last")

    def __init__(self, first: int, full: int, last: int | None = None) -> None:
        self.first, self.full, self.last = first, full, last

    def __len__(self) -> int:
        return self.full + (self.last is not None)

    def __iter__(self) -> Iterator[int]:
        counted = range(self.first, self.first + self.full)
        return iter(counted) if self.last is None else chain(counted, (self.last,))

    def __reversed__(self) -> Iterator[int]:
        counted = range(self.first + self.full - 1, self.first - 1, -1)
        return iter(counted) if self.last is None else chain((self.last,), counted)

    def __getitem__(self, i: int | slice) -> int | BlockHashes:  # type: ignore[override]
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise ValueError("block hashes slice with step 1 only")
            stop = max(start, stop)
            return BlockHashes(self.first + start, max(0, min(stop, self.full) - start),
                               self.last if start <= self.full < stop else None)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("block hash index out of range")
        return self.first + i if i < self.full else self.last

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"BlockHashes({self.first}, {self.full}, {self.last})"


@dataclass(frozen=True)
class Workload:
    """Requests in issue order. Build one with `Workload.create`, which validates."""

    arrival_s: np.ndarray
    """float64 scheduled times in seconds from the start (non-decreasing; zeros for closed loop)."""
    input_tokens: np.ndarray
    """int64 prompt lengths, >= 1."""
    output_tokens: np.ndarray
    """int64 generated lengths, >= 1."""
    concurrency: int | None = None
    """Closed loop: keep this many requests outstanding. None: open loop on `arrival_s`."""
    prefix_hashes: list[tuple[int, ...] | BlockHashes] | None = None
    """Per request, the hashes of its blocks of `PREFIX_BLOCK_TOKENS`, for prefix caching: its prompt's (Mooncake
    traces), or with `answer_hashed` its whole sequence's, prompt then answer (agentic sessions)."""
    answer_hashed: bool = False
    """`prefix_hashes` run on over each answer's blocks: an engine keeps the full blocks a request's answer filled
    cached as it keeps its prompt's (vLLM caches full blocks of generated tokens), so that the next call of an
    agent, whose prompt starts with that answer, finds them."""
    name: str = "workload"
    after: tuple[tuple[int, ...], ...] | None = None
    """Sessions: per request, the earlier requests (indices) it waits for; empty for a session's first call."""
    delay_s: np.ndarray | None = None
    """Sessions: float64 seconds between the last awaited completion and this request (a tool call)."""
    session: np.ndarray | None = None
    """Sessions: int64 session of each request (metrics per session)."""

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    @classmethod
    def create(
        cls,
        arrival_s: Sequence[float] | np.ndarray,
        input_tokens: Sequence[int] | np.ndarray,
        output_tokens: Sequence[int] | np.ndarray,
        *,
        name: str = "workload",
        concurrency: int | None = None,
        prefix_hashes: Sequence[Sequence[int]] | None = None,
        answer_hashed: bool = False,
        source: str | None = None,
        after: Sequence[Sequence[int]] | None = None,
        delay_s: Sequence[float] | np.ndarray | None = None,
        session: Sequence[int] | np.ndarray | None = None,
    ) -> Workload:
        """Convert to read-only arrays and validate; errors are `InputError(source or name, field, ...)`."""
        src = source or name
        arr = np.array(arrival_s, dtype=np.float64)
        isl = _int_array(input_tokens, src, "input_tokens")
        osl = _int_array(output_tokens, src, "output_tokens")
        if not (arr.ndim == isl.ndim == osl.ndim == 1) or not (len(arr) == len(isl) == len(osl)):
            shapes = f"{arr.shape}, {isl.shape}, {osl.shape}"
            raise InputError(src, "arrival_s", f"arrays must be 1-D of equal length, got {shapes}")
        for field, a in (("input_tokens", isl), ("output_tokens", osl)):
            bad = np.flatnonzero(a < 1)
            if bad.size:
                raise InputError(src, field, f"must be >= 1, got {a[bad[0]]} at request {bad[0]}")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            i = bad[0]
            raise InputError(src, "arrival_s", f"must be finite, got {arr[i]} at request {i}")
        dec = np.flatnonzero(np.diff(arr) < 0)
        if dec.size:
            i = dec[0] + 1
            msg = f"arrivals must not decrease: request {i} at {arr[i]} < {arr[i - 1]} before it"
            raise InputError(src, "arrival_s", msg)
        if arr.size and arr[0] < 0:
            raise InputError(src, "arrival_s", f"must be >= 0, got {arr[0]} at request 0")
        if concurrency is not None and concurrency < 1:
            raise InputError(src, "concurrency", f"must be > 0, got {concurrency}")
        hashes = None
        if prefix_hashes is not None:
            hashes = [hs if isinstance(hs, tuple | BlockHashes) else tuple(map(int, hs)) for hs in prefix_hashes]
            if len(hashes) != len(arr):
                raise InputError(src, "prefix_hashes", f"{len(hashes)} entries for {len(arr)} requests")
        deps = _dependencies(src, len(arr), after, delay_s, session)
        for a in (arr, isl, osl, *(d for d in deps[1:] if d is not None)):
            a.flags.writeable = False
        return cls(arr, isl, osl, concurrency=concurrency, prefix_hashes=hashes,
                   answer_hashed=answer_hashed and hashes is not None, name=name, after=deps[0],
                   delay_s=deps[1], session=deps[2])

    def at_rate(self, qps: float, duration_s: float) -> Workload:
        """This open-loop workload replayed at a mean of `qps` requests per second for `duration_s` seconds: its
        arrival times compressed (or stretched) by one factor, so its bursts keep their shape relative to the
        mean, and the whole replayed again after itself as often as the duration needs (prefix hashes dropped:
        a replay would hit the cache of its own earlier pass)."""
        if self.closed_loop or len(self) < 2 or not qps > 0 or not duration_s > 0:
            raise InputError(self.name, "qps", f"a replay needs an open-loop trace of two requests or more, a rate "
                             f"> 0 and a duration > 0; got {len(self)} requests, {qps} QPS, {duration_s} s")
        span = len(self) / qps  # one pass at the new rate, its last request a mean gap before the next pass
        first, last = float(self.arrival_s[0]), float(self.arrival_s[-1])
        arrivals = (self.arrival_s - first) * (span - 1 / qps) / max(last - first, 1e-12)
        passes = max(1, int(np.ceil(duration_s / span)))
        t = np.concatenate([arrivals + k * span for k in range(passes)])
        keep = t < duration_s
        return Workload.create(t[keep], np.tile(self.input_tokens, passes)[keep],
                               np.tile(self.output_tokens, passes)[keep], name=f"{self.name}@{qps:g}qps")


def _dependencies(source: str, n: int, after: Sequence[Sequence[int]] | None,
                  delay_s: Sequence[float] | np.ndarray | None, session: Sequence[int] | np.ndarray | None
                  ) -> tuple:
    """Validated session columns (`Workload.after`, `delay_s`, `session`), or Nones when `after` is None."""
    if after is None:
        return None, None, None
    waits = tuple(tuple(int(j) for j in a) for a in after)
    delays = np.zeros(n) if delay_s is None else np.array(delay_s, dtype=np.float64)
    sessions = np.arange(n, dtype=np.int64) if session is None else _int_array(session, source, "session")
    if not len(waits) == len(delays) == len(sessions) == n:
        raise InputError(source, "after", f"{len(waits)} entries, {len(delays)} delays and {len(sessions)} sessions "
                         f"for {n} requests")
    for i, a in enumerate(waits):
        if any(not 0 <= j < i for j in a):
            raise InputError(source, "after", f"request {i} waits for {list(a)}: only earlier requests (0 to {i - 1})")
    bad = np.flatnonzero(~(np.isfinite(delays) & (delays >= 0)))
    if bad.size:
        raise InputError(source, "delay_s", f"must be finite and >= 0, got {delays[bad[0]]} at request {bad[0]}")
    return waits, delays, sessions


def _int_array(values: Sequence[int] | np.ndarray, source: str, field: str) -> np.ndarray:
    a = np.array(values)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        try:
            f = a.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(source, field, f"token counts must be numbers ({e})") from None
        if not np.all(np.isfinite(f)) or np.any(f != np.rint(f)):
            raise InputError(source, field, "token counts must be whole numbers")
    return a.astype(np.int64)
