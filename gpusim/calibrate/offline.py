"""Published MLPerf Offline results as calibration rows for `gpusim calibrate`.

The silicon sample measures serving at up to a few hundred sequences per engine; MLPerf submissions run
thousands, where the per-sequence host time and the per-step overheads weigh differently. So the
request-level fit (`gpusim.calibrate.fit`) also takes the Offline rows of `mlperf_calibration.csv` whose
round runs with the profile being fitted (`software_for_round`). Each row's deployment is the one the
MLPerf search (`gpusim mlperf --search`) finds at the constants the fit starts from; it stays fixed while
the constants are nudged, so the row's seconds per output token per GPU (the reciprocal of the published
tokens/s/GPU, linear in the overheads) gets finite-difference slopes like a silicon row's TPOT. Server and
Interactive rows are not fitted (their peak QPS is a bisection, too coarse for slopes): they, and the
silicon rows held out, are the validation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpusim.analysis.published import PublishedRow, RowUnsupported, read_published
from gpusim.build import prepare
from gpusim.parallel import parallel_map
from gpusim.search import trial
from gpusim.specs.deployment import AnyDeployment
from gpusim.validate.mlperf import predict_row, software_for_round, system_software, value_in_unit


@dataclass(frozen=True)
class OfflineRow:
    """One published Offline result and the deployment that reproduces it."""

    row: PublishedRow
    deployment: AnyDeployment

    @property
    def measured_s_per_token(self) -> float:
        """Published seconds per output token per GPU."""
        return 1.0 / self.row.tokens_per_s_per_gpu


def _key(row: PublishedRow) -> tuple:
    return row.hardware, row.systems, row.gpus, row.benchmark


def _once(items: list, key: Callable, job: Callable, fn: Callable, workers: int) -> list:
    """`fn(job(item))` for each item, computed once per distinct `key(item)` (in worker processes)."""
    first = {}
    for item in items:
        first.setdefault(key(item), item)
    got = dict(zip(first, parallel_map(fn, [job(i) for i in first.values()], workers), strict=True))
    return [got[key(item)] for item in items]


def _searched(args: tuple[PublishedRow, str, float]) -> AnyDeployment | str:
    row, software, duration_s = args
    try:
        return predict_row(row, software, duration_s)[1]
    except RowUnsupported as exc:
        return str(exc)


def offline_rows(path: Path, rounds_of: str, profile: str, duration_s: float, workers: int = 2) -> list[OfflineRow]:
    """The Offline rows of `path` whose round runs with software `rounds_of` (`software_for_round`) on a system
    without a stack of its own (`system_software`), each with the deployment the MLPerf search finds for it
    with software `profile` (distinct settings searched once, `workers` at a time); unsupported rows are left
    out."""
    rows = [r for r in read_published(path) if r.scenario == "offline"
            and software_for_round(r.round)[0] == rounds_of and system_software(r) is None]
    found = _once(rows, _key, lambda r: (r, profile, duration_s), _searched, workers)
    return [OfflineRow(r, dep) for r, dep in zip(rows, found, strict=True) if not isinstance(dep, str)]


def _s_per_token(args: tuple[OfflineRow, float]) -> float:
    case, duration_s = args
    r = case.row
    setup = prepare(r.hardware, r.benchmark, r.systems, case.deployment)
    got = value_in_unit(trial(setup, "offline", None, duration_s).result.summary, "tokens/s/GPU", r.gpus)
    return 1.0 / got if got > 0 else float("nan")


def predict_offline(rows: list[OfflineRow], duration_s: float, workers: int = 2) -> np.ndarray:
    """Seconds per output token per GPU of each row's deployment with the software profiles as they are now
    (identical settings simulated once)."""
    def setting(c: OfflineRow) -> tuple:
        return _key(c.row), c.deployment.model_dump_json()

    got = _once(rows, setting, lambda c: (c, duration_s), _s_per_token, workers)
    return np.array(got, dtype=float)


__all__ = ["OfflineRow", "offline_rows", "predict_offline"]
