"""What an MLPerf submitter would report: the peak valid Server QPS, and the best deployment.

Peak QPS (`peak_qps`) is searched at full length only (the benchmark's 600 s, a submission's 2400 s, or
`--duration`): short runs are lenient by a third and more where long outputs fill the KV cache slowly
(DeepSeek-R1), so they can neither place nor rank a peak. Every search run stops once it can only be INVALID
(`gpusim.simulation.InvalidStop`), so an overloaded run is cheap and the VALID ones are the cost. A capacity
probe (`probe_capacity`) runs the deployment above the cost model's steady-state estimate (`latency_bound_qps`,
the rate at the largest batch whose estimated TPOT meets the limit) and reads the rate it served; the walk
(`walk_to_flip`) then ends on a VALID rate whose neighbour up the 1% grid is INVALID, so a search from any
start (a fresh probe, a cached or shipped peak) ends on the same rate.

Deployment search (`search_deployments`): `candidate_deployments` lists every layout (TP, PP, EP,
attention DP, weights precision, batch and token budgets; instances fill the hardware) that fits in
memory; an analytic screen (`expected_qps`, microseconds each) ranks them; the best budget variant of
each of the top `screen` layouts within `SCREEN_KEEP` of the best estimate is probed, and the best `finalists`
whose probes expect a peak within `RANK_BAND` of the best expectation walk to their flips, their probes' runs
reused; the one serving the most tokens/s at its full-length peak wins.
Offline has no rate to search: each contender runs LoadGen's minimum (600 s), the best `finalists` the full
duration, and the highest tokens/s wins. The deployment the search starts from (the default, or
`--deployment`) is always simulated too, so the search never returns a worse one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial

from gpusim.build import Setup
from gpusim.deploy import check_deployment, roles
from gpusim.errors import InputError
from gpusim.items import is_item
from gpusim.loadgen import rules
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.result import reported_tokens_per_s
from gpusim.parallel import parallel_map
from gpusim.perf.capacity import Lengths, instance_rate
from gpusim.perf.memory import plan_memory
from gpusim.simulation import Result, run_setup
from gpusim.specs.benchmark import BenchmarkSpec
from gpusim.specs.deployment import MTP, AnyDeployment, Deployment, DisaggregatedDeployment, Parallelism
from gpusim.specs.experiment import RunSpec
from gpusim.specs.hardware import Hardware
from gpusim.specs.model import ModelSpec
from gpusim.specs.software import load_software

Log = Callable[[str], None]
GROWTH = 1.25
"""A capacity probe's first run is this far above the analytic estimate (which is usually within 25%)."""
WALK_DOWN = 0.9
"""Where no served rate says how far down the flip is, full runs step down by this factor (an INVALID run that
kept up with its arrivals: a latency limit binds before capacity)."""
TPOT_MARGIN = 0.8
"""The analytic screen keeps the estimated mean TPOT under this share of the p99 limit."""


def _quiet(_: str) -> None:
    pass


# ---- one judged run -----------------------------------------------------------------------------
@dataclass
class Trial:
    """One simulated run and the LoadGen rules applied to it."""

    qps: float | None
    result: Result
    checks: rules.Checks

    @property
    def valid(self) -> bool:
        return self.checks.valid

    @property
    def tokens_per_s(self) -> float:
        """The result LoadGen would report: (completed) tokens per second (`loadgen_rates`, over the whole run);
        Server-like, in expectation over the last-scheduled query's draw (`metrics.expected_completed_rate`)."""
        return reported_tokens_per_s(self.result.summary)


def trial(setup: Setup, scenario: str, qps: float | None = None, duration_s: float | None = None,
          seed: int = 0, samples: int | None = None, stop_when_invalid: bool = False) -> Trial:
    """Simulate one run and judge it; `duration_s` (default: the benchmark's 600 s) is also the min duration.

    Offline without `samples` issues LoadGen's count for that min duration. `stop_when_invalid` (a search
    that needs the verdict alone) ends a Server-like run once it can only be INVALID (`InvalidStop`).
    """
    bench, min_duration = setup.bench, duration_s or setup.bench.min_duration_s
    hw = setup.hardware
    spec = RunSpec(hardware=hw.system.id, systems=hw.systems, oversubscription=hw.oversubscription,
                   benchmark=bench.id, model=setup.model.id, scenario=scenario, qps=qps,
                   deployment=setup.deployment, duration_s=duration_s, samples=samples, seed=seed)
    result = run_setup(setup, spec, lambda: expected_qps(setup, scenario, seed), stop_when_invalid)
    queries = result.summary["issued_requests"]
    checks = rules.check(result.requests, bench, scenario, queries, min_duration)
    if (result.summary["run_length"] or {}).get("skipped_requests"):  # judged as the whole run (run_length.py)
        checks = replace(checks, duration_s=result.summary["simulated_s"])
    if (stop := result.summary["stopped"]) is not None:
        checks = rules.stopped(checks, stop["overlatency"], queries, stop["last_arrival_s"], stop["at_s"])
    result.summary.update(valid=checks.valid, invalid_reason=checks.reason)
    return Trial(qps, result, checks)


def searchable(setup: Setup, scenario: str) -> bool:
    """Whether the deployment search covers this question: token-generation models in Offline, Server or
    Interactive (item models and SingleStream run their rule deployment, `gpusim.items`)."""
    return scenario in ("offline", *rules.SERVER_LIKE) and not is_item(setup.model)


# ---- analytic estimate --------------------------------------------------------------------------
def expected_qps(setup: Setup, scenario: str, seed: int = 0) -> float:
    """The cost model's steady-state QPS; for Server/Interactive, `latency_bound_qps`."""
    if scenario in rules.SERVER_LIKE:
        return latency_bound_qps(setup, scenario, seed)
    return setup.expected_qps(seed)


@dataclass(frozen=True)
class DecodeCurve:
    """The cost model's steady state of a setup at `b` sequences per decoding instance (`__call__`): the QPS
    it sustains and the mean TPOT its requests see, from `instance_rate`'s decode plus prefill share (the time an
    instance spends per request times b / mean output); the other pools (prefill) cap the QPS."""

    setup: Setup
    lengths: Lengths
    others_qps: float
    max_batch: int
    """The largest batch the decoding pool runs: its batch limit, or the KV cache at the mean lengths."""

    def __call__(self, b: int) -> tuple[float, float]:
        """(QPS, mean TPOT in seconds) at `b` sequences per decoding instance."""
        pool = self.setup.pools[-1]
        dep = pool.deployment.model_copy(update={"max_batch_size": b})
        per_instance = instance_rate(pool.role, pool.cost, pool.kv_capacity_tokens, dep, self.lengths)
        tpot = min(b, self.max_batch) / (per_instance * self.lengths.osl)
        return min(per_instance * pool.count, self.others_qps), tpot


def decode_curve(setup: Setup, seed: int = 0) -> DecodeCurve:
    """`setup`'s `DecodeCurve` at the benchmark's lengths."""
    lengths = setup.lengths(seed)
    *others, pool = setup.pools  # the pool that decodes (aggregated or decode) sets the TPOT
    others_qps = min((p.count * instance_rate(p.role, p.cost, p.kv_capacity_tokens, p.deployment, lengths)
                      for p in others), default=float("inf"))
    return DecodeCurve(setup, lengths, others_qps,
                       min(pool.deployment.max_batch_size, lengths.kv_batch(pool.kv_capacity_tokens)))


def latency_bound_qps(setup: Setup, scenario: str, seed: int = 0) -> float:
    """Steady-state QPS at the largest batch whose estimated mean TPOT (`DecodeCurve`) is ≤ TPOT_MARGIN × the
    p99 limit; 0 when even one sequence misses the limit."""
    curve = decode_curve(setup, seed)
    target = TPOT_MARGIN * setup.bench.limits(scenario).tpot_s
    lo, hi = 0, curve.max_batch
    while lo < hi:  # largest b in [1, hi] meeting the target (0 if none)
        mid = (lo + hi + 1) // 2
        if curve(mid)[1] <= target:
            lo = mid
        else:
            hi = mid - 1
    return curve(lo)[0] if lo else 0.0


# ---- peak QPS -----------------------------------------------------------------------------------
@dataclass
class PeakSearch:
    """Where the verdict flips: the highest VALID rate and the lowest INVALID one above it, and every rate tried."""

    peak: float
    """Highest VALID rate (0 if none was found)."""
    lowest_invalid: float
    tried: list[tuple[float, bool]] = field(default_factory=list)


def _crossing(klo: int, khi: int, rate: Callable[[int], float], margin: Callable[[float], float | None]
              ) -> int | None:
    """The grid index strictly inside (klo, khi) where the margins of the two ends, interpolated
    linearly in log rate, cross zero; None when the ends' margins do not bracket zero (early stopping or a
    minimum the margin does not measure decided a verdict, or an end was never run)."""
    if khi - klo < 2:
        return None
    m_lo, m_hi = margin(rate(klo)), margin(rate(khi))
    if m_lo is None or m_hi is None or not m_lo < 0 < m_hi:
        return None
    x = klo + (khi - klo) * (-m_lo) / (m_hi - m_lo)
    return min(khi - 1, max(klo + 1, round(x)))


def _extrapolated(known: dict[int, bool], lo: int, hi: int, rate: Callable[[int], float],
                  margin: Callable[[float], float | None]) -> int | None:
    """The grid index inside (lo, hi) just under where the secant through the margins of the two highest VALID
    rates (`lo` and the one below it) reaches zero, at most `NEAR_STEPS` up; None without two VALID margins
    rising towards the limit, or where the secant meets it only at or past the INVALID end `hi`.
    A run's p99 latency grows convexly with the rate near the flip (B200 DeepSeek-R1 Server TP8/EP8: margins
    -0.19, -0.10, -0.02 at 14.25, 14.68, 14.98 QPS, INVALID at 15.13), so the secant reaches zero at or beyond
    the crossing and the grid point under it is the flip's VALID side or just below it."""
    below = max((i for i, ok in known.items() if ok and i < lo), default=None)
    if below is None or hi - lo < 2:
        return None
    m_lo, m_below = margin(rate(lo)), margin(rate(below))
    if m_lo is None or m_below is None or not m_below < m_lo < 0:
        return None
    x = lo + (-m_lo) * (lo - below) / (m_lo - m_below)
    if x >= hi:  # the secant passes the INVALID end: the margins are too flat to place the limit
        return None
    return min(hi - 1, lo + NEAR_STEPS, max(lo + 1, math.floor(x + 1e-9)))


CAPACITY_SLACK = 0.02
"""An overloaded full run's served rate (`served_qps`) reads up to ~1% under what a run just below capacity
sustains (B200 Llama 2 70B Server: 326.4-326.8 QPS served at 330.6-351 offered, 327.4 VALID, 330.6 INVALID):
the full-length walk goes down to this far above it (`walk_to_flip`)."""


def served_qps(t: Trial) -> float | None:
    """The request rate an overloaded run sustained in its steady window (steady output tokens/s over the mean
    output of its requests); None when it was not overloaded (it kept up with its arrivals)."""
    s, stop = t.result.summary, t.result.summary["stopped"]
    if stop is not None:  # a stopped run: its completions are the early, short ones; the engine's own count
        rate, mean_osl = stop["served_tokens_per_s"], stop["mean_output_tokens"]
    else:
        rate, mean_osl = s.get("steady_output_tokens_per_s"), t.result.requests["output_tokens"].mean()
    if not rate or not mean_osl or t.qps is None:
        return None
    served = rate / mean_osl
    return served if served < t.qps else None


def _served_below(run: Callable[[float], Trial | None], q: float) -> float | None:
    """For an INVALID rate `q` (its trial `run(q)`): the rate that run served plus `CAPACITY_SLACK` (the flip lies
    below it), if it was overloaded."""
    t = run(q)
    served = served_qps(t) if t is not None else None
    return None if served is None else served * (1 + CAPACITY_SLACK)


def _stopped(run: Callable[[float], Trial | None], q: float) -> bool:
    """Whether the run at `q` was stopped once doomed (`InvalidStop`): runs just above it are cheap too."""
    t = run(q)
    return t is not None and t.result.summary["stopped"] is not None


@dataclass
class PeakResult:
    """A peak-QPS search for one deployment: the confirming trial and the bracket."""

    setup: Setup
    trial: Trial
    """The full-duration run at the peak (a ranking probe's, `confirmed` False: its run nearest the peak it expects)."""
    search: PeakSearch
    limit: str | None
    """Why the next rate up fails (the reason of the lowest INVALID run)."""
    confirmed: bool
    runs: int


@dataclass
class FullRuns:
    """One deployment's full-length runs at the rates a search asks for: each rate run once, stopped once it
    can only be INVALID (`InvalidStop`)."""

    setup: Setup
    scenario: str
    duration_s: float
    seed: int = 0
    log: Log = _quiet
    trials: dict[float, Trial] = field(default_factory=dict)

    def __call__(self, q: float) -> Trial:
        if (t := self.trials.get(q)) is None:
            t = self.trials[q] = trial(self.setup, self.scenario, q, self.duration_s, self.seed, stop_when_invalid=True)
            self.log(_run_line(self.setup, q, self.duration_s, t.valid, t.checks.reason))
        return t

    def margin(self, q: float) -> float | None:
        """The run at `q`'s signed distance from its latency limit; None for a stopped run (its percentiles are of
        its early completions) or a rate not run."""
        t = self.trials.get(q)
        return None if t is None or t.checks.stopped_s is not None else t.checks.latency_margin

    def result(self, search: PeakSearch, confirmed: bool = True) -> PeakResult:
        """The search's outcome: the run at its peak (else at its lowest INVALID rate), why the next rate up fails."""
        at = self.trials.get(search.peak) or self.trials[search.lowest_invalid]
        above = self.trials.get(search.lowest_invalid)
        return PeakResult(self.setup, at, search, above.checks.reason if above else None,
                          confirmed and search.peak > 0, len(self.trials))


PROBE_RUNS = 3
"""Most INVALID runs a capacity probe (`probe_capacity`) takes before it settles for what it knows."""


def probe_capacity(estimate: float, runs: Callable[[float], Trial], grid: float) -> float:
    """Where a deployment's full-length peak is expected, from full-length runs stopped once doomed
    (`InvalidStop`): the first at `GROWTH` × the analytic `estimate`, above the peak on purpose, as an
    overloaded run is cheap and says what the deployment serves (`served_qps`, plus `CAPACITY_SLACK`). A VALID
    run doubles the next one (as LoadGen does); an INVALID one that kept up with its arrivals (a latency limit
    bound before capacity) moves it down by `WALK_DOWN`, at most `PROBE_RUNS` times. Returns the expected peak
    on the `grid`; `runs(q)` runs one rate."""
    ratio = math.log(grid)

    def snap(q: float) -> float:
        return math.exp(round(math.log(max(q, 1e-3)) / ratio) * ratio)

    q, valid, down = snap(GROWTH * (estimate or 1.0)), None, 0
    while down < PROBE_RUNS:
        t = runs(q)
        if t.valid:
            valid = q
        else:
            down += 1
            if (served := served_qps(t)) is not None:
                return snap(max(served * (1 + CAPACITY_SLACK), valid or 0.0))
        if valid is not None and down:
            break  # the flip lies between them
        q = snap(q * (2.0 if t.valid else WALK_DOWN))
    return valid if valid is not None else q


def peak_qps(setup: Setup, scenario: str, duration_s: float | None = None, seed: int = 0, rel_tol: float = 0.01,
             start: float | None = None, log: Log = _quiet, hint: float | None = None,
             known: dict[float, Trial] | None = None) -> PeakResult:
    """The highest Poisson QPS whose full-length run is VALID, on the geometric grid (1 + `rel_tol`)^k.

    Without a `hint` (a peak found before on the same grid: a shipped searched default's, a ranking probe's) a
    capacity probe (`probe_capacity`, from `start` or the analytic estimate) says where to look. `walk_to_flip`
    then ends on a VALID rate whose neighbour up is INVALID, both run at full length, so any start finds the
    same peak; every run stops once it can only be INVALID, so the VALID runs are the cost. `known` trials (a
    ranking probe's, at this length) are not run again."""
    runs = FullRuns(setup, scenario, duration_s or setup.bench.min_duration_s, seed, log, dict(known or {}))
    step = 1 + rel_tol
    if hint is None:
        hint = probe_capacity(start if start is not None else expected_qps(setup, scenario, seed), runs, step)
    search = walk_to_flip(hint, lambda q: runs(q).valid, step, seen={q: t.valid for q, t in runs.trials.items()},
                          below=partial(_served_below, runs.trials.get), cheap=partial(_stopped, runs.trials.get),
                          margin=runs.margin)
    return runs.result(search)


HINT_GROWTH = 1.05
"""A full-length walk that finds only VALID rates moves up in steps of this factor."""
NEAR_STEPS = 8
"""A bracket at most this many grid steps wide, whose INVALID end was stopped and whose served rate lies under its
VALID end, is halved: B200 DeepSeek-R1 Server TP8/EP8 climbed six VALID runs from 14.25 to its flip at 14.98 QPS
under a stopped 15.13. A wider one (an INVALID end far up, from a probe) is climbed, one step and then along the
VALID margins' secant (`_extrapolated`), as a run halfway up would be INVALID near the flip, where stopping saves
little."""


def walk_to_flip(first: float, valid: Callable[[float], bool], grid: float, *,
                 seen: dict[float, bool] | None = None, below: Callable[[float], float | None] | None = None,
                 cheap: Callable[[float], bool] | None = None,
                 margin: Callable[[float], float | None] | None = None) -> PeakSearch:
    """The adjacent pair of grid rates where the verdict flips (VALID, then INVALID one step up), each rate judged
    once, starting at `first` (and the verdicts already `seen`): while only VALID rates are known, up in
    `HINT_GROWTH` steps; while only INVALID ones, down to `below(q)` of the lowest (the capacity an overloaded
    run served, under which the flip lies) or else in `WALK_DOWN` steps (one step from the start). Inside a
    bracket whose INVALID end was `cheap` (stopped as soon as it was doomed, `InvalidStop`: a VALID run is the
    expensive one) and overloaded it goes to just above what that run served; otherwise to where the `margin`s
    of its ends cross, or where the secant of the two highest VALID margins meets the limit (`_extrapolated`);
    failing both, a cheap end's bracket is halved if at most `NEAR_STEPS` wide or climbed, any other halved.
    A right `first` costs two runs."""
    ratio = math.log(grid)
    known = {round(math.log(q) / ratio): ok for q, ok in (seen or {}).items()}
    tried: list[tuple[float, bool]] = []

    def rate(k: int) -> float:
        return math.exp(k * ratio)

    def under(k: int) -> int | None:  # the grid point at or above the rate `below` names for INVALID k
        q = below(rate(k)) if below is not None else None
        return None if q is None else math.ceil(math.log(q) / ratio - 1e-9)

    up, walk = (max(1, round(f / ratio)) for f in (math.log(HINT_GROWTH), -math.log(WALK_DOWN)))
    k = round(math.log(first) / ratio)
    while True:
        if k not in known:
            known[k] = valid(rate(k))
            tried.append((rate(k), known[k]))
        lo = max((i for i, ok in known.items() if ok), default=None)
        hi = min((i for i, ok in known.items() if not ok and (lo is None or i > lo)), default=None)
        if lo is not None and hi is not None and hi - lo == 1:
            return PeakSearch(rate(lo), rate(hi), tried)
        first_move = len(known) == 1  # from the start, its neighbour first
        if hi is None:
            k = lo + (1 if first_move else up)
        elif lo is None:
            if rate(hi) < 1e-3:
                return PeakSearch(0.0, rate(hi), tried)
            # without a served rate (INVALID runs that kept up: a latency limit, not capacity) in WALK_DOWN steps
            k = min(hi - 1, u) if (u := under(hi)) is not None else hi - (1 if first_move else walk)
        else:
            x = None if margin is None else _crossing(lo, hi, rate, margin)
            if x is None and margin is not None:
                x = _extrapolated(known, lo, hi, rate, margin)
            u = under(hi) if cheap is not None and cheap(rate(hi)) else None
            if u is not None and u > lo:  # just above what the overloaded end served
                k = min(hi - 1, u)
            elif x is not None:  # where the margins say the limit is met
                k = x
            elif u is not None:  # the served rate is spent: halve a near bracket, climb out of a far one
                k = (lo + hi) // 2 if hi - lo <= NEAR_STEPS else lo + 1
            else:
                k = (lo + hi) // 2


# ---- deployment search --------------------------------------------------------------------------
POW2 = (1, 2, 4, 8, 16, 32, 64)
BATCH_PER_RANK = (64, 256, 1024, 2048)
TOKENS_PER_RANK = (2048, 8192)


def candidate_deployments(hw: Hardware, model: ModelSpec, bench: BenchmarkSpec, scenario: str,
                          gpus: int | None = None, seed: int = 0, software: str = "trtllm") -> Iterator[AnyDeployment]:
    """Every deployment worth trying that fits: the one place to add new dimensions.

    Aggregated: weights fp4 (where the GPU has FP4 tensor cores) and fp8, activations alike, FP8 KV
    cache; TP a power of two within the NVLink domain; PP 1 or 2; MoE: EP = TP or 1, attention DP on or
    off; per attention rank 64/256/1024/2048 sequences (2048 pays where HBM holds their KV, as on Blackwell
    Ultra) and 2048/8192 tokens per step; instances fill the hardware (fewer replicas never raise aggregated
    throughput). Disaggregated (MoE models on NVLink
    domains of 16 GPUs or more): 1, 2 or 4 prefill instances of DEP4 or DEP8 and wide-EP decode
    instances over the rest of each domain. MTP with the model's default acceptance is added to every
    candidate where the benchmark's rules allow it in this scenario. Candidates run `software`; those that
    fail `check_deployment` (a feature the software lacks among its reasons) or `plan_memory` (does not fit)
    are skipped; a batch cap above what the KV cache holds
    is lowered to it (`kv_sized`). `gpus` below the hardware's count is a GPU budget (a published slice of a
    system): aggregated instances that fit in it, as many as fit.
    """
    mtp = _default_mtp(model) if scenario in bench.mtp_allowed_in else None
    lengths = Lengths.of(*dataset_lengths(bench, seed))
    seen: set[str] = set()
    for dep in _layouts(hw, model):
        dep = dep.model_copy(update={"software": software})
        if gpus is not None and gpus < hw.num_gpus:
            if not isinstance(dep, Deployment) or dep.gpus_per_instance > gpus:
                continue
            dep = dep.model_copy(update={"instances": gpus // dep.gpus_per_instance})
        for d in (dep, dep.model_copy(update={"mtp": mtp, "name": dep.name + "-mtp"})) if mtp else (dep,):
            try:
                check_deployment(hw, model, d, d.name)
                d = kv_sized(hw, model, d, lengths)
            except InputError:
                continue
            if d.name not in seen:
                seen.add(d.name)
                yield d


KV_HEADROOM = 0.95
"""A searched batch cap leaves this share of the KV cache's batch (`Lengths.kv_batch`) for the spread of the
contexts in flight. Measured on one instance over 4,800 s of DeepSeek-R1 Offline (steady tokens/s/GPU,
preemptions per request): B200 TP8/EP8 at the full KV batch 5,192: 7,986 / 0.47, at 95% 8,032 / 0.09, b4096
7,759 / 0, b8192 7,668 / 1.54; GB300 9,186: 9,547 / 0.28, 95% 9,573 / 0.10, b8192 9,515 / 0.01; H200 FP8 (2,126
sequences) at twice its KV batch 2,496 / 1.60, at 95% 2,696 / 0.26 (tests/test_thrashing.py)."""


def kv_sized(hw: Hardware, model: ModelSpec, dep: AnyDeployment, lengths: Lengths) -> AnyDeployment:
    """`dep` with the batch cap of each pool that decodes lowered to `KV_HEADROOM` of the sequences its KV
    cache holds at `lengths` (a multiple of its attention ranks), where the cap is above that: the way a
    submitter sizes `max_batch_size` to the KV cache. A larger cap admits sequences the cache cannot hold once
    they grow, and the engine preempts and recomputes them over and over (it thrashes). InputError (from
    `plan_memory`) where a role does not fit."""
    caps = {}
    for role, d in roles(dep):
        kv = plan_memory(hw, model, d).kv_capacity_tokens
        ranks = d.attention_ranks
        cap = max(ranks, int(KV_HEADROOM * lengths.kv_batch(kv)) // ranks * ranks)
        if role != "prefill" and d.max_batch_size > cap:
            caps[role] = cap
    if not caps:
        return dep
    if isinstance(dep, Deployment):
        name = re.sub(r"-b\d+(?=-|$)", f"-b{caps['aggregated']}", dep.name, count=1)
        return dep.model_copy(update={"max_batch_size": caps["aggregated"], "name": name})
    decode = dep.decode.model_copy(update={"max_batch_size": caps["decode"]})
    return dep.model_copy(update={"decode": decode, "name": f"{dep.name}-b{caps['decode']}"})


def _default_mtp(model: ModelSpec) -> MTP | None:
    """The model's own MTP module at its default acceptance, if it has one."""
    if not model.mtp_layers or not model.mtp_acceptance:
        return None
    return MTP(depth=len(model.mtp_acceptance), acceptance=model.mtp_acceptance, source=model.mtp_source or "model")


def _layouts(hw: Hardware, model: ModelSpec) -> Iterator[AnyDeployment]:
    """Aggregated and disaggregated layouts before the fit check (see `candidate_deployments`)."""
    weights = [w for w in ("fp4", "fp8") if hw.supports(w)]
    span = hw.domain_gpus if hw.systems == 1 else hw.num_gpus  # pipeline stages may span systems
    for w in weights:
        for tp in (t for t in POW2 if t <= hw.domain_gpus):
            for pp in (p for p in (1, 2, 4) if tp * p <= span):
                eps = sorted({tp, 1}) if model.moe is not None else [1]
                for ep in (e for e in eps if model.moe is None or e <= model.moe.num_experts):
                    for adp in ([False, True] if model.moe is not None and tp > 1 else [False]):
                        ranks = tp if adp else 1
                        for mb in BATCH_PER_RANK:
                            for mt in TOKENS_PER_RANK:
                                yield Deployment(
                                    name=f"{w}-tp{tp}-pp{pp}-ep{ep}{'-adp' if adp else ''}-b{mb * ranks}-t{mt * ranks}",
                                    weights=w, activations=w, tp=tp, pp=pp, ep=ep, attention_dp=adp,
                                    max_batch_size=mb * ranks, max_num_tokens=mt * ranks)
    if model.moe is None or hw.domain_gpus < 16:
        return
    for w in weights:
        for p in (4, 8):
            for k in (1, 2, 4):
                d = hw.domain_gpus - k * p
                prefill = Parallelism(tp=p, ep=p, attention_dp=True, instances=k * hw.systems,
                                      max_batch_size=64 * p, max_num_tokens=8192 * p)
                decode = Parallelism(tp=d, ep=d, attention_dp=True, max_batch_size=256 * d, max_num_tokens=256 * d)
                yield DisaggregatedDeployment(name=f"{w}-disagg-{k * hw.systems}xdep{p}-dep{d}", weights=w,
                                              activations=w, mode="disaggregated", prefill=prefill, decode=decode)


def balanced(dep: AnyDeployment) -> AnyDeployment | None:
    """`dep` with the attention-DP balance its software offers, where a pool runs attention DP and `dep` sets
    none (NVIDIA's v6 DeepSeek-R1 entries run attention DP with load balancing); None otherwise. It fills
    prefill steps on every rank at once, and holds new requests back to do so: the search runs both."""
    offer = load_software(dep.software).adp_balance
    if offer is None or dep.adp_balance is not None or not any(d.attention_ranks > 1 for _, d in roles(dep)):
        return None
    return dep.model_copy(update={"adp_balance": offer.config(), "name": dep.name + "-balance"})


def layout_key(dep: AnyDeployment) -> tuple:
    """What tells two deployments' layouts apart (not their batch and token budgets): weights, mode, shape, MTP."""
    shape = (dep.tp, dep.pp, dep.ep, dep.attention_dp) if isinstance(dep, Deployment) else (dep.prefill, dep.decode)
    return dep.weights, dep.mode, shape, dep.mtp


@dataclass
class Ranked:
    """One candidate through the search stages."""

    setup: Setup
    estimate_qps: float
    peak: PeakResult | None = None
    probe: dict[float, Trial] = field(default_factory=dict)
    """Server-like: the full-length runs of its capacity probe, by rate."""
    expected_peak: float | None = None
    """Server-like: the peak its probe expects (`probe_capacity`)."""


@dataclass
class SearchResult:
    best: PeakResult
    ranked: list[Ranked]
    """The simulated candidates, best first."""
    screened: int
    """Candidates that fit and went through the analytic screen."""


SCREEN_KEEP = 0.85
"""Layouts the analytic screen puts under this share of the best estimate are not simulated. Measured on the
searched Server defaults: B200 Llama 2 70B 314 QPS estimated against a simulated peak of 324 (B300 367 against 399:
the screen's pure-prefill steps meet the power limit that the engine's mixed steps avoid); GB200 NVL72 DeepSeek-R1
173 against 146 at full length (18% high, so its rivals within 15% are run)."""
RANK_BAND = 0.94
"""Server-like: the best `finalists` whose probe expects a peak within this share of the best expectation are
walked to their flips (in parallel) and ranked on them. A probe places a peak within -8% to +5%: on GB200 NVL72
DeepSeek-R1 Server TP4/EP4 expected 146.2 QPS and held 135.0, TP8/EP8 expected 143.3 and held 146.2."""
SHORT_OFFLINE_S = 600.0
"""Offline contenders are first ranked on runs sized for LoadGen's minimum duration (a quarter of a
submission-length run); the best `finalists` then run the full length they report."""


def shortlist(base: Setup, scenario: str, seed: int = 0, screen: int = 3,
              gpus: int | None = None) -> tuple[list[Ranked], int]:
    """The analytic screen: every candidate that fits, ranked by its steady-state estimate; the best variant
    of each of the top `screen` layouts within `SCREEN_KEEP` of the best estimate, the starting deployment
    unless it thrashes (`Setup.thrashes`: no candidate does, `kv_sized`), and (Offline) their balanced variants."""
    est: list[Ranked] = []
    for dep in candidate_deployments(base.hardware, base.model, base.bench, scenario, gpus, seed,
                                     base.deployment.software):
        s = base.with_deployment(dep, dep.name)
        q = expected_qps(s, scenario, seed)
        if q > 0:
            est.append(Ranked(s, q))
    if not est:
        raise InputError("command line", "search", f"no deployment of {base.model.id} on {base.hardware.id} fits "
                         "and meets the latency limits")
    est.sort(key=lambda r: -r.estimate_qps)
    short, seen = [], set()
    for r in est:
        if r.estimate_qps < SCREEN_KEEP * est[0].estimate_qps:
            break
        if layout_key(r.setup.deployment) not in seen:
            seen.add(layout_key(r.setup.deployment))
            short.append(r)
        if len(short) == screen:
            break
    if _within(base, gpus) and not base.thrashes(seed) and all(r.setup.deployment != base.deployment for r in short):
        short.append(Ranked(base, expected_qps(base, scenario, seed)))  # the starting deployment always competes
    if scenario not in rules.SERVER_LIKE:
        # a submitter tries the attention-DP balance where the software offers it, and keeps what serves more.
        # Only Offline contenders run the full run they report; Server ones are ranked by what an overloaded run
        # served, which does not show what holding requests back costs against the TTFT limit.
        short += [Ranked(r.setup.with_deployment(d, d.name), r.estimate_qps) for r in list(short)
                  if (d := balanced(r.setup.deployment)) is not None]
    return short, len(est)


def search_deployments(base: Setup, scenario: str, duration_s: float | None = None, seed: int = 0,
                       screen: int = 3, finalists: int = 2, rel_tol: float = 0.01, log: Log = _quiet,
                       gpus: int | None = None, workers: int = 1) -> SearchResult:
    """The best deployment for `base`'s hardware and benchmark in `scenario` (see the module docstring),
    on at most `gpus` GPUs (`candidate_deployments`); candidates run with `base`'s software profile,
    `workers` contenders at a time in separate processes."""
    contenders, screened = shortlist(base, scenario, seed, screen, gpus)
    log(f"search: {screened} deployments fit; simulating the top {len(contenders)} (with the given one)")
    full = duration_s or base.bench.min_duration_s
    if scenario in rules.SERVER_LIKE:
        job = partial(_probe, scenario=scenario, full=full, seed=seed, grid=1 + rel_tol)
        probes = parallel_map(job, [(r.setup, r.estimate_qps) for r in contenders], workers)
        for r, (r.expected_peak, r.probe) in zip(contenders, probes, strict=True):
            r.peak = FullRuns(r.setup, scenario, full, seed, trials=r.probe).result(
                PeakSearch(r.expected_peak, min((q for q, t in r.probe.items() if not t.valid), default=0.0)), False)
            _log_probe(log, r, full)
        contenders.sort(key=lambda r: -r.expected_peak)
        near = [r for r in contenders[:finalists] if r.expected_peak >= RANK_BAND * contenders[0].expected_peak]
        job = partial(_walk, scenario=scenario, full=full, seed=seed, rel_tol=rel_tol)
        for r, peak in zip(near, parallel_map(job, [(r.setup, r.expected_peak, r.probe) for r in near], workers),
                           strict=True):
            r.peak = peak
            _log_walk(log, r, full)
        contenders.sort(key=lambda r: (-r.peak.confirmed, -_tokens_per_s(r.peak)))
        _require_valid(contenders[0], base)
        return SearchResult(contenders[0].peak, contenders, screened)
    short = min(full, SHORT_OFFLINE_S)
    stages = [(short, contenders), (full, None)] if short < full else [(full, contenders)]
    for d, group in stages:
        group = group if group is not None else contenders[:finalists]
        job = partial(_offline_trial, scenario=scenario, duration_s=d, seed=seed)
        for r, t in zip(group, parallel_map(job, [r.setup for r in group], workers), strict=True):
            r.peak = PeakResult(r.setup, t, PeakSearch(0.0, 0.0), None, d == full, 1)
            log(f"  {r.setup.deployment.name}: {t.tokens_per_s:,.0f} tokens/s ({d:.0f} s run)")
        contenders.sort(key=lambda r: (-r.peak.confirmed, -_tokens_per_s(r.peak)))
    return SearchResult(contenders[0].peak, contenders, screened)


def confirm_winner(setup: Setup, scenario: str, duration_s: float, seed: int = 0, hint: float | None = None,
                   log: Log = _quiet) -> SearchResult:
    """A search's known winner measured again: its full-length run (Offline), or its peak searched at full
    length from `hint` (`peak_qps`)."""
    if scenario in rules.SERVER_LIKE:
        peak = peak_qps(setup, scenario, duration_s, seed, log=log, hint=hint)
    else:
        peak = PeakResult(setup, _offline_trial(setup, scenario, duration_s, seed), PeakSearch(0.0, 0.0), None,
                          True, 1)
    return SearchResult(peak, [Ranked(setup, expected_qps(setup, scenario, seed), peak)], 0)


def _probe(job: tuple[Setup, float], scenario: str, full: float, seed: int, grid: float
           ) -> tuple[float, dict[float, Trial]]:
    """One contender's capacity probe (process-pool job): the peak it expects, and the runs it took."""
    setup, estimate = job
    runs = FullRuns(setup, scenario, full, seed)
    return probe_capacity(estimate, runs, grid), runs.trials


def _walk(job: tuple[Setup, float, dict[float, Trial]], scenario: str, full: float, seed: int, rel_tol: float
          ) -> PeakResult:
    """One finalist's full-length walk to its flip from the peak its probe expects (process-pool job)."""
    setup, expected, probe = job
    return peak_qps(setup, scenario, full, seed, rel_tol, hint=expected, known=probe)


def _offline_trial(setup: Setup, scenario: str, duration_s: float, seed: int) -> Trial:
    return trial(setup, scenario, None, duration_s, seed)


def _require_valid(win: Ranked, base: Setup) -> None:
    if not win.peak.confirmed:
        raise InputError("command line", "search", f"no simulated deployment of {base.model.id} on "
                         f"{base.hardware.id} is VALID at any QPS")


def _run_line(setup: Setup, q: float, full: float, valid: bool, reason: str | None = None) -> str:
    """One judged rate as the search log shows it."""
    verdict = "VALID" if valid else "INVALID" + (f": {reason}" if reason else "")
    return f"  {setup.deployment.name}: {q:,.2f} QPS, {full:.0f} s → {verdict}"


def _log_probe(log: Log, r: Ranked, full: float) -> None:
    for q, t in r.probe.items():
        log(_run_line(r.setup, q, full, t.valid))
    log(f"  {r.setup.deployment.name}: peak expected near {r.expected_peak:,.2f} QPS")


def _log_walk(log: Log, r: Ranked, full: float) -> None:
    for q, ok in r.peak.search.tried:
        log(_run_line(r.setup, q, full, ok))
    log(f"  {r.setup.deployment.name}: peak {r.peak.search.peak:,.2f} QPS ({len(r.peak.search.tried)} runs after "
        f"its probe), {_tokens_per_s(r.peak):,.0f} tokens/s")


def _within(setup: Setup, gpus: int | None) -> bool:
    """Whether `setup`'s deployment uses at most `gpus` GPUs (None: no budget)."""
    if gpus is None or gpus >= setup.hardware.num_gpus:
        return True
    dep = setup.deployment  # instances None fill the hardware
    return isinstance(dep, Deployment) and dep.instances is not None and dep.instances * dep.gpus_per_instance <= gpus


def _tokens_per_s(p: PeakResult | None) -> float:
    if p is None or (p.search.peak <= 0 and p.trial.qps is not None):
        return 0.0
    return p.trial.tokens_per_s
