"""A number with its provenance: every hardware and workload constant carries a source and a grade."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Grade = Literal["A", "B", "C", "D"]
"""Evidence grade: A vendor datasheet, B public measurement, C derived, D assumed or calibrated."""


class Sourced(BaseModel):
    """A value with where it came from (`source`) and how much to trust it (`grade`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    source: str
    grade: Grade
    note: str | None = None

    def __float__(self) -> float:
        return self.value
