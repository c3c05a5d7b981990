"""Published MLPerf rows (shaped like the published-results CSV of docs/accuracy.md) mapped to gpusim runs.

Rows name hardware in submitters' spellings (`NVIDIA B300-SXM-270GB (1100W TGP)` × 8); they map to a
system profile and a count by rule, never by listing rows. Published values are only ever compared
with predictions here; nothing from them reaches a prediction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gpusim.specs.benchmark import benchmark_names
from gpusim.specs.hardware import load_hardware

ACCELERATOR_RULES: list[tuple[str, str]] = [
    (r"\bgb300\b", "gb300-nvl72"),
    (r"\bgb200\b", "gb200-nvl72"),
    (r"\bvera rubin\b|\brubin\b|\bvr200\b", "vr-nvl72"),
    (r"\bb300\b", "b300-hgx"),
    (r"\bb200\b", "b200-hgx"),
    (r"\bh200\b", "h200-hgx"),
    (r"\bh100\b", "h100-hgx"),
    (r"\bmi355x\b", "mi355x-platform"),
]
"""First match wins (GB300 before B300): a regular expression on the lower-cased accelerator name."""


UNITS = ("tokens/s", "tokens/s/GPU", "samples/s", "queries/s")
SCENARIOS = ("offline", "server", "interactive")


class RowUnsupported(Exception):
    """The simulator cannot model this published row yet; the message says why."""


@dataclass(frozen=True)
class PublishedRow:
    """One published result and the gpusim setting that reproduces it."""

    system: str
    hardware: str
    systems: int
    gpus: int
    benchmark: str
    scenario: str
    round: str
    value: float
    unit: str

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """The value per GPU (only meaningful for token units)."""
        return self.value if self.unit.endswith("/GPU") else self.value / self.gpus


def map_accelerator(accelerator: str, count: int) -> tuple[str, int] | None:
    """(system profile, systems) for `count` accelerators of a submitter-spelled name; None if unknown."""
    name = accelerator.lower().replace("-", " ")
    for pattern, profile in ACCELERATOR_RULES:
        if re.search(pattern, name):
            return profile, math.ceil(count / load_hardware(profile).system.gpus)
    return None


def map_system(system: str, gpus: int = 1) -> tuple[str, int] | None:
    """(profile, systems) of a measured `system` name as the silicon sample and the kernel tables spell it
    (h100_sxm, gb200, …); None if no profile models it."""
    return map_accelerator(system.replace("_", " "), max(gpus, 1))


def benchmark_id(name: str) -> str:
    """`llama2-70b-99/99.9` and `llama2-70b-99.9` are the benchmark `llama2-70b`."""
    return re.sub(r"-99(\.9)?(/99(\.9)?)?$", "", name)


def map_row(r: Mapping) -> PublishedRow:
    """The gpusim setting of one CSV row; RowUnsupported with the reason when there is none."""
    gpus = int(r["num_accelerators"])
    hw = map_accelerator(str(r["accelerator"]), gpus)
    if hw is None:
        raise RowUnsupported(f"accelerator {r['accelerator']!r}: no hardware profile")
    bench = benchmark_id(str(r["benchmark"]))
    if bench not in benchmark_names():
        raise RowUnsupported(f"benchmark {bench}: not in workloads/benchmarks (valid: {', '.join(benchmark_names())})")
    unit = str(r["unit"]).strip()
    if unit not in UNITS:
        raise RowUnsupported(f"unit {unit!r}: valid {', '.join(UNITS)}")
    scenario = str(r["scenario"]).strip().lower()
    if scenario not in SCENARIOS:
        raise RowUnsupported(f"scenario {scenario}: valid {', '.join(SCENARIOS)}")
    return PublishedRow(str(r.get("system", "")), hw[0], hw[1], gpus, bench, scenario, str(r["round"]),
                        float(r["value"]), unit)


def read_published(path: Path) -> list[PublishedRow]:
    """The rows of a published-results CSV that map to a gpusim setting and are in tokens/s."""
    rows = []
    for r in pd.read_csv(path).to_dict("records"):
        try:
            row = map_row(r)
        except RowUnsupported:
            continue
        if row.unit.startswith("tokens/s"):
            rows.append(row)
    return rows
