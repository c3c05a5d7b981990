"""Routers assign each request to an instance of a pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpusim.sim.instance import Instance
from gpusim.sim.request import Request


class Router(Protocol):
    def pick(self, req: Request) -> Instance: ...


class RoundRobin:
    """Instances in turn."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances, self.next = instances, 0

    def pick(self, req: Request) -> Instance:
        inst = self.instances[self.next]
        self.next = (self.next + 1) % len(self.instances)
        return inst


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


ROUTERS: dict[str, type] = {"round_robin": RoundRobin, "least_loaded": LeastLoaded, "kv_aware": KVAware}


def make_router(name: str, instances: Sequence[Instance]) -> Router:
    return ROUTERS[name](instances)
