"""One serving instance: the continuous-batching loop of TensorRT-LLM / vLLM as a SimPy process.

Each step admits waiting requests within the token budget (`max_num_tokens`) and batch limit, runs
prefill chunks beside one token for every decoding sequence, and asks the cost model for the time.
Stretches of pure decode between two batch changes run as one event (the step time is linear in
the growing context, so their total has a closed form), interrupted only if an arrival could join.
Per-step work is O(1) in the batch size: context sums are kept incrementally and completions come
off a heap keyed by the decode step at which each sequence finishes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Generator
from typing import Protocol

import simpy

from gpusim.errors import InputError
from gpusim.perf.step import BatchShape
from gpusim.sim.kvcache import KVCache
from gpusim.sim.records import Records
from gpusim.sim.request import Request
from gpusim.specs.deployment import Deployment


class StepCost(Protocol):
    """What the engine needs of the cost model: the seconds one batch step takes."""

    def step_time(self, b: BatchShape) -> float: ...


class Instance:
    """A model replica with its own batch, KV cache and queue."""

    fast_forward = True
    """Run pure-decode stretches as one event (False: one event per step; same results, slower)."""

    def __init__(
        self,
        env: simpy.Environment,
        index: int,
        cost: StepCost,
        kv_capacity_tokens: int,
        deployment: Deployment,
        records: Records,
        on_complete: Callable[[Request], None],
    ) -> None:
        self.env, self.index, self.cost, self.records = env, index, cost, records
        self.on_complete = on_complete
        self.max_batch = deployment.max_batch_size
        self.budget = deployment.max_num_tokens
        self.chunked = deployment.chunked_prefill
        self.kv = KVCache(kv_capacity_tokens, deployment.kv_block_tokens)
        self.waiting: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.decoding: dict[int, Request] = {}
        """Decoding requests in the order they joined (the last is preempted first)."""
        self.finish_heap: list[tuple[int, int, int]] = []
        """(decode step at which it finishes, epoch, request id)."""
        self.step = 0
        """Decode steps run so far: every decoding sequence gains one token per step."""
        self.ctx_sum = 0
        """Σ context of the decoding sequences (the KV tokens one decode step reads)."""
        self.outstanding_tokens = 0
        """Prompt + output tokens of the requests assigned and not finished (for routing)."""
        self.steps_run = 0
        self.busy_s = 0.0
        self._wake: simpy.Event | None = None
        env.process(self._run())

    # ---- interface to the router --------------------------------------------------------------
    def submit(self, req: Request) -> None:
        """Queue a request; wakes the loop if it idles or could admit it now."""
        self.waiting.append(req)
        self.outstanding_tokens += req.prompt + req.output
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    @property
    def load(self) -> int:
        return self.outstanding_tokens

    # ---- the loop ----------------------------------------------------------------------------
    def _run(self) -> Generator[simpy.Event, object, None]:
        env = self.env
        while True:
            if not (self.decoding or self.prefilling or self.waiting):
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            self._make_room()
            chunks, pairs = self._schedule_prefill()
            if chunks or not self.decoding or not self.fast_forward:
                if not chunks and not self.decoding:
                    req = self.waiting[0]
                    raise InputError(
                        "workload", "input_tokens",
                        f"a request of {req.prefill_target} tokens cannot fit in the KV cache of one "
                        f"instance ({self.kv.capacity} tokens); use more GPUs per instance or fp8/fp4 KV",
                    )
                shape = BatchShape(
                    prefill_tokens=sum(c for _, c in chunks),
                    prefill_attn_pairs=pairs,
                    prefill_seqs=len(chunks),
                    decode_seqs=len(self.decoding),
                    decode_context=self.ctx_sum,
                )
                dt = self.cost.step_time(shape)
                yield env.timeout(dt)
                self.busy_s += dt
                self._advance(1 if self.decoding else 0)
                self._finish_chunks(chunks)
            else:
                yield from self._decode_span()
            self._complete_due()

    def _decode_span(self) -> Generator[simpy.Event, object, None]:
        """Run pure-decode steps up to the next completion (or KV limit) as one event."""
        env, b = self.env, len(self.decoding)
        n = max(1, min(self._next_finish() - self.step, self.kv.free // b))
        t0 = self.cost.step_time(BatchShape(decode_seqs=b, decode_context=self.ctx_sum))
        slope = 0.0
        if n > 1:
            slope = self.cost.step_time(BatchShape(decode_seqs=b, decode_context=self.ctx_sum + b)) - t0
        total = _span(n, t0, slope)
        can_admit = not self.waiting and b + len(self.prefilling) < self.max_batch
        if n == 1 or not can_admit:
            yield env.timeout(total)
            done = n
        else:
            start = env.now
            self._wake = env.event()
            timer = env.timeout(total)
            yield timer | self._wake
            self._wake = None
            done = n
            if not timer.processed:
                done = min(n, _steps_done(env.now - start, t0, slope) + 1)
                yield env.timeout(max(0.0, start + _span(done, t0, slope) - env.now))
        self.busy_s += _span(done, t0, slope)
        self._advance(done)

    # ---- scheduling -------------------------------------------------------------------------
    def _make_room(self) -> None:
        """Preempt the newest decoding sequences (recompute) until one more step fits.

        One more step grows every decoding sequence by a token and lets every prefilling one join.
        """
        while self.decoding and self.kv.free < len(self.decoding) + len(self.prefilling):
            rid, req = self.decoding.popitem()
            ctx = req.context_at(self.step)
            req.generated += self.step - req.join_step
            self.ctx_sum -= ctx
            self.kv.release(ctx)
            req.computed = 0
            req.epoch += 1
            self.records.preemptions[rid] += 1
            self.waiting.appendleft(req)

    def _schedule_prefill(self) -> tuple[list[tuple[Request, int]], float]:
        """Prefill chunks for this step: continuing prefills first, then new admissions."""
        budget = self.budget - len(self.decoding)
        chunks: list[tuple[Request, int]] = []
        pairs = 0.0
        for req in self.prefilling:
            if budget <= 0:
                break
            c = min(req.prefill_target - req.computed, budget)
            chunks.append((req, c))
            pairs += c * req.computed + c * (c + 1) / 2
            budget -= c
        while self.waiting and budget > 0 and len(self.decoding) + len(self.prefilling) < self.max_batch:
            req = self.waiting[0]
            target = req.prefill_target
            if not self.kv.fits_new(target + 1 + len(self.decoding) + len(self.prefilling)):
                break
            if not self.chunked and target > budget and (chunks or self.decoding):
                break
            self.waiting.popleft()
            self.kv.add_sequence(target)
            self.prefilling.append(req)
            c = target if not self.chunked else min(target, budget)
            chunks.append((req, c))
            pairs += c * (c + 1) / 2
            budget -= c
        return chunks, pairs

    # ---- applying a step's results ------------------------------------------------------------
    def _advance(self, steps: int) -> None:
        b = len(self.decoding)
        self.step += steps
        self.steps_run += max(steps, 1)
        self.ctx_sum += b * steps
        self.kv.grow(b * steps)

    def _finish_chunks(self, chunks: list[tuple[Request, int]]) -> None:
        now = self.env.now
        for req, c in chunks:
            req.computed += c
            if req.computed < req.prefill_target:
                continue
            self.prefilling.remove(req)
            req.generated += 1
            if req.generated == 1:
                self.records.first_token_s[req.id] = now
            if req.generated >= req.output:
                self.kv.release(req.prefill_target - 1)
                self._finish(req)
                continue
            self.kv.grow(1)
            req.join_step = self.step
            self.decoding[req.id] = req
            self.ctx_sum += req.prompt + req.generated
            heapq.heappush(self.finish_heap, (self.step + req.output - req.generated, req.epoch, req.id))

    def _next_finish(self) -> int:
        heap = self.finish_heap
        while heap and (heap[0][2] not in self.decoding or self.decoding[heap[0][2]].epoch != heap[0][1]):
            heapq.heappop(heap)
        return heap[0][0]

    def _complete_due(self) -> None:
        heap = self.finish_heap
        while heap and heap[0][0] <= self.step:
            _, epoch, rid = heapq.heappop(heap)
            req = self.decoding.get(rid)
            if req is None or req.epoch != epoch:
                continue
            del self.decoding[rid]
            ctx = req.context_at(self.step)
            self.ctx_sum -= ctx
            self.kv.release(ctx)
            req.generated = req.output
            self._finish(req)

    def _finish(self, req: Request) -> None:
        self.records.completion_s[req.id] = self.env.now
        self.records.completed += 1
        self.records.generated_tokens += req.output
        self.outstanding_tokens -= req.prompt + req.output
        self.on_complete(req)


def _span(n: int, t0: float, slope: float) -> float:
    """Total time of `n` steps whose durations are t0, t0+slope, t0+2·slope, …"""
    return n * t0 + slope * n * (n - 1) / 2


def _steps_done(elapsed: float, t0: float, slope: float) -> int:
    """How many whole steps of a span have ended `elapsed` seconds after it began."""
    if slope <= 1e-18:
        k = int(elapsed / t0)
    else:
        a = t0 - slope / 2
        k = int((-a + math.sqrt(a * a + 2 * slope * elapsed)) / slope)
    while _span(k + 1, t0, slope) <= elapsed:
        k += 1
    while k > 0 and _span(k, t0, slope) > elapsed:
        k -= 1
    return k
