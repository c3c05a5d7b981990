"""What the engine did over time, binned by simulated time: batch size, KV use, queue, tokens.

One `add` per engine event (a batch step, or a fast-forwarded stretch of decode steps; never per token),
O(1) each, into a fixed number of bins: when the run outgrows them, neighbouring bins merge and the
width doubles, so memory stays bounded however long the run is. An event counts in the bin it starts in.
"""

from __future__ import annotations

import pandas as pd

FIELDS = ("busy_s", "batch_s", "kv_s", "queue_s", "output_tokens", "prefill_tokens")
"""Per bin, summed over instances: busy seconds; batch size, KV tokens and queued requests weighted by the
event's seconds; output and prompt tokens computed."""


class Timeline:
    """Time-binned engine activity of a whole cluster."""

    def __init__(self, bins: int = 400, width_s: float = 0.01) -> None:
        self.bins, self.width_s = bins, width_s
        self.sums: dict[str, list[float]] = {f: [0.0] * bins for f in FIELDS}

    def add(self, t: float, dt: float, batch: int, kv_tokens: int, queue: int, output_tokens: float,
            prefill_tokens: int) -> None:
        """One engine event starting at `t`, lasting `dt` seconds."""
        i = int(t / self.width_s)
        while i >= self.bins:
            self._coarsen()
            i = int(t / self.width_s)
        s = self.sums
        s["busy_s"][i] += dt
        s["batch_s"][i] += batch * dt
        s["kv_s"][i] += kv_tokens * dt
        s["queue_s"][i] += queue * dt
        s["output_tokens"][i] += output_tokens
        s["prefill_tokens"][i] += prefill_tokens

    def output_tokens_between(self, start_s: float, end_s: float) -> float:
        """Output tokens the engine produced in [start_s, end_s] (bins cut by the edges count in proportion)."""
        w, tokens = self.width_s, self.sums["output_tokens"]
        lo, hi = max(0, int(start_s / w)), min(self.bins - 1, int(end_s / w))
        total = 0.0
        for i in range(lo, hi + 1):
            overlap = min(end_s, (i + 1) * w) - max(start_s, i * w)
            total += tokens[i] * max(overlap, 0.0) / w
        return total

    def _coarsen(self) -> None:
        half = self.bins // 2
        for f, v in self.sums.items():
            self.sums[f] = [v[2 * k] + v[2 * k + 1] for k in range(half)] + [0.0] * (self.bins - half)
        self.width_s *= 2

    def frame(self, instances: int, kv_capacity_tokens: int, end_s: float) -> pd.DataFrame:
        """Per bin up to `end_s`: time, tokens/s, mean batch and KV fraction of a busy instance, mean queue
        per instance, and the fraction of instance-time spent running steps."""
        n = min(self.bins, int(end_s / self.width_s) + 1)
        s = pd.DataFrame({f: v[:n] for f, v in self.sums.items()})
        busy = s["busy_s"].where(s["busy_s"] > 0)
        w = self.width_s
        return pd.DataFrame({
            "t_s": [k * w for k in range(n)],
            "output_tokens_per_s": s["output_tokens"] / w,
            "prefill_tokens_per_s": s["prefill_tokens"] / w,
            "batch_size": (s["batch_s"] / busy).fillna(0.0),
            "kv_used_fraction": (s["kv_s"] / busy / max(kv_capacity_tokens, 1)).fillna(0.0),
            "queued_requests": (s["queue_s"] / busy).fillna(0.0),
            "busy_fraction": (s["busy_s"] / (w * max(instances, 1))).clip(upper=1.0),
        })
