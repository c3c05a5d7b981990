"""The state of one request inside the engine."""

from __future__ import annotations


class Request:
    """A request's progress. Times live in the run's record arrays, indexed by `id`.

    `generated` counts tokens already emitted to the user; `computed` counts prompt tokens whose KV
    exists. Preemption (recompute, as in vLLM) drops the KV: `computed` returns to 0 and the next
    prefill covers the prompt plus the tokens generated so far, which are kept (already emitted).
    """

    __slots__ = ("computed", "epoch", "generated", "id", "join_step", "output", "prompt", "reserved")

    def __init__(self, rid: int, prompt: int, output: int) -> None:
        self.id = rid
        self.prompt = prompt
        self.output = output
        self.generated = 0
        self.computed = 0
        self.reserved = 0
        """KV tokens held in the instance's cache."""
        self.join_step = 0
        """The instance's decode-step counter when this request joined the decode batch."""
        self.epoch = 0
        """Bumped on preemption so stale heap entries are skipped."""

    @property
    def prefill_target(self) -> int:
        """Tokens the (re)prefill must compute: the prompt plus what was generated before a preemption."""
        return self.prompt + self.generated

    def context_at(self, step: int) -> int:
        """KV tokens of a decoding request at decode-step counter `step`."""
        return self.prompt + self.generated + (step - self.join_step)
