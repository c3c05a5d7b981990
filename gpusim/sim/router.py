"""Routers assign each arriving request to an instance."""

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
    """The instance with the least outstanding work (prompt + output tokens not yet finished)."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances

    def pick(self, req: Request) -> Instance:
        return min(self.instances, key=_load)


def _load(inst: Instance) -> int:
    return inst.outstanding_tokens


ROUTERS: dict[str, type] = {"round_robin": RoundRobin, "least_loaded": LeastLoaded}


def make_router(name: str, instances: Sequence[Instance]) -> Router:
    return ROUTERS[name](instances)
