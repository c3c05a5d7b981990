"""`gpusim frontier`: the throughput–interactivity frontier of one or more systems on one model (gpusim/frontier.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from gpusim.commands import latency_limits
from gpusim.errors import InputError
from gpusim.loadgen.rules import SERVER_LIKE


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("frontier", help="tokens/s/GPU against tokens/s/user: the points a submitter could run and "
                       "the front of those that meet the latency limits")
    f.add_argument("--hardware", required=True, help="system profile, or several separated by commas "
                   "(e.g. gb200-nvl72,gb300-nvl72,vr-nvl72)")
    f.add_argument("--benchmark", required=True, help="MLPerf benchmark, e.g. deepseek-r1 (its lengths and limits)")
    f.add_argument("--scenario", choices=list(SERVER_LIKE), default="server",
                   help="whose p99 limits a front point must meet, and whether MTP may run (default server)")
    f.add_argument("--ttft-limit", type=float, help="p99 TTFT limit in seconds (default: the scenario's)")
    f.add_argument("--tpot-limit", type=float, help="p99 TPOT limit in seconds (default: the scenario's)")
    f.add_argument("--isl", type=int, help="input tokens of every request (default: the benchmark's lengths)")
    f.add_argument("--osl", type=int, help="output tokens of every request (default: the benchmark's lengths)")
    f.add_argument("--deployments", type=int, default=5, help="deployments simulated per system (default 5)")
    f.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="points simulated at once")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--out", type=Path, help="write frontier.json, points.csv, frontier.png and README.md here")
    f.add_argument("--json", action="store_true", help="print exactly one JSON object")
    f.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    f.set_defaults(func=_cmd_frontier)


def _cmd_frontier(args: argparse.Namespace) -> int:
    from gpusim.analysis.frontier import draw_fronts
    from gpusim.build import prepare
    from gpusim.frontier import frontier, points_frame, with_workload
    from gpusim.specs.benchmark import load_benchmark

    for name in ("isl", "osl", "deployments", "workers"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise InputError("command line", name.replace("_", "-"), f"must be > 0, got {value}")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("command line", "out", f"{args.out} exists and is not a directory")
    bench = load_benchmark(args.benchmark)
    limits = latency_limits(args, bench.id, args.scenario)
    log = (lambda _: None) if args.quiet or args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    bases = [with_workload(prepare(h.strip(), args.benchmark, scenario=args.scenario), args.scenario, limits,
                           args.isl, args.osl) for h in args.hardware.split(",") if h.strip()]
    started = time.perf_counter()
    frame = points_frame(frontier(bases, args.scenario, limits, args.deployments, args.seed, args.workers, log))
    wall = time.perf_counter() - started
    doc = {"benchmark": bench.id, "scenario": args.scenario, "isl": args.isl, "osl": args.osl, "wall_s": wall,
           "workers": args.workers,
           "limits": {"ttft_p99_s": limits.ttft_p99_s, "tpot_p99_s": limits.tpot_p99_s},
           "points": json.loads(frame.to_json(orient="records"))}
    if args.out is not None:
        command = _command(args)
        _write(args.out, doc, frame, draw_fronts(frame, f"{bench.id}: throughput vs interactivity "
                                                 f"({limits.text()})"),
               _markdown(frame, limits.text(), command, wall, args.workers))
    print(json.dumps(doc) if args.json else _table(frame, limits.text()))
    return 0


def _command(args: argparse.Namespace) -> str:
    """The command line that regenerates `args.out` (options left at their defaults omitted)."""
    parts = ["gpusim frontier", f"--hardware {args.hardware}", f"--benchmark {args.benchmark}"]
    given = {"scenario": (args.scenario, "server"), "ttft-limit": (args.ttft_limit, None),
             "tpot-limit": (args.tpot_limit, None), "isl": (args.isl, None), "osl": (args.osl, None),
             "deployments": (args.deployments, 5), "seed": (args.seed, 0)}
    parts += [f"--{k} {v}" for k, (v, default) in given.items() if v != default]
    return " ".join([*parts, f"--out {args.out}"])


def _markdown(frame, limits: str, command: str, wall: float, workers: int) -> str:
    """README.md of an --out folder: the command, the figure and the points, front first."""
    lines = ["# Throughput–interactivity frontier", "", f"Regenerate: `{command}`", "",
             f"{len(frame)} points in {wall:,.0f} s wall with {workers} worker processes (points already in the cache "
             "cost nothing).", "",
             f"Limits: {limits}. Tokens/s/GPU is each run's steady rate (after its batch turned over, before the "
             "drain); tokens/s/user is 1 / median TPOT; Offline is the same deployment's steady Offline rate. Only "
             "points that are steady and meet the limits may stand on the front (docs/frontier.md).", "",
             "![frontier](frontier.png)", "",
             "| hardware | deployment | QPS | tokens/s/GPU | tokens/s/user | TTFT p99 (ms) | TPOT p99 (ms) | "
             "Offline tokens/s/GPU | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for _, p in _ordered(frame).iterrows():
        lines.append(f"| {p.hardware} | {p.deployment} | {p.qps:.1f} | {p.tokens_per_s_per_gpu:,.0f} | "
                     f"{p.tokens_per_s_per_user:.1f} | {p.ttft_p99_s * 1e3:,.0f} | {p.tpot_p99_s * 1e3:.1f} | "
                     f"{p.offline_tokens_per_s_per_gpu:,.0f} | {_verdict(p)} |")
    return "\n".join(lines) + "\n"


def _ordered(frame):
    return frame.sort_values(["hardware", "on_front", "tokens_per_s_per_user"], ascending=[True, False, False])


def _verdict(p) -> str:
    verdict = ("on front" if p.on_front else "meets" if p.meets_limits else "not steady" if not p.steady
               else "misses")
    return verdict + (", above its Offline rate" if p.exceeds_offline else "")


def _table(frame, limits: str) -> str:
    """The points as text, front first per hardware."""
    lines = [f"{'hardware':<13} {'deployment':<40} {'QPS':>7} {'tok/s/GPU':>10} {'tok/s/user':>10} "
             f"{'TTFT p99':>9} {'TPOT p99':>9} {'Offline':>8}  verdict"]
    for _, p in _ordered(frame).iterrows():
        lines.append(f"{p.hardware:<13} {p.deployment:<40} {p.qps:>7.1f} {p.tokens_per_s_per_gpu:>10,.0f} "
                     f"{p.tokens_per_s_per_user:>10.1f} {p.ttft_p99_s * 1e3:>7.0f}ms {p.tpot_p99_s * 1e3:>7.1f}ms "
                     f"{p.offline_tokens_per_s_per_gpu:>8,.0f}  {_verdict(p)}")
    lines.append(f"limits: {limits}; tokens/s/GPU is the steady rate, Offline the deployment's steady Offline rate")
    return "\n".join(lines)


def _write(out: Path, doc: dict, frame, fig, readme: str) -> None:
    """frontier.json, points.csv, frontier.png and README.md, each written whole or not at all."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        t = Path(tmp)
        (t / "frontier.json").write_text(json.dumps(doc, indent=1))
        frame.to_csv(t / "points.csv", index=False)
        fig.savefig(t / "frontier.png", dpi=130)
        (t / "README.md").write_text(readme)
        for name in ("frontier.json", "points.csv", "frontier.png", "README.md"):
            (t / name).replace(out / name)
