"""Map a function over jobs in worker processes, or in this one when one worker (or one job) will do; run one
piece of work in a forked copy of this process (`in_forked_copy`)."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gpusim.errors import InputError
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


def _task(fn: Callable[[Job], Out]) -> Callable[[Job], Out]:
    """`fn` as a worker runs it: under the software profiles overlaid in this process, if any."""
    profiles = overlaid()
    return _Overlaid(fn, profiles) if profiles else fn


PARENT_POLL_S = 0.5
"""How often a worker checks that the process that started it is still alive."""


def _exit_with_parent(parent: int) -> None:
    """A worker's initializer: a daemon thread ends the worker once its parent is gone. A parent killed with
    SIGKILL (a time-out) runs no clean-up, and its pool's workers would otherwise compute on, orphaned."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="gpusim-parent-watch").start()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit when this process dies (`_exit_with_parent`)."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_exit_with_parent, initargs=(os.getpid(),))


def dask_client(scheduler: str) -> Any:
    """A client of the Dask scheduler at `scheduler` (tcp://HOST:PORT); InputError without dask.distributed or
    when it cannot be reached."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise InputError("command line", "scheduler", "needs dask.distributed: pip install 'gpusim[dask]'") from None
    try:
        return Client(scheduler, timeout=10)
    except (OSError, TimeoutError) as exc:
        raise InputError("command line", "scheduler", f"cannot reach {scheduler} ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())})") from None


def parallel_map(fn: Callable[[Job], Out], jobs: Iterable[Job], workers: int, scheduler: str | None = None
                 ) -> list[Out]:
    """`[fn(j) for j in jobs]`, in order, over `workers` processes (one job each at a time, so a long job
    does not hold others back) or on the Dask cluster at `scheduler`; `fn` must be picklable, a module-level
    function or a `functools.partial`. Software profiles overlaid in this process (`software_overlay`) are
    overlaid in the workers too."""
    jobs = list(jobs)
    if scheduler is not None and jobs:
        client = dask_client(scheduler)
        try:
            return client.gather(client.map(_task(fn), jobs, pure=False))
        finally:
            client.close()
    if workers > 1 and len(jobs) > 1:
        with worker_pool(workers) as pool:
            return list(pool.map(_task(fn), jobs, chunksize=1))
    return [fn(j) for j in jobs]


def parallel_imap(fn: Callable[[Job], Out], jobs: Iterable[Job], workers: int) -> Iterator[tuple[int, Out]]:
    """(index, `fn(job)`) for each job as it finishes, over `workers` processes (in order with one worker), with
    the overlaid software profiles as `parallel_map`."""
    jobs = list(jobs)
    if workers <= 1 or len(jobs) <= 1:
        yield from ((i, fn(j)) for i, j in enumerate(jobs))
        return
    with worker_pool(workers) as pool:
        futures = {pool.submit(_task(fn), j): i for i, j in enumerate(jobs)}
        for f in as_completed(futures):
            yield futures[f], f.result()


CAN_FORK = sys.platform.startswith("linux")
"""Whether `in_forked_copy` can work: a fork copies the process cheaply and safely enough on Linux."""


def in_forked_copy(work: Callable[[], Out]) -> Out | None:
    """`work()` done in a forked copy of this process (which may change its own state freely: this one's stays as
    it was), its result pickled back; None where the copy failed, so that the caller can do it the plain way."""
    if not CAN_FORK:
        return None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: do the work, hand it back, and leave without running any of the parent's exit code
        os.close(read)
        code = 1
        try:
            with os.fdopen(write, "wb") as out:
                pickle.dump(work(), out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    return pickle.loads(data) if os.waitstatus_to_exitcode(status) == 0 and data else None


__all__ = ["CAN_FORK", "dask_client", "in_forked_copy", "parallel_imap", "parallel_map", "worker_pool"]
