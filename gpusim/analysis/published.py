"""Published MLPerf rows (shaped like ../shared/reference/mlperf_calibration.csv) mapped to gpusim runs.

Rows name hardware in submitters' spellings (`NVIDIA B300-SXM-270GB (1100W TGP)` × 8); they map to a
system profile and a count by rule, never by listing rows. Published values are only ever compared
with predictions here; nothing from them reaches a prediction.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gpusim.specs.hardware import load_hardware

ACCELERATOR_RULES: list[tuple[str, str]] = [
    (r"\bgb300\b", "gb300-nvl72"),
    (r"\bgb200\b", "gb200-nvl72"),
    (r"\bvera rubin\b|\brubin\b|\bvr200\b", "vr-nvl72"),
    (r"\bb300\b", "b300-hgx"),
    (r"\bb200\b", "b200-hgx"),
    (r"\bh200\b", "h200-hgx"),
    (r"\bh100\b", "h100-hgx"),
]
"""First match wins (GB300 before B300): a regular expression on the lower-cased accelerator name."""


@dataclass(frozen=True)
class PublishedRow:
    """One published result and the run that reproduces its setting."""

    hardware: str
    systems: int
    gpus: int
    benchmark: str
    scenario: str
    round: str
    value: float
    per_gpu: bool

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.value if self.per_gpu else self.value / self.gpus


def map_accelerator(accelerator: str, count: int) -> tuple[str, int] | None:
    """(system profile, systems) for `count` accelerators of a submitter-spelled name; None if unknown."""
    name = accelerator.lower().replace("-", " ")
    for pattern, profile in ACCELERATOR_RULES:
        if re.search(pattern, name):
            return profile, math.ceil(count / load_hardware(profile).system.gpus)
    return None


def benchmark_id(name: str) -> str:
    """`llama2-70b-99/99.9` and `llama2-70b-99.9` are the benchmark `llama2-70b`."""
    return re.sub(r"-99(\.9)?(/99(\.9)?)?$", "", name)


def read_published(path: Path) -> list[PublishedRow]:
    """The rows of a published-results CSV whose hardware maps to a profile and unit is tokens/s."""
    rows = []
    for r in pd.read_csv(path).itertuples(index=False):
        hw = map_accelerator(str(r.accelerator), int(r.num_accelerators))
        if hw is None or not str(r.unit).startswith("tokens/s"):
            continue
        rows.append(PublishedRow(hardware=hw[0], systems=hw[1], gpus=int(r.num_accelerators),
                                 benchmark=benchmark_id(str(r.benchmark)), scenario=str(r.scenario).lower(),
                                 round=str(r.round), value=float(r.value), per_gpu=str(r.unit).endswith("/GPU")))
    return rows
