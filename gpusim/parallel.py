"""Map a function over jobs in worker processes, or in this one when one worker (or one job) will do."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from gpusim.specs.software import SoftwareProfile, overlaid, software_overlay

Job = TypeVar("Job")
Out = TypeVar("Out")


@dataclass(frozen=True)
class _Overlaid(Generic[Job, Out]):
    """`fn` run under `software_overlay(*profiles)`: the caller's overlaid profiles reach a worker as data."""

    fn: Callable[[Job], Out]
    profiles: tuple[SoftwareProfile, ...]

    def __call__(self, job: Job) -> Out:
        with software_overlay(*self.profiles):
            return self.fn(job)


def parallel_map(fn: Callable[[Job], Out], jobs: Iterable[Job], workers: int) -> list[Out]:
    """`[fn(j) for j in jobs]`, in order, over `workers` processes (one job each at a time, so a long job
    does not hold others back); `fn` must be picklable, a module-level function or a `functools.partial`.
    Software profiles overlaid in this process (`software_overlay`) are overlaid in the workers too."""
    jobs = list(jobs)
    if workers > 1 and len(jobs) > 1:
        profiles = overlaid()
        task = _Overlaid(fn, profiles) if profiles else fn
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(task, jobs, chunksize=1))
    return [fn(j) for j in jobs]


__all__ = ["parallel_map"]
