"""Data movement between instances: links with capacities, flows sharing them max-min fairly.

A transfer (a KV cache moving from a prefill to a decode instance) is a flow over a path of links:
the sender's egress, perhaps a shared scale-out spine, the receiver's ingress. At every flow start
and end the rates are recomputed by progressive filling (max-min fairness), so concurrent transfers
on one link share its bandwidth — a flow model, not a fixed delay. A transfer takes its path's
latency, then its bytes at the rate it is given.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

import simpy


@dataclass(eq=False)
class Link:
    """One direction of a link: `capacity` bytes/s shared by the flows crossing it."""

    name: str
    capacity: float


@dataclass(eq=False)
class _Flow:
    links: tuple[Link, ...]
    remaining: float
    done: simpy.Event
    rate: float = 0.0


@dataclass(eq=False)
class Fabric:
    """Active flows and their max-min fair rates."""

    env: simpy.Environment
    flows: list[_Flow] = field(default_factory=list)
    _updated: float = 0.0
    _version: int = 0

    def transfer(self, links: tuple[Link, ...], nbytes: float, latency: float) -> simpy.Event:
        """An event that fires when `nbytes` have crossed `links` after `latency` seconds."""
        done = self.env.event()
        self.env.process(self._start(links, nbytes, latency, done))
        return done

    def _start(self, links: tuple[Link, ...], nbytes: float, latency: float,
               done: simpy.Event) -> Generator[simpy.Event, object, None]:
        if latency > 0:
            yield self.env.timeout(latency)
        if nbytes <= 0 or not links:
            done.succeed()
            return
        self._progress()
        self.flows.append(_Flow(links, nbytes, done))
        self._reschedule()

    def _progress(self) -> None:
        """Move every flow forward to now at its current rate."""
        dt = self.env.now - self._updated
        if dt > 0:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self._updated = self.env.now

    def _reschedule(self) -> None:
        max_min_fair(self.flows)
        if not self.flows:
            return
        self._version += 1
        wait = min(f.remaining / f.rate for f in self.flows)
        self.env.process(self._finish_next(max(0.0, wait), self._version))

    def _finish_next(self, wait: float, version: int) -> Generator[simpy.Event, object, None]:
        yield self.env.timeout(wait)
        if version != self._version:
            return  # a newer flow start or end re-planned the rates
        self._progress()
        finished = [f for f in self.flows if f.remaining <= 1e-9 * max(1.0, f.rate)]
        for f in finished:
            self.flows.remove(f)
            f.done.succeed()
        self._reschedule()


def max_min_fair(flows: list[_Flow]) -> None:
    """Set each flow's rate by progressive filling: the most contended link's fair share first."""
    left = {}
    users: dict[Link, list[_Flow]] = {}
    for f in flows:
        for link in f.links:
            left[link] = link.capacity
            users.setdefault(link, []).append(f)
    unfrozen = set(flows)
    while unfrozen:
        link = min((lk for lk, us in users.items() if us), key=lambda lk: left[lk] / len(users[lk]))
        share = left[link] / len(users[link])
        for f in list(users[link]):
            f.rate = share
            unfrozen.discard(f)
            for lk in f.links:
                left[lk] -= share
                users[lk].remove(f)
