"""The state of one request inside the engine."""

from __future__ import annotations

from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS


class Request:
    """A request's progress. Times live in the run's record arrays, indexed by `id`.

    `generated` counts tokens emitted to the user as of the last batch change; `computed` counts prompt
    tokens whose KV exists. Preemption (recompute, as in vLLM) drops the request's own KV: `computed`
    returns to 0 and the next prefill covers the prompt plus the tokens generated so far, which are
    kept (already emitted). `shared` tokens sit in prefix-cache blocks pinned by this request.
    """

    __slots__ = ("answer_hashed", "computed", "ctx_join", "finish_key", "generated", "hashes", "id", "join_step",
                 "load", "output", "pinned", "prompt", "prompt_hashes", "rank", "shared")

    def __init__(self, rid: int, prompt: int, output: int, hashes: tuple[int, ...] | None = None,
                 answer_hashed: bool = False) -> None:
        self.id = rid
        self.prompt = prompt
        self.output = output
        self.hashes = hashes
        self.answer_hashed = answer_hashed
        """`hashes` run on over the blocks the answer fills (`Workload.answer_hashed`)."""
        self.prompt_hashes: tuple[int, ...] = hashes[:-(-prompt // PREFIX_BLOCK_TOKENS)] if hashes else ()
        """Hashes of the prompt's blocks, which prefix-cache lookups use (routers ask once per instance)."""
        self.generated = 0
        self.computed = 0
        self.shared = 0
        self.pinned = 0
        """Leading prompt blocks pinned in the instance's prefix cache."""
        self.join_step = 0
        """The instance's decode-step counter when this request joined the decode batch."""
        self.ctx_join = 0.0
        self.finish_key = -1
        """The instance's finish-heap key of this request's current stay in the decode batch."""
        self.rank = 0
        """Attention-DP rank holding this request's KV."""
        self.load = 0
        """Work this request added to its instance's routing load."""

    def kept_blocks(self, ctx: float) -> int:
        """Leading hashed blocks full at `ctx` KV tokens, which a prefix cache may keep: the prompt's full blocks,
        and where the hashes run on over the answer (`answer_hashed`), those the answer filled."""
        if not self.hashes:
            return 0
        hashed = self.prompt + self.output if self.answer_hashed else self.prompt
        return min(int(ctx), hashed) // PREFIX_BLOCK_TOKENS

    @property
    def prefill_target(self) -> int:
        """Tokens the (re)prefill must cover: the prompt plus what was generated before a preemption."""
        return self.prompt + self.generated

    def context_at(self, step: int, rate: float) -> float:
        """KV tokens of a decoding request at decode step `step` (`rate` tokens per step)."""
        return self.ctx_join + (step - self.join_step) * rate
