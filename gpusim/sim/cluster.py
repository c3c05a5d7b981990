"""A cluster: pools of instances placed on the hardware, routers, the request source and KV transfers."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Protocol

import simpy

from gpusim.loadgen.workload import Workload
from gpusim.sim.fabric import Fabric
from gpusim.sim.instance import Instance, StepCost
from gpusim.sim.kvtiers import Tier, TierStore
from gpusim.sim.records import Records
from gpusim.sim.request import Request
from gpusim.sim.router import make_router
from gpusim.sim.timeline import Timeline
from gpusim.sim.topology import Placement, Topology
from gpusim.specs.deployment import Deployment, Role


class StopRule(Protocol):
    """Asked every `every_s` simulated seconds whether a run has decided what it was run for
    (`gpusim.simulation.InvalidStop`)."""

    every_s: float

    def __call__(self, records: Records, now_s: float) -> bool: ...


@dataclass(frozen=True)
class Pool:
    """`count` instances of one role, with their cost model and KV capacity per instance."""

    role: Role
    cost: StepCost
    kv_capacity_tokens: int
    deployment: Deployment
    """The deployment as this pool sees it (its own parallelism)."""
    count: int
    tiers: tuple[Tier, ...] = ()
    """KV memory tiers below HBM each instance offloads prefix blocks to (`Deployment.kv_offload`)."""


@dataclass
class SimStats:
    """Engine counters of one run, for speed reports, energy and invariants."""

    instances: int
    steps: int
    busy_s: list[float]
    roles: list[str]
    prefix_hit_rate: float | None
    kv_tiers: dict | None = None
    """Per lower KV tier, summed over instances: tokens and reloads read back, blocks stored (`TierStore`)."""
    timeline: Timeline | None = None
    """Engine activity over time (batch, KV, queue, tokens), binned."""
    stopped_s: float | None = None
    """The simulated time a stop rule ended the run at, before every request completed (`Cluster.run`)."""
    instance_gpus: list[int] = field(default_factory=list)
    """GPUs of each instance, in the order of `busy_s` (busy fractions are weighted by them)."""


class Cluster:
    """Instances of every pool, placed in order on the topology; requests enter through the router of
    the first pool (aggregated or prefill); prefill instances hand KV caches to the decode pool, picked by the
    same policy (least loaded for `kv_aware`)."""

    def __init__(self, pools: list[Pool], workload: Workload, topology: Topology | None = None,
                 router: str = "least_loaded", kv_bytes: Callable[[float], float] | None = None,
                 dispatch_overhead_s: float = 0.0, handoff_overhead_s: float = 0.0,
                 encode_tokens: Callable[[int], int] | None = None, front_ends: int = 1) -> None:
        self.env = simpy.Environment()
        self.dispatch_overhead_s = dispatch_overhead_s
        """Front-end time (HTTP, tokenizer, scheduler) before an instance sees a request."""
        self.handoff_overhead_s = handoff_overhead_s
        """Fixed time of a prefill → decode handoff beyond the KV transfer itself."""
        self.workload = workload
        self.records = Records(workload.input_tokens, workload.output_tokens)
        self.topology = topology or Topology()
        self.fabric = Fabric(self.env)
        self.kv_bytes = kv_bytes or (lambda tokens: 0.0)
        sizes = [p.deployment.gpus_per_instance for p in pools for _ in range(p.count)]
        self.placement: list[Placement] = self.topology.place(sizes)
        self.timeline = Timeline()
        self.instances: list[Instance] = []
        self.encode_tokens = encode_tokens
        """A VLM with its own encoder pool (role `encode`): the image tokens of a prompt of that many tokens."""
        encoders: list[Instance] = []
        for pool in pools:
            encode = pool.role == "encode"  # serves images whole, then hands the request to the LM
            for _ in range(pool.count):
                inst = Instance(
                    self.env, len(self.instances), pool.cost, pool.kv_capacity_tokens, pool.deployment,
                    self.records, self._on_complete, role="prefill" if encode else pool.role,
                    handoff=self._encoded if encode else self._handoff, timeline=self.timeline, tiers=pool.tiers)
                self.instances.append(inst)
                if encode:
                    encoders.append(inst)
        front = [i for i in self.instances if i.role != "decode" and i not in encoders]
        back = [i for i in self.instances if i.role == "decode"]
        self.encode_router = make_router("least_loaded", encoders) if encoders else None
        self._encoding: dict[int, Request] = {}
        """Requests whose image an encoder instance holds, by id."""
        self.router = make_router(router, front, front_ends)
        self.decode_router = (make_router("least_loaded" if router == "kv_aware" else router, back, front_ends)
                              if back else None)
        self.issued = 0
        self.stopped_s: float | None = None
        """When `run`'s stop rule ended the run before every request completed (None: it ran to the end)."""
        self.completion_hooks: list[Callable[[Request], None]] = []
        self._waiting: list[int] = []
        """Sessions: awaited completions still outstanding, per request (`Workload.after`)."""
        self._children: list[list[int]] = []
        self._started = False
        self._closed = False
        """No more requests are issued (`drain`)."""
        self._pause: tuple[int, simpy.Event] | None = None
        """(requests issued, the event that pauses the run there) for `run_until_issued`."""

    def run(self, stop: StopRule | None = None) -> Records:
        """Simulate until every request has completed, or until `stop(records, now)` says the run has decided
        what it was run for (`stopped_s` is then its time). A run paused by `run_until_issued` carries on."""
        self._start()
        if stop is None:
            self.env.run()
            return self.records
        over = self.env.event()
        self.env.process(self._watch(stop, over))
        self.env.run(until=over)
        return self.records

    def run_until_issued(self, n: int) -> None:
        """Simulate until the workload's `n`th request has been issued, and pause there: up to that moment a run of
        only the first `n` requests is the same run, event for event (`run` carries on, `drain` ends it there)."""
        self._start()
        self._pause = n, self.env.event()
        self.env.run(until=self._pause[1])

    def drain(self) -> Records:
        """Issue no more requests, and simulate until every issued one has completed."""
        self._closed = True
        self._start()
        self.env.run()
        return self.records

    def _start(self) -> None:
        if not self._started:
            self._started = True
            self.env.process(self._source())

    def _watch(self, stop: StopRule, over: simpy.Event) -> Generator[simpy.Event, object, None]:
        while self.records.completed < len(self.workload):
            yield self.env.timeout(stop.every_s)
            if self.records.completed < len(self.workload) and stop(self.records, self.env.now):
                self.stopped_s = self.env.now
                break
        over.succeed()

    def stats(self) -> SimStats:
        caches = [i.prefix for i in self.instances if i.prefix is not None]
        looked = sum(c.lookups_tokens for c in caches)
        return SimStats(
            instances=len(self.instances),
            steps=sum(i.steps_run for i in self.instances),
            busy_s=[i.busy_s for i in self.instances],
            roles=[i.role for i in self.instances],
            prefix_hit_rate=sum(c.hits_tokens for c in caches) / looked if looked else None,
            kv_tiers=_tier_counters([c.lower for c in caches if c.lower is not None], looked),
            timeline=self.timeline,
            stopped_s=self.stopped_s,
            instance_gpus=[p.gpus for p in self.placement],
        )

    def _source(self) -> Generator[simpy.Event, object, None]:
        wl = self.workload
        if wl.concurrency is not None:
            for _ in range(min(wl.concurrency, len(wl))):
                self._issue(self.issued)
            return
        if wl.after is not None:  # sessions: first calls at their arrival, the rest after what they wait for
            self._waiting = [len(a) for a in wl.after]
            self._children = [[] for _ in wl.after]
            for i, waits in enumerate(wl.after):
                for j in waits:
                    self._children[j].append(i)
        for i, t in enumerate(wl.arrival_s.tolist()):
            if self._waiting and self._waiting[i]:
                continue
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            if self._closed:
                return
            self._issue(i)
            if self._pause is not None and i + 1 == self._pause[0]:
                self._pause[1].succeed()
                self._pause = None

    def _issue(self, i: int) -> None:
        wl = self.workload
        self.issue_request(int(wl.input_tokens[i]), int(wl.output_tokens[i]),
                           wl.prefix_hashes[i] if wl.prefix_hashes else None, rid=i, answer_hashed=wl.answer_hashed)

    def issue_request(self, prompt: int, output: int, hashes: tuple[int, ...] | None = None,
                      rid: int | None = None, answer_hashed: bool = False) -> int:
        """Schedule a request now and route it; returns its id (`rid`, the workload's index, else the next in
        issue order). The workload source calls this, and so may an outside driver (the real MLPerf LoadGen,
        with a placeholder workload sized for its queries)."""
        i = self.issued if rid is None else rid
        self.issued += 1
        rec = self.records
        rec.input_tokens[i], rec.output_tokens[i], rec.scheduled_s[i] = prompt, output, self.env.now
        req = Request(i, prompt, output, hashes, answer_hashed)
        if self.encode_router is not None:  # the image is encoded first, on the encoder pool
            enc = Request(i, self.encode_tokens(prompt), 2)  # > 1 token: a prefill-role instance hands it on
            self._encoding[i] = req
            self.encode_router.pick(enc).submit(enc, self.dispatch_overhead_s)
            return i
        inst = self.router.pick(req)
        rec.instance[i] = inst.index
        # the front end sits in system 0: dispatch to another system crosses the scale-out fabric
        remote = 0.0 if self.placement[inst.index].system == 0 else self.topology.scaleout_latency
        inst.submit(req, self.dispatch_overhead_s + remote)
        return i

    def _encoded(self, src: Instance, enc: Request) -> None:
        """An image is encoded: its request (the whole prompt, image tokens included) goes to the LM's router;
        the encoder's output stays on the node (its transfer is not modelled)."""
        req = self._encoding.pop(enc.id)
        inst = self.router.pick(req)
        self.records.instance[req.id] = inst.index
        inst.submit(req)

    def _handoff(self, src: Instance, req: Request) -> None:
        """Move a prefilled request's KV cache to a decode instance over the fabric."""
        dst = self.decode_router.pick(req)
        rec = self.records
        rec.prefill_instance[req.id], rec.instance[req.id] = src.index, dst.index
        rec.handoffs[req.id] += 1
        links, latency = self.topology.path(self.placement[src.index], self.placement[dst.index])
        start = self.env.now
        landed = self.fabric.transfer(links, self.kv_bytes(req.prompt + req.generated),
                                      latency + self.handoff_overhead_s)
        landed.callbacks.append(lambda _: rec.kv_transfer_s.__setitem__(req.id, self.env.now - start))
        dst.submit_prefilled(req, landed)

    def _on_complete(self, req: Request) -> None:
        for hook in self.completion_hooks:
            hook(req)
        wl = self.workload
        if wl.concurrency is not None and self.issued < len(wl):
            self._issue(self.issued)
        for c in self._children[req.id] if self._children else ():
            self._waiting[c] -= 1
            if not self._waiting[c]:  # the last call it waited for: its tool call runs, then it is issued
                self.env.timeout(float(wl.delay_s[c])).callbacks.append(lambda _, c=c: self._issue(c))


def _tier_counters(stores: list[TierStore], looked_tokens: int) -> dict | None:
    """`SimStats.kv_tiers`: each tier's counters summed over instances, with its share of the prompt tokens looked
    up in the prefix cache (what it saved from being prefilled again)."""
    if not stores:
        return None
    out: dict = {}
    for store in stores:
        for name, counts in store.counters().items():
            total = out.setdefault(name, dict.fromkeys(counts, 0))
            for k, v in counts.items():
                total[k] += v
    for counts in out.values():
        counts["reloaded_share"] = counts["reloaded_tokens"] / looked_tokens if looked_tokens else None
    return out
