"""Paged KV-cache accounting of one instance, O(1) per operation."""

from __future__ import annotations


class KVCache:
    """Tokens of KV held by resident sequences, charged at block granularity.

    Exact per-sequence block counts would cost O(batch) per step, so usage is bounded from above:
    `tokens + sequences·(block − 1)` is never less than the blocks actually allocated. Admission and
    growth are refused when the bound would pass the capacity, so real usage never does.
    """

    __slots__ = ("block", "capacity", "sequences", "tokens")

    def __init__(self, capacity_tokens: int, block_tokens: int) -> None:
        self.capacity = capacity_tokens
        self.block = block_tokens
        self.tokens = 0
        self.sequences = 0

    @property
    def used(self) -> int:
        """Upper bound of the tokens' worth of blocks in use."""
        return self.tokens + self.sequences * (self.block - 1)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def add_sequence(self, tokens: int) -> None:
        self.sequences += 1
        self.tokens += tokens

    def grow(self, tokens: int) -> None:
        self.tokens += tokens

    def release(self, tokens: int) -> None:
        self.sequences -= 1
        self.tokens -= tokens
