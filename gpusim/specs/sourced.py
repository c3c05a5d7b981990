"""A number with its provenance: every hardware and workload constant carries a source and a grade."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Grade = Literal["A", "B", "C", "D"]
"""Evidence grade: A vendor datasheet, B public measurement, C derived, D assumed or calibrated."""


class Sourced(BaseModel):
    """A value with where it came from (`source`) and how much to trust it (`grade`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(allow_inf_nan=False)
    source: str
    grade: Grade
    note: str | None = None

    def __float__(self) -> float:
        return self.value


PLAUSIBLE = 1e9
"""Above this no hardware quantity gpusim reads (GiB, TB/s, TFLOPS, GB/s, W, kW) is meant: a typo."""


def positive(v: Sourced | None) -> Sourced | None:
    """A field validator: the value must be above zero (a rate, a size, a power) and plausible."""
    if v is not None and not 0 < v.value <= PLAUSIBLE:
        raise ValueError(f"must be > 0 and at most {PLAUSIBLE:g}, got {v.value}")
    return v


def non_negative(v: Sourced | None) -> Sourced | None:
    """A field validator: the value must not be below zero (a latency)."""
    if v is not None and v.value < 0:
        raise ValueError(f"must be >= 0, got {v.value}")
    return v
