"""Prefix (KV) cache of one instance: prompt blocks kept after their request finishes, found by hash.

Blocks are identified by the hash of their prompt prefix (as in the Mooncake traces, 512-token
blocks). A block in use by running requests is pinned by a reference count; blocks with no user
stay resident, in LRU order, until the KV cache needs their space. Their tokens are part of the
instance's `KVCache.tokens`, so capacity is shared exactly. With memory tiers below HBM (`TierStore`), an evicted
block goes down to them, and a reloaded one comes back as an idle block (`load`).

A request's blocks become idle tail first, its last block the least recently used, so that eviction takes a
context's tail before its head, which every later request sharing the context starts with: vLLM frees a request's
blocks in reverse order "so that the tail blocks are evicted first" (`KVCacheManager.free`, vllm/v1/core), Dynamo's
block manager likewise, and SGLang's and TensorRT-LLM's radix trees evict leaves. Evicting head first would keep a
context's tail resident while no request could use it (a match stops at the first missing block).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from gpusim.sim.kvcache import KVCache
from gpusim.sim.kvtiers import TierStore


class PrefixCache:
    """Hash → reference count, with the unreferenced blocks in LRU order."""

    def __init__(self, kv: KVCache, block_tokens: int, lower: TierStore | None = None) -> None:
        self.kv, self.block, self.lower = kv, block_tokens, lower
        self.refs: dict[int, int] = {}
        self.idle: OrderedDict[int, None] = OrderedDict()
        self.hits_tokens = 0
        self.lookups_tokens = 0

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of `hashes` are resident."""
        n = 0
        for h in hashes:
            if h not in self.refs:
                break
            n += 1
        return n

    def find(self, hashes: Sequence[int]) -> tuple[int, list[int]]:
        """How many leading blocks of `hashes` are resident, and the lower tier of each block after them that a
        tier holds (none without tiers)."""
        resident = self.match(hashes)
        return resident, self.lower.locate(hashes[resident:]) if self.lower is not None else []

    @property
    def evictable_tokens(self) -> int:
        return len(self.idle) * self.block

    def acquire(self, hashes: Sequence[int]) -> None:
        """Pin resident blocks for a request that reuses them."""
        for h in hashes:
            if self.refs[h] == 0:
                del self.idle[h]
            self.refs[h] += 1

    def release(self, hashes: Sequence[int]) -> None:
        """Unpin blocks; unreferenced ones become the most recently used idle blocks, the first of them most
        recently (tail first)."""
        for h in reversed(hashes):
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.idle[h] = None

    def adopt(self, hashes: Sequence[int]) -> int:
        """Keep a finished request's own blocks (already counted in the KV) as idle ones, tail first; returns how many
        were new. A block another request cached meanwhile is not kept twice: its tokens are the caller's to free.
        """
        kept = 0
        for h in reversed(hashes):
            if h not in self.refs:
                self.refs[h] = 0
                self.idle[h] = None
                kept += 1
        return kept

    def evict(self, tokens: int) -> None:
        """Free idle blocks, least recently used first, until `tokens` are free or none is idle."""
        while self.kv.free < tokens and self.idle:
            h, _ = self.idle.popitem(last=False)
            del self.refs[h]
            self.kv.tokens -= self.block
            if self.lower is not None:
                self.lower.store(h)

    def load(self, hashes: Sequence[int]) -> int:
        """Bring a request's leading blocks into HBM, in order: resident idle ones become the most recently used,
        reloaded ones join as idle blocks as far as the KV cache has room (evicting older idle blocks); returns how
        many leading blocks are resident now."""
        n = 0
        for h in hashes:
            if h in self.idle:
                self.idle.move_to_end(h)
            elif h not in self.refs:
                if self.kv.free < self.block:
                    self.evict(self.block)
                if self.kv.free < self.block:
                    break
                self.refs[h] = 0
                self.idle[h] = None
                self.kv.tokens += self.block
            n += 1
        return n
