"""TensorRT-LLM's scheduler holding new context requests back while generation runs.

Two policies of its PyExecutor `_schedule` (tensorrt_llm/_torch/pyexecutor/py_executor.py, 1.x), each a
counter of scheduler iterations:

- attention-DP balance (`attention_dp_config: {enable_balance, timeout_iters, batching_wait_iters}`):
  context requests run only in an iteration where every attention-DP rank has one (and a free slot),
  after `batching_wait_iters` more iterations if every rank is also generating; otherwise the
  iteration counts towards `timeout_iters`, and reaching it releases whatever is queued. The counter
  runs whether or not anything is queued, so a request arriving mid-count waits only the rest of it.
  Without generation on every rank nothing is held.
- batch waiting, without attention DP (`batch_wait_timeout_iters`, `batch_wait_max_tokens_ratio`):
  while generation runs, context requests wait until they and the generation tokens fill
  `ratio` × `max_num_tokens`, or the wait reaches `timeout_iters` iterations.

After an iteration that held, `holds_left` says how many more iterations would hold while nothing changes
(no arrival, no sequence joining or leaving), so the engine can run them as one pure-decode span and
count them with `hold`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpusim.specs.deployment import AdpBalance, BatchWait, Deployment


class AdpBalanceGate:
    """Attention-DP balance: run context requests when every rank has one, or at the timeout."""

    __slots__ = ("batched", "batching", "batching_wait", "count", "rank_cap", "timeout")

    def __init__(self, cfg: AdpBalance, rank_cap: int) -> None:
        self.timeout, self.batching_wait, self.rank_cap = cfg.timeout_iters, cfg.batching_wait_iters, rank_cap
        self.count = self.batched = 0
        self.batching = False
        """The last held iteration waited out `batching_wait_iters` (else it counted towards the timeout)."""

    def release(self, queued: int, queued_tokens: Iterable[int], rank_seqs: Sequence[int]) -> bool:
        """One scheduler iteration with `queued` context requests (`queued_tokens`: each one's prompt tokens
        left, not read here; `rank_seqs`: generating sequences per rank): whether they run now."""
        every_rank_generates = min(rank_seqs) > 0
        if queued >= _to_reach_every_rank(rank_seqs) and max(rank_seqs) < self.rank_cap:
            self.count = 0
            if every_rank_generates and self.batched < self.batching_wait:
                self.batched += 1
                self.batching = True
                return False
            self.batched = 0
            return True
        self.count += 1
        if self.count >= self.timeout or not every_rank_generates:
            self.count = 0
            return True
        self.batching = False
        return False

    def holds_left(self) -> int:
        """After a held iteration: how many more would hold with the same queue and ranks."""
        return self.batching_wait - self.batched if self.batching else self.timeout - self.count - 1

    def hold(self, iterations: int) -> None:
        """Count `iterations` more held iterations (at most `holds_left`)."""
        if self.batching:
            self.batched += iterations
        else:
            self.count += iterations

    def idle(self, steps: int, rank_seqs: Sequence[int]) -> None:
        """`steps` iterations with nothing queued: the timeout counter still runs (and wraps)."""
        self.count = (self.count + steps) % self.timeout if min(rank_seqs) > 0 else 0


class BatchWaitGate:
    """Batch waiting: hold context requests until they fill the token ratio, or at the timeout."""

    __slots__ = ("count", "threshold", "timeout")

    def __init__(self, cfg: BatchWait, max_num_tokens: int) -> None:
        self.timeout, self.threshold = cfg.timeout_iters, cfg.max_tokens_ratio * max_num_tokens
        self.count = 0

    def release(self, queued: int, queued_tokens: Iterable[int], rank_seqs: Sequence[int]) -> bool:
        """`queued_tokens` is read only until the threshold is reached (a long queue is not summed)."""
        generating = sum(rank_seqs)
        if not generating:  # nothing generating: no reason to wait
            return True
        if self.count >= self.timeout or _reaches(generating, queued_tokens, self.threshold):
            self.count = 0
            return True
        self.count += 1
        return False

    def holds_left(self) -> int:
        """After a held iteration: how many more would hold with the same queue and generation."""
        return self.timeout - self.count

    def hold(self, iterations: int) -> None:
        """Count `iterations` more held iterations (at most `holds_left`)."""
        self.count += iterations

    def idle(self, steps: int, rank_seqs: Sequence[int]) -> None:
        """Iterations with nothing queued do not count."""


ContextGate = AdpBalanceGate | BatchWaitGate


def make_gate(dep: Deployment, ranks: int) -> ContextGate | None:
    """The deployment's context gate for an instance with `ranks` attention-DP ranks, or None."""
    if dep.adp_balance is not None and ranks > 1:
        return AdpBalanceGate(dep.adp_balance, max(1, dep.max_batch_size // ranks))
    if dep.batch_wait is not None and ranks == 1:
        return BatchWaitGate(dep.batch_wait, dep.max_num_tokens)
    return None


def _reaches(start: float, items: Iterable[int], threshold: float) -> bool:
    """Whether `start` plus the `items` reaches `threshold`, reading no more items than it takes."""
    total = start
    for x in items:
        if total >= threshold:
            return True
        total += x
    return total >= threshold


def _to_reach_every_rank(rank_seqs: Sequence[int]) -> int:
    """Queued requests needed before every rank holds one, each going to the rank with the fewest
    requests (generating and queued), as the attention-DP scheduler assigns them: the less loaded
    ranks fill up to the busiest's level first, then each rank at that level takes one."""
    top = max(rank_seqs)
    return sum(top - s for s in rank_seqs) + sum(1 for s in rank_seqs if s == top)
