"""Routers assign each request to an instance of a pool."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
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
    """The instance with the least outstanding work (tokens assigned and not finished)."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances

    def pick(self, req: Request) -> Instance:
        return min(self.instances, key=_LOAD)  # the first of the least loaded, read without a Python call each


class KVAware:
    """The instance where the request adds the least work: prompt tokens its prefix cache does not
    hold plus the work already queued there (as Dynamo's KV router weighs overlap against load)."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances

    def pick(self, req: Request) -> Instance:
        return min(self.instances, key=lambda i: i.outstanding_tokens + req.prompt - i.prefix_overlap(req))


_LOAD = attrgetter("outstanding_tokens")


ROUTERS: dict[str, type] = {"round_robin": RoundRobin, "least_loaded": LeastLoaded, "kv_aware": KVAware}


def make_router(name: str, instances: Sequence[Instance]) -> Router:
    return ROUTERS[name](instances)
