"""How often an engine's scheduler reads new requests from its front end (SGLang's --scheduler-recv-interval)."""

from __future__ import annotations

from collections import deque

from gpusim.sim.request import Request


class RequestPoller:
    """New requests wait in the front end's socket until the scheduler next reads it.

    SGLang's `SchedulerRecvSkipper` (sglang/srt/managers/scheduler_recv_skipper.py, v0.5.x) reads only when
    a counter reaches `interval`: each pure-decode step adds 1, any step that ran prefill adds 1000 (so the
    next iteration reads), and every read resets it. An idle scheduler spins and reads at once. A request
    that arrives while a batch is decoding therefore waits up to `interval` decode steps, and those that
    arrive in one such wait are prefilled together.
    """

    __slots__ = ("count", "inbox", "interval")

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.count = interval
        self.inbox: deque[Request] = deque()

    def steps_to_read(self) -> int:
        """Pure-decode steps until the next read (at least 1)."""
        return max(1, self.interval - self.count)

    def ran(self, decode_steps: int, prefill: bool) -> None:
        """Count the steps just run; a step with prefill makes the next iteration read."""
        self.count += self.interval if prefill else decode_steps

    def read(self, idle: bool) -> list[Request]:
        """The requests the scheduler takes in now: all waiting if a read is due or it is idle, else none."""
        if not (idle or self.count >= self.interval):
            return []
        self.count = 0
        taken = list(self.inbox)
        self.inbox.clear()
        return taken
