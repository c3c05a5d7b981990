"""Attention data parallelism inside an instance: each rank's decode sequences and context."""

from __future__ import annotations

import math


class AttentionRanks:
    """Per-rank decode sequences and KV context, advanced lazily (O(1) per step, O(ranks) per query).

    A joining sequence goes to the rank with the fewest sequences, as TensorRT-LLM's attention-DP
    scheduler balances them; completions then leave ranks uneven, and the step waits for the
    busiest rank (`busiest`).
    """

    def __init__(self, ranks: int, rate: float) -> None:
        self.rate = rate
        self.seqs = [0] * ranks
        self.base = [0.0] * ranks
        self.ref = [0] * ranks
        self._seen: tuple[int, tuple[float, int]] | None = None
        """(step, `busiest` at it) as last computed: a span asks twice at its first step (cleared on join and leave)."""

    def _settle(self, r: int, step: int) -> None:
        self.base[r] += self.seqs[r] * self.rate * (step - self.ref[r])
        self.ref[r] = step

    def join(self, ctx: float, step: int) -> int:
        self._seen = None
        seqs = self.seqs
        r = seqs.index(min(seqs))
        self._settle(r, step)
        self.seqs[r] += 1
        self.base[r] += ctx
        return r

    def leave(self, r: int, ctx: float, step: int) -> None:
        self._seen = None
        self._settle(r, step)
        self.seqs[r] -= 1
        self.base[r] -= ctx

    def steady_steps(self, step: int) -> float:
        """How many decode steps from `step` on keep the busiest rank (`busiest`) the same one, so that the
        step's rank context grows linearly (at least 1; inf when none can overtake it): a rank with more
        sequences overtakes it after (context gap) / (sequences more · rate) steps."""
        ctx = self._contexts(step)
        c, q = top = self._top(ctx)
        self._seen = step, top
        gaps = [(c - x) / (s - q) for x, s in zip(ctx, self.seqs, strict=True) if s > q]
        return max(1, math.ceil(min(gaps) / self.rate)) if gaps else math.inf

    def busiest(self, step: int) -> tuple[float, int]:
        """(decode context, sequences) of the rank with the most context at decode step `step`."""
        if self._seen is not None and self._seen[0] == step:
            return self._seen[1]
        top = self._top(self._contexts(step))
        self._seen = step, top
        return top

    def _contexts(self, step: int) -> list[float]:
        rate = self.rate
        return [b + s * rate * (step - f) for b, s, f in zip(self.base, self.seqs, self.ref, strict=True)]

    def _top(self, ctx: list[float]) -> tuple[float, int]:
        """(context, sequences) of the first rank with the most context."""
        top, seqs = -math.inf, 0
        for c, s in zip(ctx, self.seqs, strict=True):
            if c > top:
                top, seqs = c, s
        return top, seqs
