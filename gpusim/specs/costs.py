"""The cost and power defaults (hardware_profiles/costs.yaml) and a run's replacements for them, as data
(the energy and cost model that uses them: gpusim/analysis/energy.py)."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from gpusim.specs.hardware import PROFILES
from gpusim.specs.loading import load_yaml_model
from gpusim.specs.sourced import Sourced

COSTS_FILE = PROFILES / "costs.yaml"


class CostProfile(BaseModel):
    """hardware_profiles/costs.yaml: cost and power defaults, every number sourced and graded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    amortisation_years: Sourced
    usd_per_kwh: Sourced
    pue: Sourced
    gpu_idle_fraction: Sourced
    """Power of an idle GPU as a fraction of its TDP."""
    gpu_busy_fraction: Sourced
    """Power of a GPU running batch steps as a fraction of its TDP."""
    capex_usd: dict[str, Sourced]
    """Purchase price of one system (rack or node) by system id."""


class CostOverrides(BaseModel):
    """Per-run replacements for the defaults; `capex_usd` is the price of one system of the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    amortisation_years: float | None = Field(None, gt=0)
    usd_per_kwh: float | None = Field(None, ge=0)
    pue: float | None = Field(None, ge=1)
    gpu_idle_fraction: float | None = Field(None, ge=0, le=1)
    gpu_busy_fraction: float | None = Field(None, ge=0, le=1)
    capex_usd: float | None = Field(None, ge=0)


@cache
def load_costs() -> CostProfile:
    """The cost defaults (hardware_profiles/costs.yaml)."""
    return load_yaml_model(CostProfile, COSTS_FILE)
