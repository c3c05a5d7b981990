"""`gpusim plan`: how many systems of each candidate serve a traffic at a service level, and at what cost."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from gpusim.commands import latency_limits
from gpusim.errors import InputError
from gpusim.loadgen.rules import ms_text

if TYPE_CHECKING:
    from gpusim.analysis.frontier import Limits
    from gpusim.build import Setup
    from gpusim.plan import Growth, Traffic


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="systems of each candidate that serve a traffic at a service level, verified "
                       "by simulation, with cost per month and per million tokens")
    p.add_argument("--hardware", required=True, help="candidate systems, separated by commas (shipped or by path)")
    p.add_argument("--benchmark", required=True, help="the model and, without --trace, the lengths (deepseek-r1)")
    p.add_argument("--qps", type=float, required=True, help="peak requests per second to serve")
    p.add_argument("--trace", type=Path, help="replay this trace (Azure CSV, Mooncake JSONL, Vidur CSV) at --qps, "
                   "its bursts kept; its lengths replace the benchmark's")
    p.add_argument("--ttft-limit", type=float, help="p99 TTFT in seconds (default: the benchmark's Server limit)")
    p.add_argument("--tpot-limit", type=float, help="p99 TPOT in seconds (default: the benchmark's Server limit)")
    p.add_argument("--tokens-per-user", type=float, help="tokens/s each user sees while generating: a p99 TPOT "
                   "limit of 1 / this (instead of --tpot-limit)")
    p.add_argument("--spare", type=int, default=0, help="systems that may be down with the level still held (N+k)")
    p.add_argument("--costs", type=Path, help="YAML of cost overrides (capex_usd, usd_per_kwh, pue, ...)")
    p.add_argument("--growth", default="1", help="the peak's growth a year, e.g. 2x/year (default: none)")
    p.add_argument("--horizon", default="1y", help="years the plan covers, e.g. 3y (default 1y)")
    p.add_argument("--levels", help="also plan at these tokens/s per user (e.g. 25,50,100; each a p99 TPOT limit of "
                   "1 / it, TTFT as given): the answer per level in --json and the --figure")
    p.add_argument("--figure", type=Path, help="with --levels: draw each candidate's cost per month against the "
                   "level (.png or .svg)")
    p.add_argument("--deployments", type=int, default=3, help="deployments tried per system (default 3)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="deployments simulated at once")
    p.add_argument("--scheduler", help="run the capacity runs on this Dask scheduler (tcp://HOST:PORT; "
                   "pip install 'gpusim[dask]')")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_plan)


def _cmd_plan(args: argparse.Namespace) -> int:
    from gpusim.build import prepare
    from gpusim.loadgen.traces import read_trace
    from gpusim.plan import Growth, Traffic, plan
    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.costs import CostOverrides
    from gpusim.specs.loading import read_yaml, validate

    for name in ("qps", "deployments", "workers"):  # --spare: `plan` checks it
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise InputError("command line", name, f"must be > 0, got {value}")
    bench = load_benchmark(args.benchmark)
    limits = latency_limits(args, bench.id, "server")
    costs = (validate(CostOverrides, read_yaml(args.costs), str(args.costs)).model_dump(exclude_none=True)
             if args.costs is not None else None)
    trace = read_trace(args.trace) if args.trace is not None else None
    traffic = Traffic(args.qps, trace, f"{args.trace} at {args.qps:g} QPS" if trace is not None
                      else f"Poisson arrivals of {bench.id}'s lengths at {args.qps:g} QPS")
    log = (lambda _: None) if args.quiet or args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    bases = [prepare(h.strip(), args.benchmark, scenario="server") for h in args.hardware.split(",") if h.strip()]
    growth = Growth(_number(args.growth, "growth", ("x/year", "x/yr", "x")), int(_number(args.horizon, "horizon",
                                                                                        ("years", "year", "y"))))
    levels = _levels(args)
    started = time.perf_counter()
    plans = plan(bases, traffic, limits, args.spare, costs, args.deployments, args.seed, args.workers, log, growth,
                 args.scheduler)
    doc = {"benchmark": bench.id, "traffic": traffic.label, "qps": args.qps, "spare": args.spare,
           "growth_per_year": growth.factor, "horizon_years": growth.years,
           "limits": {"ttft_p99_s": limits.ttft_p99_s, "tpot_p99_s": limits.tpot_p99_s},
           "plans": [asdict(p) for p in plans]}
    if levels:
        doc["levels"] = [_level(per_user, bases, traffic, limits, args, costs, growth) for per_user in levels]
    doc["wall_s"] = time.perf_counter() - started
    if args.figure is not None:
        _draw(doc["levels"], args.figure)
    print(json.dumps(doc) if args.json else format_plans(doc, limits.text()))
    return 0


def _levels(args: argparse.Namespace) -> list[float]:
    """`--levels` as tokens/s per user (InputError on a bad list, or `--figure` without it)."""
    from gpusim.analysis.plots import FORMATS

    if args.figure is not None and (not args.levels or args.figure.suffix not in FORMATS):
        raise InputError("command line", "figure", f"needs --levels and a {' or '.join(FORMATS)} path, got "
                         f"{args.figure}")
    if not args.levels:
        return []
    try:
        levels = [float(v) for v in args.levels.split(",") if v.strip()]
    except ValueError:
        levels = []
    if not levels or not all(v > 0 for v in levels):
        raise InputError("command line", "levels", f"got {args.levels!r}; valid: tokens/s per user > 0 separated "
                         "by commas, e.g. 25,50,100")
    return sorted(levels)


def _level(per_user: float, bases: list[Setup], traffic: Traffic, limits: Limits, args: argparse.Namespace,
           costs: dict | None, growth: Growth) -> dict:
    """The plan at `per_user` tokens/s per user (a p99 TPOT limit of 1 / it): each candidate's systems, cost and
    verification; no plans where no candidate meets it."""
    from gpusim.analysis.frontier import Limits
    from gpusim.plan import plan

    level = Limits(limits.ttft_p99_s, 1.0 / per_user)
    try:
        plans = plan(bases, traffic, level, args.spare, costs, args.deployments, args.seed, args.workers,
                     growth=growth, scheduler=args.scheduler)
    except InputError:  # no candidate meets this level
        plans = []
    return {"tokens_per_s_per_user": per_user, "tpot_p99_s": level.tpot_p99_s,
            "plans": [{k: getattr(p, k) for k in ("hardware", "systems", "deployment", "meets_sla", "verified",
                                                  "usd_per_month")} for p in plans]}


def _draw(levels: list[dict], path: Path) -> None:
    from gpusim.analysis.plots import plan_levels

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    plan_levels(levels).savefig(tmp, dpi=130)
    tmp.replace(path)


def _number(text: str, field: str, units: tuple[str, ...]) -> float:
    """`text` as a number, one of `units` after it allowed (2x/year, 3y); InputError otherwise."""
    body = text.strip().lower()
    for unit in units:
        if body.endswith(unit):
            body = body[: -len(unit)]
            break
    try:
        value = float(body)
    except ValueError:
        value = math.nan
    if not value > 0 or (field == "horizon" and value != int(value)):
        raise InputError("command line", field, f"got {text!r}; valid: a number > 0 such as "
                         + ("2x/year" if field == "growth" else "3y (whole years)"))
    return value


def format_plans(doc: dict, limits: str) -> str:
    """The plans as a text table, cheapest that meets the level first, and each verification's two runs."""
    lines = [f"plan: {doc['traffic']}, {limits}" + (f", {doc['spare']} spare" if doc["spare"] else ""),
             f"{'hardware':<14} {'systems':>7} {'GPUs':>6} {'QPS/system':>10} {'$/month':>11} {'$/M tok':>8} "
             f"{'tok/s/MW':>10} {'J/tok':>6}  deployment"]
    for p in doc["plans"]:
        lines.append(f"{p['hardware']:<14} {p['systems']:>7} {p['gpus']:>6} {p['system_qps']:>10,.1f} "
                     f"{_money(p['usd_per_month'], 11)} {_num(p['usd_per_million_tokens'], 8, '.3f')} "
                     f"{_num(p['tokens_per_s_per_mw'], 10, ',.0f')} {_num(p['energy_j_per_token'], 6, '.3f')}  "
                     f"{p['deployment']}")
    lines.append("verification (the fleet without spares at the peak rate, and one system fewer):")
    for p in doc["plans"]:
        runs = [r for r in (p["fleet"], p["one_fewer"]) if r]
        said = "; ".join(f"x{r['systems']} {'meets' if r['meets_limits'] else 'misses'} (p99 TTFT "
                         f"{ms_text(r['ttft_p99_s'])}, TPOT {ms_text(r['tpot_p99_s'])})" for r in runs)
        verdict = "verified" if p["verified"] else "NOT verified" if p["meets_sla"] else "does not meet the level"
        lines.append(f"  {p['hardware']:<14} {verdict}: {said or 'no run'}")
    if doc["horizon_years"] > 1:
        lines.append(f"over {doc['horizon_years']} years at {doc['growth_per_year']:g}x a year (each year's fleet the "
                     "verified one scaled with the peak):")
        for p in doc["plans"]:
            if p["years"]:
                said = "; ".join(f"year {y['year']} {y['qps']:,.0f} QPS x{y['systems']} {_money(y['usd_per_month'], 0)}"
                                 f"/month" for y in p["years"])
                lines.append(f"  {p['hardware']:<14} {said}; total {_money(p['usd_over_horizon'], 0)}")
    for level in doc.get("levels", []):
        said = "; ".join(f"{p['hardware']} x{p['systems']} {_money(p['usd_per_month'], 0)}/month" if p["meets_sla"]
                         else f"{p['hardware']} does not meet it" for p in level["plans"]) or "no candidate meets it"
        lines.append(f"at {level['tokens_per_s_per_user']:g} tokens/s per user: {said}")
    lines.append(f"({doc['wall_s']:,.0f} s wall; runs are cached, a repeated plan costs nothing)")
    return "\n".join(lines)


def _money(v: float | None, width: int) -> str:
    return f"{'—':>{width}}" if v is None else f"{'$' + format(v, ',.0f'):>{width}}"


def _num(v: float | None, width: int, fmt: str) -> str:
    return f"{'—':>{width}}" if v is None else f"{format(v, fmt):>{width}}"


