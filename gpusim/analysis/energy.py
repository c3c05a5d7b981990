"""Power, energy and cost per output token of a run, from TDPs, utilisation, capex and power price.

Power of the hardware, averaged over the run (watts):
    gpu    = TDP · [used · (idle + (busy − idle) · u) + unused · idle]
    other  = systems · (system power − GPUs per system · TDP)     CPUs, NICs, switches, fans; constant
    total  = (gpu + other) · PUE                                     at the facility
where `u` is the mean busy fraction of the instances (engine busy time / simulated time), `idle` and
`busy` are fractions of TDP, and unused GPUs (not in any instance) idle. Then
    energy_j_per_token     = total / (output tokens/s)       (steady_*: the steady window's rate and busy
                                                               fraction, gpusim.analysis.steady)
    tokens_per_s_per_mw    = (output tokens/s) / (total / 1e6)
    usd_per_million_tokens = 1e6 · [capex · systems / (years · 365.25 · 86,400 s) + total/1e3 · $/kWh / 3,600 s]
                             / (output tokens/s)
The defaults live in hardware_profiles/costs.yaml, each with its source and grade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpusim.specs.costs import CostOverrides, load_costs
from gpusim.specs.hardware import Hardware
from gpusim.specs.loading import validate

SECONDS_PER_YEAR = 365.25 * 86_400


class BusyStats(Protocol):
    """What the engine reports that the energy model needs (gpusim.sim.cluster.SimStats)."""

    busy_s: Sequence[float]
    instance_gpus: Sequence[int]
    """GPUs of each instance (busy fractions are weighted by them; empty: one each)."""


def energy_and_cost(summary: Mapping, hardware: Hardware, stats: BusyStats,
                    overrides: Mapping | None = None) -> dict[str, float | None]:
    """Average power, energy per token, tokens/s per MW and $ per million output tokens of one run.

    The $ figures are None for a system without a price (a user's profile): pass `capex_usd` (`--costs FILE`).

    `summary` needs output_tokens_per_s, simulated_s and num_gpus (GPUs in instances); figures are
    None when the run produced no tokens.
    """
    prices = Prices.of(hardware, overrides)
    util = busy_fraction(stats.busy_s, summary.get("simulated_s"), stats.instance_gpus)
    used = min(int(summary.get("num_gpus") or 0), hardware.num_gpus)
    capex_usd_per_s = None if prices.capex_usd is None else prices.capex_usd * hardware.systems / (
        prices.value("amortisation_years") * SECONDS_PER_YEAR)

    def power_w(u: float) -> float:
        return facility_power_w(hardware, used, u, prices)

    def per_token(tps: float | None, w: float) -> tuple[float | None, float | None]:
        """J and $ per token; the $ figure is None for a system without a price."""
        if not tps:
            return None, None
        usd = (None if capex_usd_per_s is None
               else 1e6 * (capex_usd_per_s + w / 1e3 * prices.value("usd_per_kwh") / 3600) / tps)
        return w / tps, usd

    run_w = power_w(util)
    energy, usd = per_token(summary.get("output_tokens_per_s") or 0.0, run_w)
    steady_util = summary.get("steady_busy_fraction")
    steady_energy, steady_usd = (per_token(summary.get("steady_output_tokens_per_s"), power_w(steady_util))
                                 if steady_util is not None else (None, None))
    tps = summary.get("output_tokens_per_s") or 0.0
    return {
        "power_kw": run_w / 1e3,
        "gpu_busy_fraction": util,
        "energy_j_per_token": energy,
        "tokens_per_s_per_mw": tps / (run_w / 1e6) if run_w > 0 else None,
        "usd_per_million_tokens": usd,
        "steady_energy_j_per_token": steady_energy,
        "steady_usd_per_million_tokens": steady_usd,
    }


@dataclass(frozen=True)
class Prices:
    """The cost profile's figures (hardware_profiles/costs.yaml) with a run's overrides applied."""

    overrides: CostOverrides
    capex_usd: float | None
    """The price of one system; None for a system without one (a user's profile without `capex_usd`)."""

    @classmethod
    def of(cls, hardware: Hardware, overrides: Mapping | None = None) -> Prices:
        over = validate(CostOverrides, dict(overrides or {}), "costs")
        shipped = load_costs().capex_usd.get(hardware.id)
        return cls(over, over.capex_usd if over.capex_usd is not None else shipped.value if shipped else None)

    def value(self, name: str) -> float:
        """A figure of the cost profile (amortisation_years, usd_per_kwh, pue, gpu_idle_fraction, ...)."""
        given = getattr(self.overrides, name)
        return getattr(load_costs(), name).value if given is None else given


def facility_power_w(hardware: Hardware, used_gpus: int, utilisation: float, prices: Prices) -> float:
    """Average facility power of `hardware` (module docstring): `used_gpus` busy for `utilisation` of the time,
    the rest of its GPUs idle, its other components constant, times the PUE."""
    tdp = hardware.gpu.tdp_w.value
    idle, busy = prices.value("gpu_idle_fraction"), prices.value("gpu_busy_fraction")
    gpu_w = tdp * (used_gpus * (idle + (busy - idle) * utilisation) + (hardware.num_gpus - used_gpus) * idle)
    other_w = hardware.systems * max(hardware.system.power_kw.value * 1e3 - hardware.system.gpus * tdp, 0.0)
    return (gpu_w + other_w) * prices.value("pue")


def busy_fraction(busy_s: Sequence[float], simulated_s: float | None,
                  instance_gpus: Sequence[int] | None = None) -> float:
    """Mean fraction of the run the instances spent running batch steps, in [0, 1], weighted by their GPUs
    (`instance_gpus`, one each when not given)."""
    if not busy_s or not simulated_s:
        return 0.0
    weights = list(instance_gpus) if instance_gpus else [1] * len(busy_s)
    return min(max(sum(b * g for b, g in zip(busy_s, weights, strict=True)) / (sum(weights) * simulated_s), 0.0),
               1.0)
