"""A cluster of instances on the hardware, fed by a workload through a router."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from gpusim.loadgen.workload import Workload
from gpusim.perf.memory import MemoryPlan
from gpusim.sim.instance import Instance, StepCost
from gpusim.sim.records import Records
from gpusim.sim.request import Request
from gpusim.sim.router import make_router
from gpusim.specs.deployment import Deployment


@dataclass
class SimStats:
    """Engine counters of one run, for speed reports and invariants."""

    instances: int
    steps: int
    busy_s: list[float]
    memory: MemoryPlan


class Cluster:
    """Instances of one deployment filling the hardware, a router, and the request source."""

    def __init__(self, cost: StepCost, memory: MemoryPlan, deployment: Deployment, workload: Workload,
                 instances: int) -> None:
        self.cost, self.memory, self.workload = cost, memory, workload
        self.env = simpy.Environment()
        self.records = Records(workload.input_tokens, workload.output_tokens)
        self.instances = [
            Instance(self.env, i, cost, memory.kv_capacity_tokens, deployment, self.records, self._on_complete)
            for i in range(instances)
        ]
        self.router = make_router(deployment.router, self.instances)
        self.issued = 0

    def run(self) -> Records:
        """Simulate until every request has completed."""
        self.env.process(self._source())
        self.env.run()
        return self.records

    def stats(self) -> SimStats:
        return SimStats(
            instances=len(self.instances),
            steps=sum(i.steps_run for i in self.instances),
            busy_s=[i.busy_s for i in self.instances],
            memory=self.memory,
        )

    def _source(self) -> Generator[simpy.Event, object, None]:
        wl = self.workload
        if wl.concurrency is not None:
            for _ in range(min(wl.concurrency, len(wl))):
                self._issue()
            return
        for t in wl.arrival_s.tolist():
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            self._issue()

    def _issue(self) -> None:
        i = self.issued
        self.issued += 1
        self.records.scheduled_s[i] = self.env.now
        req = Request(i, int(self.workload.input_tokens[i]), int(self.workload.output_tokens[i]))
        inst = self.router.pick(req)
        self.records.instance[i] = inst.index
        inst.submit(req)

    def _on_complete(self, req: Request) -> None:
        if self.workload.concurrency is not None and self.issued < len(self.workload):
            self._issue()
