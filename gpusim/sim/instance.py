"""One serving instance: the continuous-batching loop of TensorRT-LLM / vLLM as a SimPy process.

Each step admits waiting requests within the token budget (`max_num_tokens`) and batch limit, runs
prefill chunks beside one decode step of every running sequence, and asks the cost model for the
time. Stretches of pure decode between two batch changes run as one event (the step time is linear
in the growing context, so their total has a closed form), interrupted only if an arrival could join.
Per-step work is O(1) in the batch size: context sums are kept incrementally and completions come
off a heap keyed by the decode step at which each sequence finishes.

Roles: an `aggregated` instance prefills and decodes; a `prefill` instance hands each request off
(`handoff`) once its first token is out; a `decode` instance takes requests whose KV has arrived
(`submit_prefilled`). With MTP a decode step emits `rate` = 1 + a1 + a1·a2 + … tokens per sequence
(the expected accepted length). With `scheduler_recv_interval` > 1 (SGLang's) new requests wait in a
`RequestPoller` until the scheduler's next read, and pure-decode spans end at each read. With TensorRT-LLM's
`adp_balance` or `batch_wait` a `ContextGate` may hold queued requests back; iterations it holds with
nothing else changing run as one pure-decode span too, which an arrival interrupts.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Protocol

import simpy

from gpusim.errors import InputError
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS
from gpusim.perf.step import BatchShape
from gpusim.sim.gate import make_gate
from gpusim.sim.kvcache import KVCache
from gpusim.sim.kvtiers import Tier, TierStore
from gpusim.sim.poller import RequestPoller
from gpusim.sim.prefixcache import PrefixCache
from gpusim.sim.ranks import AttentionRanks
from gpusim.sim.records import Records
from gpusim.sim.request import Request
from gpusim.sim.timeline import Timeline
from gpusim.specs.deployment import Deployment, Role


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
        role: Role = "aggregated",
        handoff: Callable[[Instance, Request], None] | None = None,
        timeline: Timeline | None = None,
        tiers: Sequence[Tier] = (),
    ) -> None:
        self.env, self.index, self.cost, self.records, self.role = env, index, cost, records, role
        self.timeline = timeline
        self.on_complete, self.handoff = on_complete, handoff
        self.max_batch = deployment.max_batch_size
        self.budget = deployment.max_num_tokens
        self.chunked = deployment.chunked_prefill
        self.rate = deployment.mtp.expected_tokens_per_step if deployment.mtp and role != "prefill" else 1.0
        self.kv = KVCache(kv_capacity_tokens, deployment.kv_block_tokens)
        lower = TierStore(tiers, PREFIX_BLOCK_TOKENS) if tiers else None  # tiers come with a prefix cache only
        self.prefix = PrefixCache(self.kv, PREFIX_BLOCK_TOKENS, lower) if deployment.prefix_cache else None
        dp = deployment.attention_ranks
        self.ranks = AttentionRanks(dp, self.rate) if dp > 1 else None
        recv = deployment.scheduler_recv_interval
        self.poller = RequestPoller(recv) if recv > 1 else None
        self.gate = make_gate(deployment, dp)
        self._held = False
        """The context gate held queued requests back this iteration (the step then runs alone)."""
        self.waiting: deque[Request] = deque()
        """Requests to prefill (new, or preempted for recompute)."""
        self.arrived: deque[Request] = deque()
        """Decode role: requests whose KV has landed, waiting for room in the batch."""
        self.prefilling: list[Request] = []
        self.decoding: dict[int, Request] = {}
        """Decoding requests in the order they joined (the last is preempted first)."""
        self.finish_heap: list[int] = []
        """Finish keys (`_finish_key`: the decode step at which a request finishes, then its id) as plain ints,
        which a heap compares faster than tuples; an entry is stale once its request left the batch or rejoined."""
        self.step = 0
        """Decode steps run so far: every decoding sequence gains `rate` tokens per step."""
        self.ctx_sum = 0.0
        """Σ context of the decoding sequences (the KV tokens one decode step reads)."""
        self._loads, self._slot = [0], 0
        """Where `outstanding_tokens` lives: a list the pool's router may share (`share_load`), read at each pick."""
        self.steps_run = 0
        self.busy_s = 0.0
        self._wake: simpy.Event | None = None
        self._incoming: list[Request] = []
        """Requests submitted with the same delay at the same time, onboarded by one event at `_incoming_due`."""
        self._incoming_due = -1.0
        env.process(self._run())

    # ---- interface to routers and the cluster --------------------------------------------------
    def submit(self, req: Request, delay: float = 0.0) -> None:
        """Queue a new request for prefill, `delay` seconds from now; its work (the prompt tokens its prefix cache
        and lower tiers do not hold, and its output) counts for routing at once."""
        prefill = req.prompt - self.prefix_overlap(req)
        self._assign(req, prefill if self.role == "prefill" else prefill + req.output)
        if delay <= 0:
            self._onboard(req)
            return
        due = self.env.now + delay
        if self._incoming and self._incoming_due == due:  # one event for requests submitted together
            self._incoming.append(req)
            return
        batch = self._incoming = [req]
        self._incoming_due = due
        self.env.timeout(delay).callbacks.append(lambda _: self._onboard_all(batch))

    def _onboard_all(self, batch: list[Request]) -> None:
        """Onboard requests dispatched together, in the order they were submitted."""
        if batch is self._incoming:
            self._incoming = []
        for req in batch:
            self._onboard(req)

    def _onboard(self, req: Request) -> None:
        """Queue a new request; one whose context lies in a lower KV tier first waits for it to be read back into
        HBM (`gpusim/sim/kvtiers.py`), as a KV connector loads it before the scheduler takes the request."""
        if self.prefix is None or not req.hashes:
            self._enqueue(req)
            return
        resident, tiers = self.prefix.find(req.prompt_hashes)
        if not tiers:
            self._enqueue(req)
            return
        wanted = req.hashes[:resident + len(tiers)]
        ready = self.prefix.lower.reload(wanted[resident:], tiers, self.env.now)

        def landed(_: simpy.Event) -> None:
            self.prefix.load(wanted)
            self._enqueue(req)
        self.env.timeout(ready - self.env.now).callbacks.append(landed)

    def _enqueue(self, req: Request) -> None:
        if self.poller is not None and self._running:
            self.poller.inbox.append(req)  # read at the scheduler's next poll (`_take_new`)
            return
        self.waiting.append(req)
        self._poke()

    def submit_prefilled(self, req: Request, landed: simpy.Event) -> None:
        """Decode role: take `req` (its decode work counts from now) once its KV cache has `landed`."""
        self._assign(req, req.output - req.generated)
        landed.callbacks.append(lambda _: self._arrive(req))

    def _arrive(self, req: Request) -> None:
        self.arrived.append(req)
        self._poke()

    @property
    def outstanding_tokens(self) -> int:
        """Work assigned and not finished, in tokens (for routing)."""
        return self._loads[self._slot]

    def share_load(self, loads: list[int], slot: int) -> None:
        """Keep `outstanding_tokens` in `loads[slot]` from now on, so a router reads a pool's loads as one list."""
        loads[slot] = self.outstanding_tokens
        self._loads, self._slot = loads, slot

    def _assign(self, req: Request, load: int) -> None:
        req.load = load
        self._loads[self._slot] += load

    def _poke(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def prefix_overlap(self, req: Request) -> int:
        """Prompt tokens this instance's prefix cache holds for `req`, in HBM or a lower tier."""
        if self.prefix is None or not req.hashes:
            return 0
        resident, below = self.prefix.find(req.prompt_hashes)
        return (resident + len(below)) * PREFIX_BLOCK_TOKENS

    # ---- the loop ----------------------------------------------------------------------------
    def _run(self) -> Generator[simpy.Event, object, None]:
        env = self.env
        while True:
            self._take_new()
            if not (self.decoding or self.prefilling or self.waiting or self.arrived):
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            self._make_room()
            self._admit_arrived()
            chunks, pairs = self._schedule_prefill()
            if chunks or not self.decoding or not self.fast_forward:
                if not chunks and not self.decoding:
                    req = (self.waiting or self.arrived)[0]
                    raise InputError(
                        "workload", "input_tokens",
                        f"a request of {req.prefill_target} tokens cannot fit in the KV cache of one "
                        f"instance ({self.kv.capacity} tokens); use more GPUs per instance or fp8/fp4 KV",
                    )
                prefill = sum(c for _, c in chunks)
                dt = self.cost.step_time(self._shape(prefill, pairs, len(chunks)))
                yield env.timeout(dt)
                self.busy_s += dt
                self._log(env.now - dt, dt, 1 if self.decoding else 0, prefill)
                if self.poller is not None:
                    self.poller.ran(1 if self.decoding else 0, prefill=bool(chunks))
                self._advance(1 if self.decoding else 0)
                self._finish_chunks(chunks)
            else:
                yield from self._decode_span()
            self._complete_due()

    def _shape(self, prefill_tokens: int = 0, pairs: float = 0.0, prefill_seqs: int = 0,
               ahead: int = 0) -> BatchShape:
        """The step's batch; `ahead` decode steps later for the pure-decode slope."""
        b = len(self.decoding)
        rank_ctx, rank_seqs = self.ranks.busiest(self.step + ahead) if (self.ranks and b) else (0.0, 0)
        return BatchShape(prefill_tokens=prefill_tokens, prefill_attn_pairs=pairs, prefill_seqs=prefill_seqs,
                          decode_seqs=b, decode_context=self.ctx_sum + ahead * b * self.rate,
                          attn_rank_context=rank_ctx, attn_rank_seqs=rank_seqs)

    def _decode_span(self) -> Generator[simpy.Event, object, None]:
        """Run pure-decode steps up to the next completion (or KV limit) as one event."""
        env, b = self.env, len(self.decoding)
        n = max(1, min(self._next_finish() - self.step, int(self.kv.free // (b * self.rate))))
        if self.poller is not None:
            n = min(n, self.poller.steps_to_read())
        if self.ranks is not None:  # the step waits for the busiest rank: linear while it stays the same one
            n = min(n, self.ranks.steady_steps(self.step))
        if self._held:  # held iterations alike: the gate's count allows them and the held request still fits
            slack = self._head_slack(self.budget - b, False)
            n = min(n, 1 + self.gate.holds_left(), 1 + int(slack // (b * self.rate)))
        t0 = self.cost.step_time(self._shape())
        # contexts only grow within a span, so its steps never get shorter (guards a cost model with noise)
        slope = max(0.0, self.cost.step_time(self._shape(ahead=1)) - t0) if n > 1 else 0.0
        total = _span(n, t0, slope)
        # an arrival could join unless it queues behind a request that cannot (or, with the gate holding the
        # queue, change what the gate decides); a decode instance's arrivals queue apart from its recomputes
        behind = bool(self.arrived) if self.role == "decode" else bool(self.waiting) and not self._held
        can_admit = not behind and b + len(self.prefilling) < self.max_batch
        if n == 1 or not can_admit:
            yield env.timeout(total)
            done = n
        else:
            start = env.now
            wake = self._wake = env.event()  # set by an arrival (`_poke`) or by the span's end, whichever is first
            timer = env.timeout(total)
            timer.callbacks.append(lambda _: wake.triggered or wake.succeed())
            yield wake
            self._wake = None
            done = n
            if not timer.processed:
                done = min(n, _steps_done(env.now - start, t0, slope) + 1)
                yield env.timeout(max(0.0, start + _span(done, t0, slope) - env.now))
        self.busy_s += _span(done, t0, slope)
        self._log(env.now - _span(done, t0, slope), _span(done, t0, slope), done, 0)
        if self.poller is not None:
            self.poller.ran(done, prefill=False)
        if self.gate is not None:  # this iteration's gate call was `_schedule_prefill`'s; the rest held or idle
            if self._held:
                self.gate.hold(done - 1)
            else:
                self.gate.idle(done - 1, self._rank_seqs())
        self._advance(done)

    def _log(self, start: float, dt: float, decode_steps: int, prefill_tokens: int) -> None:
        """Record one engine event (before the finished sequences leave the batch)."""
        if self.timeline is not None:
            b = len(self.decoding)
            self.timeline.add(start, dt, b + len(self.prefilling), self.kv.used, len(self.waiting) + len(self.arrived),
                              b * self.rate * decode_steps, prefill_tokens)

    # ---- scheduling -------------------------------------------------------------------------
    @property
    def _running(self) -> bool:
        """Whether a batch is in flight (sequences decoding or mid-prefill)."""
        return bool(self.decoding or self.prefilling)

    def _take_new(self) -> None:
        """Move the requests the scheduler reads now from the poller's inbox to the prefill queue."""
        if self.poller is not None:
            self.waiting.extend(self.poller.read(idle=not self._running))

    def _free_for(self, tokens: float) -> bool:
        """Whether `tokens` fit, evicting idle prefix-cache blocks if that makes them fit."""
        if self.kv.free >= tokens:
            return True
        if self.prefix is not None and self.kv.free + self.prefix.evictable_tokens >= tokens:
            self.prefix.evict(math.ceil(tokens))
            return self.kv.free >= tokens
        return False

    def _growth(self) -> float:
        """KV tokens one more step adds: `rate` per decoding sequence, one per prefill that may finish."""
        return len(self.decoding) * self.rate + len(self.prefilling)

    def _make_room(self) -> None:
        """Preempt the newest decoding sequences (recompute) until one more step fits."""
        while self.decoding and not self._free_for(self._growth()):
            rid, req = self.decoding.popitem()
            ctx = req.context_at(self.step, self.rate)
            req.generated = min(req.output - 1, req.generated + int((self.step - req.join_step) * self.rate))
            self._leave_decode(req, ctx)
            self._release(req, ctx, keep_prefix=False)
            req.computed = 0
            self.records.preemptions[rid] += 1
            self.waiting.appendleft(req)

    def _admit_arrived(self) -> None:
        """Decode role: join requests whose KV has landed while the batch and KV have room."""
        while self.arrived and len(self.decoding) + len(self.prefilling) < self.max_batch:
            req = self.arrived[0]
            ctx = req.prompt + req.generated
            if not self._free_for(ctx + self.kv.block - 1 + self._growth() + self.rate):
                break
            self.arrived.popleft()
            self.kv.add_sequence(ctx)
            # the client's stream comes from the decode worker (Dynamo, SGLang's router, trtllm-serve
            # disaggregated): it sees the first token once that worker has taken the request
            self.records.first_token_s[req.id] = self.env.now
            self._join_decode(req)

    def _rank_seqs(self) -> list[int]:
        """Generating sequences per attention-DP rank (one entry without attention DP)."""
        return self.ranks.seqs if self.ranks is not None else [len(self.decoding)]

    def _head_slack(self, budget: int, chunks: bool) -> float | None:
        """KV tokens to spare if the first queued request were admitted now (negative: it does not fit), or
        None when no batch slot or token budget is left for it. Admission (`_schedule_prefill`) asks the same."""
        if not self.waiting or budget <= 0 or len(self.decoding) + len(self.prefilling) >= self.max_batch:
            return None
        req = self.waiting[0]
        target = req.prefill_target
        blocks = self._cached_blocks(req, target)
        own = target - blocks * PREFIX_BLOCK_TOKENS
        if not self.chunked and own > budget and (chunks or self.decoding):
            return None
        room = self.kv.free
        if self.prefix is not None:  # idle blocks it would not pin itself could be evicted for it
            pinned_idle = sum(1 for h in req.hashes[:blocks] if h in self.prefix.idle) if blocks else 0
            room += self.prefix.evictable_tokens - pinned_idle * PREFIX_BLOCK_TOKENS
        return room - (own + self.kv.block + self._growth())

    def _gate_holds(self, budget: int, chunks: bool) -> bool:
        """One iteration of the context gate: whether it holds the queued requests back now. TensorRT-LLM
        consults it with the context requests its capacity scheduler would run, so an iteration in which the
        first queued request could not be admitted anyway (no slot, budget or KV room) counts as one with
        nothing queued."""
        slack = self._head_slack(budget, chunks)
        if slack is None or slack < 0:
            self.gate.idle(1, self._rank_seqs())
            return False
        queued_tokens = (r.prefill_target - r.computed for r in self.waiting)  # read lazily: queues run long
        return not self.gate.release(len(self.waiting), queued_tokens, self._rank_seqs())

    def _schedule_prefill(self) -> tuple[list[tuple[Request, int]], float]:
        """Prefill chunks for this step: continuing prefills first, then new admissions (unless the
        context gate holds them)."""
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
        self._held = self.gate is not None and self._gate_holds(budget, bool(chunks))
        while (self.waiting and not self._held and budget > 0
               and len(self.decoding) + len(self.prefilling) < self.max_batch):
            req = self.waiting[0]
            target = req.prefill_target
            self._pin(req, self._cached_blocks(req, target))  # pinned first: eviction must spare them
            own = target - req.shared
            if not self._free_for(own + self.kv.block + self._growth()) or (
                    not self.chunked and own > budget and (chunks or self.decoding)):
                self._unpin(req)
                break
            self.waiting.popleft()
            self._count_lookup(req)
            self.kv.add_sequence(own)
            self.prefilling.append(req)
            c = min(own, budget) if self.chunked else own
            chunks.append((req, c))
            pairs += c * req.computed + c * (c + 1) / 2
            budget -= c
        return chunks, pairs

    def _cached_blocks(self, req: Request, target: int) -> int:
        """Leading prompt blocks reusable from the prefix cache (at least one token is computed)."""
        if self.prefix is None or not req.hashes:
            return 0
        return min(self.prefix.match(req.prompt_hashes), (target - 1) // PREFIX_BLOCK_TOKENS)

    def _pin(self, req: Request, blocks: int) -> None:
        req.pinned, req.shared = blocks, blocks * PREFIX_BLOCK_TOKENS
        req.computed = req.shared
        if blocks:
            self.prefix.acquire(req.hashes[:blocks])

    def _unpin(self, req: Request) -> None:
        if req.pinned:
            self.prefix.release(req.hashes[:req.pinned])
        req.pinned = req.shared = req.computed = 0

    def _count_lookup(self, req: Request) -> None:
        if self.prefix is not None and req.hashes:
            self.prefix.lookups_tokens += req.prompt
            self.prefix.hits_tokens += req.shared

    # ---- applying a step's results ------------------------------------------------------------
    def _advance(self, steps: int) -> None:
        grown = len(self.decoding) * steps * self.rate
        self.records.produced_tokens += grown
        self.step += steps
        self.steps_run += max(steps, 1)
        self.ctx_sum += grown
        self.kv.grow(grown)

    def _finish_chunks(self, chunks: list[tuple[Request, int]]) -> None:
        now = self.env.now
        for req, c in chunks:
            req.computed += c
            if req.computed < req.prefill_target:
                continue
            self.prefilling.remove(req)
            ctx = req.prefill_target
            req.generated += 1
            self.records.produced_tokens += 1
            if req.generated == 1:
                self.records.first_token_s[req.id] = now
            if req.generated >= req.output:
                self._release(req, ctx, keep_prefix=True)
                self._finish(req)
            elif self.role == "prefill":
                self._release(req, ctx, keep_prefix=True)
                self._unassign(req)
                self.handoff(self, req)
            else:
                self.kv.grow(1)
                self._join_decode(req)

    def _join_decode(self, req: Request) -> None:
        req.join_step = self.step
        req.ctx_join = req.prompt + req.generated
        self.decoding[req.id] = req
        self.ctx_sum += req.ctx_join
        if self.ranks is not None:
            req.rank = self.ranks.join(req.ctx_join, self.step)
        steps = math.ceil((req.output - req.generated) / self.rate - 1e-9)
        req.finish_key = _finish_key(self.step + max(1, steps), req.id)
        heapq.heappush(self.finish_heap, req.finish_key)

    def _leave_decode(self, req: Request, ctx: float) -> None:
        self.ctx_sum -= ctx
        if self.ranks is not None:
            self.ranks.leave(req.rank, ctx, self.step)

    def _release(self, req: Request, ctx: float, keep_prefix: bool) -> None:
        """Free the request's KV; with a prefix cache, when `keep_prefix`, its own full hashed blocks stay cached (the
        prompt's, and the answer's where hashed), and its pinned blocks are unpinned: the whole sequence's blocks become
        idle tail first (`gpusim/sim/prefixcache.py`)."""
        own = ctx - req.shared
        if self.prefix is not None and req.hashes:
            if keep_prefix:
                own -= self.prefix.adopt(req.hashes[req.pinned:req.kept_blocks(ctx)]) * PREFIX_BLOCK_TOKENS
            self.prefix.release(req.hashes[:req.pinned])
        req.pinned = req.shared = 0
        self.kv.release(own)

    def _next_finish(self) -> int:
        heap = self.finish_heap
        while heap and not self._current(heap[0]):
            heapq.heappop(heap)
        return heap[0] >> RID_BITS

    def _current(self, key: int) -> Request | None:
        """The decoding request whose finish `key` names, None for a stale entry."""
        req = self.decoding.get(key & RID_MASK)
        return req if req is not None and req.finish_key == key else None

    def _complete_due(self) -> None:
        heap = self.finish_heap
        due = (self.step + 1) << RID_BITS  # every key of a step up to this one
        while heap and heap[0] < due:
            req = self._current(heapq.heappop(heap))
            if req is None:
                continue
            del self.decoding[req.id]
            ctx = req.context_at(self.step, self.rate)
            self._leave_decode(req, ctx)
            self._release(req, ctx, keep_prefix=True)
            req.generated = req.output
            self._finish(req)

    def _unassign(self, req: Request) -> None:
        self._loads[self._slot] -= req.load
        req.load = 0

    def _finish(self, req: Request) -> None:
        self.records.completion_s[req.id] = self.env.now
        self.records.completed += 1
        self.records.generated_tokens += req.output
        self._unassign(req)
        self.on_complete(req)


RID_BITS = 32
"""Bits of a finish key that hold the request id (a run issues fewer than 2**32 requests)."""
RID_MASK = (1 << RID_BITS) - 1


def _finish_key(step: int, rid: int) -> int:
    """A heap key ordered by finish step, then request id."""
    return step << RID_BITS | rid


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
