"""How many systems of which kind serve a traffic at a service level, and what they cost (`gpusim plan`).

For each candidate system:

1. **One system's capacity at the level** (`system_capacity`): the frontier's screen picks the deployments worth
   simulating for the traffic's lengths and limits, ranked by analytic capacity at the level
   (`frontier.screen(rank="capacity")`: the disaggregated layout with the most prefill a prompt-heavy traffic
   needs, where the front's share would pick one whose context pool starves); each is bisected between the highest
   Poisson rate whose steady run meets the limits and the lowest that does not (`highest_meeting_qps`; runs are
   cached on disk like the frontier's).
2. **Systems**: ceil(peak rate / that capacity), plus `spare` systems that may be down (N+k).
3. **Verified by simulation** (`verify`): the fleet without its spares, the deployment on every system behind one
   router, serves the traffic at the peak rate (a trace replayed at that rate with its bursts, `Workload.at_rate`,
   or Poisson arrivals): it must meet the limits and one system fewer must not. A fleet that misses gets one more
   system and is run again; one whose smaller neighbour also meets gives one up. Both runs are in the answer.
4. **Cost** (`fleet_cost`): each system's price amortised per month, and the facility power of the serving systems
   at their measured utilisation and of the spares idle (`analysis.energy`), at the shipped or given prices.
5. **Growth** (`horizon`): where the peak grows by a factor a year, each later year's fleet is the verified one
   scaled with the peak (ceil(systems x growth), so no system carries more than in the verified run), its power at
   the load per system that implies; the cost of each year and of the whole horizon.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np

from gpusim.analysis.energy import Prices, facility_power_w
from gpusim.analysis.frontier import Limits, is_steady, meets_limits
from gpusim.best import cache_dir, setup_key, write_atomic
from gpusim.build import Setup, make_setup
from gpusim.errors import InputError
from gpusim.fit_lengths import fit_lognormal
from gpusim.frontier import (
    MAX_RUN_S,
    PointJob,
    analytic_points,
    first_duration,
    screen,
    steady_run,
    with_workload,
)
from gpusim.loadgen.rules import ms_text
from gpusim.loadgen.workload import Workload
from gpusim.parallel import parallel_map
from gpusim.simulation import build_workload, run_workload
from gpusim.specs.benchmark import LengthDistribution
from gpusim.specs.deployment import Deployment
from gpusim.specs.experiment import RunSpec

Log = Callable[[str], None]
HOURS_PER_MONTH = 365.25 * 24 / 12
BISECT_RATIO = 1.04
"""A system's capacity is bisected until the rate that misses is within this factor of the rate that meets."""
MAX_BISECT_RUNS = 8
MAX_REFITS = 4
"""Times a verification may add or remove a system before it gives up and says so."""


@dataclass(frozen=True)
class Traffic:
    """The load to serve: a peak rate, and either a trace replayed at it or the benchmark's lengths (Poisson)."""

    qps: float
    trace: Workload | None = None
    label: str = "Poisson arrivals of the benchmark's lengths"

    def workload(self, duration_s: float) -> Workload | None:
        """The trace replayed at `qps` for `duration_s` (None: Poisson arrivals, built by the run)."""
        return None if self.trace is None else self.trace.at_rate(self.qps, duration_s)


@dataclass(frozen=True)
class Growth:
    """The peak rate's growth: times `factor` each year, over `years` years (the default: one year, no growth)."""

    factor: float = 1.0
    years: int = 1

    def peaks(self, qps: float) -> list[float]:
        """The peak rate in each year of the horizon."""
        return [qps * self.factor ** y for y in range(self.years)]


@dataclass(frozen=True)
class Year:
    """One year of a plan's horizon."""

    year: int
    qps: float
    systems: int
    """Systems to buy by then, spares included."""
    usd_per_month: float | None


@dataclass(frozen=True)
class FleetRun:
    """One verification run of a fleet at the peak rate."""

    systems: int
    meets_limits: bool
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    steady_tokens_per_s: float | None
    utilisation: float | None
    """The steady window's busy fraction of the instances."""
    duration_s: float


@dataclass(frozen=True)
class Plan:
    """One candidate's answer (an entry of `gpusim plan --json`'s `plans`)."""

    hardware: str
    systems: int
    """Systems to buy: those that serve the peak and the spares."""
    spare: int
    gpus: int
    deployment: str
    system_qps: float
    """The peak rate one system serves at the level (`system_capacity`)."""
    meets_sla: bool
    verified: bool
    """The fleet met the level in simulation and one system fewer did not."""
    fleet: FleetRun | None
    one_fewer: FleetRun | None
    usd_per_month: float | None
    usd_per_million_tokens: float | None
    tokens_per_s_per_mw: float | None
    energy_j_per_token: float | None
    power_kw: float
    years: list[Year]
    """The horizon year by year (`horizon`); one year without growth."""
    usd_over_horizon: float | None


# ---- 1. one system ----------------------------------------------------------------------------------
def traffic_setup(setup: Setup, traffic: Traffic, limits: Limits) -> Setup:
    """`setup` judged by `limits` in Server, serving the traffic's lengths: a trace's as clipped log-normals fitted
    to its median and mean within its range (`fit_lengths.fit_lognormal`)."""
    setup = with_workload(setup, "server", limits)
    if traffic.trace is None:
        return setup
    lengths = {name: _fitted(np.asarray(values), traffic.label) for name, values in
               (("input_tokens", traffic.trace.input_tokens), ("output_tokens", traffic.trace.output_tokens))}
    return make_setup(setup.hardware, setup.bench.model_copy(update=lengths), setup.model, setup.deployment,
                      "command line", setup.timing)


def _fitted(values: np.ndarray, source: str) -> LengthDistribution:
    lo, hi, median, mean = int(values.min()), int(values.max()), float(np.median(values)), float(values.mean())
    if not lo < median < hi:
        return LengthDistribution(kind="constant", value=round(mean), min=lo, max=max(hi, lo), source=source,
                                  grade="B")
    mu, sigma = fit_lognormal(median, mean, lo, hi)
    return LengthDistribution(kind="lognormal", mu=mu, sigma=sigma, min=lo, max=hi, source=source, grade="B",
                              fitted_to={"median": median, "mean": mean})


def highest_meeting_qps(setup: Setup, limits: Limits, seed: int = 0) -> float:
    """The highest Poisson rate (QPS) at which `setup`'s steady run meets `limits`, bisected to `BISECT_RATIO`
    from the analytic capacity within the TPOT limit; 0 when even a twentieth of it misses."""
    pts = analytic_points(setup, limits, seed)
    if not len(pts):
        return 0.0
    lo, hi, q = 0.0, math.inf, 0.8 * float(pts["qps"].max())
    for _ in range(MAX_BISECT_RUNS):
        if meets_limits(steady_run(PointJob(setup, "server", round(q, 4), first_duration(setup, q, seed), seed)),
                        limits):
            lo = q
        else:
            hi = q
        if hi < math.inf and ((lo and hi / lo <= BISECT_RATIO) or hi < 0.05 * float(pts["qps"].max())):
            break
        q = 1.25 * q if hi == math.inf else (lo + hi) / 2 if lo else q / 2
    return lo


def system_capacity(bases: list[Setup], limits: Limits, keep: int = 3, seed: int = 0, workers: int = 1,
                    log: Log = lambda _: None, scheduler: str | None = None) -> list[tuple[Setup, float]]:
    """For each of `bases`, the deployment of one system of its hardware that serves the most QPS at `limits`,
    and that QPS (0 where the screen finds no deployment whose analytic TPOT meets the limit). Every screened
    deployment of every candidate is bisected at once, over `workers` processes or the Dask cluster at
    `scheduler`."""
    screened = []
    for base in bases:
        try:
            screened.append(screen(base, "server", limits, keep, seed, log, rank="capacity"))
        except InputError:
            screened.append([])
    jobs = [(s, limits, seed) for setups in screened for s in setups]
    rates = iter(parallel_map(_meeting_job, jobs, workers, scheduler))
    out = []
    for base, setups in zip(bases, screened, strict=True):
        found = [(s, next(rates)) for s in setups]
        for s, q in found:
            log(f"  {base.hardware.id} {s.deployment.name}: {q:,.1f} QPS at {limits.text()}")
        out.append(max(found, key=lambda f: f[1], default=(base, 0.0)))
    return out


def _meeting_job(job: tuple[Setup, Limits, int]) -> float:
    return highest_meeting_qps(*job)


# ---- 2-3. the fleet ---------------------------------------------------------------------------------
def fleet_setup(setup: Setup, systems: int) -> Setup:
    """`setup`'s deployment on `systems` systems of its hardware: aggregated instances fill them all, a
    disaggregated deployment gets its prefill instances per system on each."""
    hw = setup.hardware.model_copy(update={"systems": systems})
    dep = setup.deployment
    if isinstance(dep, Deployment):
        dep = dep.model_copy(update={"instances": None})
    else:
        per_system = max(1, (dep.prefill.instances or 1) // max(1, setup.hardware.systems))
        dep = dep.model_copy(update={"prefill": dep.prefill.model_copy(update={"instances": per_system * systems})})
    return make_setup(hw, setup.bench, setup.model, dep, "command line", setup.timing)


def fleet_run(setup: Setup, traffic: Traffic, limits: Limits, seed: int = 0) -> FleetRun:
    """`setup` (a fleet) serving `traffic` at its peak rate, run until its batch turned over (cached on disk)."""
    duration = first_duration(setup, traffic.qps, seed)
    key = setup_key(setup, scenario="server", qps=traffic.qps, trace=_trace_key(traffic), seed=seed,
                    duration_s=duration, plan=1)
    path = cache_dir() / "plan" / f"{key}.json"
    if path.exists():
        return FleetRun(**json.loads(path.read_text()))
    while True:
        spec = RunSpec(hardware=setup.hardware.system.id, systems=setup.hardware.systems, benchmark=setup.bench.id,
                       scenario="server", qps=traffic.qps, deployment=setup.deployment, duration_s=duration, seed=seed)
        workload = traffic.workload(duration) or build_workload(spec, setup.bench, lambda: traffic.qps)
        s = run_workload(setup, spec, workload).summary
        if is_steady(s) or s.get("overloaded") or duration >= MAX_RUN_S:
            break
        duration = min(MAX_RUN_S, 2 * duration)
    run = FleetRun(setup.hardware.systems, meets_limits(s, limits), s.get("ttft_p99_s"), s.get("tpot_p99_s"),
                   s.get("steady_output_tokens_per_s"), s.get("steady_busy_fraction"), duration)
    write_atomic(path, json.dumps(asdict(run)))
    return run


def _trace_key(traffic: Traffic) -> str | None:
    if traffic.trace is None:
        return None
    t = traffic.trace
    return f"{t.name}:{len(t)}:{float(t.arrival_s[-1]):.6f}:{int(t.input_tokens.sum())}:{int(t.output_tokens.sum())}"


def verify(setup: Setup, systems: int, traffic: Traffic, limits: Limits, seed: int = 0,
           log: Log = lambda _: None) -> tuple[int, FleetRun, FleetRun | None, bool]:
    """(systems, the fleet's run, the run with one fewer, verified): the smallest fleet around `systems` that meets
    the level in simulation while one system fewer does not (module docstring, 3)."""
    runs: dict[int, FleetRun] = {}

    def run(n: int) -> FleetRun:
        if n not in runs:
            runs[n] = fleet_run(fleet_setup(setup, n), traffic, limits, seed)
            r = runs[n]
            log(f"  {setup.hardware.id} x{n}: {'meets' if r.meets_limits else 'misses'} {limits.text()} "
                f"(p99 TTFT {ms_text(r.ttft_p99_s)}, TPOT {ms_text(r.tpot_p99_s)})")
        return runs[n]

    n = systems
    for _ in range(MAX_REFITS):
        if not run(n).meets_limits:
            n += 1
        elif n > 1 and run(n - 1).meets_limits:
            n -= 1
        else:
            break
    fewer = runs.get(n - 1) if n > 1 else None
    verified = run(n).meets_limits and (fewer is None or not fewer.meets_limits)
    return n, run(n), fewer, verified


# ---- 4. cost ----------------------------------------------------------------------------------------
def fleet_cost(hardware_of: Setup, serving: int, spare: int, run: FleetRun, costs: Mapping | None = None
               ) -> dict[str, float | None]:
    """Per month: the price of `serving + spare` systems amortised, and the facility energy of the serving ones at
    the run's utilisation and of the spares idle; per million tokens at the run's steady rate all month; tokens/s
    per MW and J per token at the facility."""
    one = hardware_of.hardware.model_copy(update={"systems": 1})
    prices = Prices.of(one, costs)
    used = hardware_of.num_gpus // max(1, hardware_of.hardware.systems)  # GPUs in instances per system
    util = run.utilisation if run.utilisation is not None else 1.0
    power_w = serving * facility_power_w(one, used, util, prices) + spare * facility_power_w(one, 0, 0.0, prices)
    energy_usd = power_w / 1e3 * HOURS_PER_MONTH * prices.value("usd_per_kwh")
    capex_usd = (None if prices.capex_usd is None
                 else (serving + spare) * prices.capex_usd / (12 * prices.value("amortisation_years")))
    month = None if capex_usd is None else capex_usd + energy_usd
    tps = run.steady_tokens_per_s or 0.0
    tokens_per_month = tps * HOURS_PER_MONTH * 3600
    return {"usd_per_month": month, "power_kw": power_w / 1e3,
            "usd_per_million_tokens": month / tokens_per_month * 1e6 if month is not None and tps else None,
            "tokens_per_s_per_mw": tps / (power_w / 1e6) if power_w else None,
            "energy_j_per_token": power_w / tps if tps else None}


def horizon(fleet: Setup, spare: int, run: FleetRun, qps: float, growth: Growth, costs: Mapping | None = None
            ) -> list[Year]:
    """Each year's fleet and monthly cost as the peak grows from `qps` (module docstring, 5): the verified `run` of
    `fleet` scaled with the peak, the tokens served and each system's load with it."""
    years = []
    for y, peak in enumerate(growth.peaks(qps)):
        load = peak / qps
        serving = max(1, math.ceil(run.systems * load - 1e-9))
        util = None if run.utilisation is None else min(1.0, run.utilisation * load * run.systems / serving)
        tokens = None if run.steady_tokens_per_s is None else run.steady_tokens_per_s * load
        scaled = replace(run, systems=serving, utilisation=util, steady_tokens_per_s=tokens)
        month = fleet_cost(fleet, serving, spare, scaled, costs)["usd_per_month"]
        years.append(Year(y + 1, peak, serving + spare, month))
    return years


# ---- the plan ---------------------------------------------------------------------------------------
def plan(bases: list[Setup], traffic: Traffic, limits: Limits, spare: int = 0, costs: Mapping | None = None,
         keep: int = 3, seed: int = 0, workers: int = 1, log: Log = lambda _: None, growth: Growth = Growth(),
         scheduler: str | None = None) -> list[Plan]:
    """Every candidate's plan, cheapest first among those that meet the level (module docstring); the capacity
    runs of all candidates at once, on `scheduler`'s Dask cluster if given."""
    if not traffic.qps > 0:
        raise InputError("command line", "qps", f"must be > 0, got {traffic.qps}")
    if spare < 0:
        raise InputError("command line", "spare", f"must be >= 0, got {spare}")
    if not growth.factor > 0 or growth.years < 1:
        raise InputError("command line", "growth", f"must be a factor > 0 over >= 1 year, got {growth}")
    out = []
    setups = [traffic_setup(base, traffic, limits) for base in bases]
    for base, (best, q1) in zip(bases, system_capacity(setups, limits, keep, seed, workers, log, scheduler),
                                strict=True):
        if q1 <= 0:
            log(f"{base.hardware.id}: no deployment meets {limits.text()}")
            out.append(Plan(base.hardware.id, 0, spare, 0, "none", 0.0, False, False, None, None,
                            None, None, None, None, 0.0, [], None))
            continue
        n, run, fewer, verified = verify(best, math.ceil(traffic.qps / q1), traffic, limits, seed, log)
        fleet = fleet_setup(best, n)
        cost = fleet_cost(fleet, n, spare, run, costs)
        years = horizon(fleet, spare, run, traffic.qps, growth, costs)
        months = [y.usd_per_month for y in years]
        total = None if None in months else 12 * sum(m for m in months if m is not None)
        out.append(Plan(base.hardware.id, n + spare, spare, (n + spare) * base.hardware.system.gpus,
                        best.deployment.name, q1, run.meets_limits, verified, run, fewer, cost["usd_per_month"],
                        cost["usd_per_million_tokens"], cost["tokens_per_s_per_mw"], cost["energy_j_per_token"],
                        cost["power_kw"], years, total))
    if not any(p.meets_sla for p in out):
        raise InputError("command line", "limits", f"no candidate meets {limits.text()} at {traffic.qps:g} QPS ("
                         + ", ".join(p.hardware for p in out) + "); valid: looser limits or other hardware")
    return sorted(out, key=lambda p: (not p.meets_sla, p.usd_per_month if p.usd_per_month is not None else math.inf))


__all__ = ["FleetRun", "Growth", "Plan", "Traffic", "Year", "fleet_cost", "fleet_run", "fleet_setup",
           "highest_meeting_qps", "horizon", "plan", "system_capacity", "traffic_setup", "verify"]
