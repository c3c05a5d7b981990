"""Routers assign each request to an instance of a pool."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from gpusim.sim.instance import Instance
from gpusim.sim.request import Request


class Router(Protocol):
    def pick(self, req: Request) -> Instance: ...


_MASK = (1 << 64) - 1


def front_end_of(request_id: int, front_ends: int) -> int:
    """Which of `front_ends` independent front ends a request reaches: a fixed pseudo-random pick per request
    id (splitmix64), the same for its prefill and its decode instance, as one front end picks both."""
    z = (request_id + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) % front_ends


class RoundRobin:
    """Instances in turn. With `front_ends` > 1, that many front ends route independently (Dynamo frontends
    behind nginx): each request reaches one of them (`front_end_of`), and each takes its own turn over its own
    order of the instances (a randomly seeded hash map's order, fixed per front end)."""

    def __init__(self, instances: Sequence[Instance], front_ends: int = 1) -> None:
        self.instances, self.front_ends = instances, front_ends
        n = len(instances)
        self.orders = [list(range(n))] + [random.Random(f).sample(range(n), n) for f in range(1, front_ends)]
        self.turns = [0] * front_ends

    def pick(self, req: Request) -> Instance:
        f = front_end_of(req.id, self.front_ends) if self.front_ends > 1 else 0
        turn = self.turns[f]
        self.turns[f] = (turn + 1) % len(self.instances)
        return self.instances[self.orders[f][turn]]


class LeastLoaded:
    """The instance with the least outstanding work (tokens assigned and not finished); the first of them on a tie.
    The instances keep their loads in one list of the router's (`Instance.share_load`), so a pick is two C calls."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances
        self.loads = [0] * len(instances)
        for slot, inst in enumerate(instances):
            inst.share_load(self.loads, slot)

    def pick(self, req: Request) -> Instance:
        loads = self.loads
        return self.instances[loads.index(min(loads))]


class KVAware:
    """The instance where the request adds the least work: prompt tokens its prefix cache does not
    hold plus the work already queued there (as Dynamo's KV router weighs overlap against load)."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances

    def pick(self, req: Request) -> Instance:
        return min(self.instances, key=lambda i: i.outstanding_tokens + req.prompt - i.prefix_overlap(req))


LOAD_READING: dict[str, type] = {"least_loaded": LeastLoaded, "kv_aware": KVAware}
"""Policies that read the instances' shared load: replicas of them behind several front ends pick alike."""


def make_router(name: str, instances: Sequence[Instance], front_ends: int = 1) -> Router:
    """The `name` policy over `instances`, behind `front_ends` independent front ends (which only round-robin,
    keeping turns of its own, tells apart)."""
    if name == "round_robin":
        return RoundRobin(instances, front_ends)
    return LOAD_READING[name](instances)
