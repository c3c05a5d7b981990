"""KV memory tiers below HBM of one instance (host memory, storage): prefix blocks the HBM cache evicts are kept
there, least recently used first out, and a request whose context is found there has it reloaded over the tier's
link before it is scheduled, instead of prefilling it again (Dynamo KVBM's G2/G3 tiers, LMCache).

A block evicted from HBM goes to the first tier; a tier that is full passes its oldest block to the next one, and
the last drops it. Tiers keep a copy of what they reload (an inclusive hierarchy, as KVBM's), so a block evicted
again costs no second write. Each tier reads over `links` parallel links (one per attention-DP rank: each rank
reloads its own sequences), each serving its reloads in turn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Tier:
    """One tier as an instance sees it."""

    name: str
    capacity_tokens: int
    s_per_token: float
    """Seconds to read one token's KV back: each GPU reads its own share over its own link in parallel."""
    latency_s: float
    links: int = 1


class TierStore:
    """The blocks each tier holds (LRU order), the links' busy times and what was reloaded from where."""

    def __init__(self, tiers: Sequence[Tier], block_tokens: int) -> None:
        self.tiers, self.block = list(tiers), block_tokens
        self.held: list[OrderedDict[int, None]] = [OrderedDict() for _ in self.tiers]
        self.capacity = [t.capacity_tokens // block_tokens for t in self.tiers]
        self.free_at = [[0.0] * t.links for t in self.tiers]
        self.reloaded_tokens = [0] * len(self.tiers)
        self.reloads = [0] * len(self.tiers)
        self.stored_blocks = [0] * len(self.tiers)

    def store(self, h: int, tier: int = 0) -> None:
        """Keep block `h`, evicted from the tier above, in `tier` (the most recently used there)."""
        if tier >= len(self.tiers):
            return
        held = self.held[tier]
        if h in held:
            held.move_to_end(h)
            return
        if self.capacity[tier] <= 0:
            self.store(h, tier + 1)
            return
        held[h] = None
        self.stored_blocks[tier] += 1
        if len(held) > self.capacity[tier]:
            old, _ = held.popitem(last=False)
            self.store(old, tier + 1)

    def locate(self, hashes: Sequence[int]) -> list[int]:
        """The tier of each leading block of `hashes` found in some tier (stops at the first one found nowhere)."""
        found = []
        for h in hashes:
            tier = next((i for i, held in enumerate(self.held) if h in held), None)
            if tier is None:
                break
            found.append(tier)
        return found

    def reload(self, hashes: Sequence[int], tiers: Sequence[int], now: float) -> float:
        """Read blocks `hashes` (found in `tiers`) back; returns when the last of them is in HBM. Each tier's
        blocks go over its earliest free link, after what that link is already reading."""
        ready = now
        for i, tier in enumerate(self.tiers):
            blocks = [h for h, t in zip(hashes, tiers, strict=True) if t == i]
            if not blocks:
                continue
            links = self.free_at[i]
            k = min(range(len(links)), key=links.__getitem__)
            tokens = len(blocks) * self.block
            links[k] = max(now, links[k]) + tier.latency_s + tokens * tier.s_per_token
            ready = max(ready, links[k])
            self.reloaded_tokens[i] += tokens
            self.reloads[i] += 1
            for h in blocks:
                self.held[i].move_to_end(h)
        return ready

    def counters(self) -> dict[str, dict[str, int]]:
        return {t.name: {"reloaded_tokens": self.reloaded_tokens[i], "reloads": self.reloads[i],
                         "stored_blocks": self.stored_blocks[i]} for i, t in enumerate(self.tiers)}


__all__ = ["Tier", "TierStore"]
