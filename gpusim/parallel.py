"""Map a function over jobs in worker processes, or in this one when one worker (or one job) will do."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

Job = TypeVar("Job")
Out = TypeVar("Out")


def parallel_map(fn: Callable[[Job], Out], jobs: Iterable[Job], workers: int) -> list[Out]:
    """`[fn(j) for j in jobs]`, in order, over `workers` processes (one job each at a time, so a long job
    does not hold others back); `fn` must be picklable, a module-level function or a `functools.partial`."""
    jobs = list(jobs)
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(fn, jobs, chunksize=1))
    return [fn(j) for j in jobs]


__all__ = ["parallel_map"]
