"""`gpusim defaults`: show or re-search the shipped default deployments (hardware_profiles/defaults/)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from gpusim.errors import InputError

BENCHMARKS = ("deepseek-r1", "gpt-oss-120b", "llama2-70b")


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("defaults", help="show, or re-search (--write), the default deployment of each system")
    d.add_argument("--hardware", nargs="+", help="systems (default: every shipped system profile)")
    d.add_argument("--benchmark", nargs="+", default=list(BENCHMARKS), help="benchmarks whose models to search")
    d.add_argument("--scenario", nargs="+", default=None, help="scenarios (default: offline server)")
    d.add_argument("--write", action="store_true", help="run the searches and rewrite the files")
    d.add_argument("--duration", dest="duration_s", type=float, default=None,
                   help="min duration of the searched runs (default: as long as submitters run)")
    d.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="contenders simulated at once")
    d.set_defaults(func=_cmd_defaults)


def _cmd_defaults(args: argparse.Namespace) -> int:
    from gpusim.defaults import SCENARIOS, read_defaults
    from gpusim.specs.hardware import system_names

    systems = args.hardware or system_names()
    for s in systems:
        if s not in system_names():
            raise InputError("command line", "hardware", f"unknown system {s!r}; valid: {', '.join(system_names())}")
    scenarios = args.scenario or list(SCENARIOS)
    if args.write:
        for s in systems:
            _write(s, args.benchmark, scenarios, args)
        return 0
    for s in systems:
        table = read_defaults(s)
        if table is None:
            print(f"{s}: no searched defaults (gpusim defaults --write --hardware {s})")
            continue
        for model, by_scenario in table.entries.items():
            for scenario, e in by_scenario.items():
                print(f"{s} {model} {scenario}: {e.deployment.name} ({e.tokens_per_s_per_gpu:,.0f} tokens/s/GPU on "
                      f"{e.searched_gpus} GPUs, {table.software}, {table.date})")
    return 0


def _write(system: str, benchmarks: list[str], scenarios: list[str], args: argparse.Namespace) -> None:
    """Search each benchmark's model in each scenario on one `system` and rewrite its defaults file."""
    from gpusim.build import prepare
    from gpusim.defaults import DefaultEntry, DefaultsFile, read_defaults, slice_gpus, today, write_defaults
    from gpusim.deploy import system_software
    from gpusim.loadgen.rules import SUBMISSION_DURATION_S
    from gpusim.perf.ops import DTYPE_BYTES
    from gpusim.search import search_deployments
    from gpusim.specs.hardware import load_hardware

    duration = args.duration_s or SUBMISSION_DURATION_S
    command = f"gpusim defaults --write --hardware {system}"
    table = read_defaults(system)
    if table is None or table.duration_s != duration:  # the stack the searched rule deployment runs
        table = DefaultsFile(system=system, software=system_software(load_hardware(system)), command=command,
                             date=today(), duration_s=duration)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    for bench in benchmarks:
        for scenario in scenarios:
            try:
                setup = prepare(system, bench, scenario=scenario)
            except InputError as exc:  # no rule deployment fits: the model is too large for one system
                log(f"== {system} {bench} {scenario}: skipped ({exc})")
                continue
            if scenario != "offline" and setup.bench.limits(scenario) is None:
                continue
            weights = setup.model.total_params * DTYPE_BYTES[setup.deployment.weights]
            gpus = slice_gpus(setup.hardware, weights, setup.hardware.hbm_bytes)
            log(f"== {system} {bench} {scenario} on {gpus or setup.hardware.num_gpus} GPUs")
            started = time.perf_counter()
            try:
                found = search_deployments(setup, scenario, duration, gpus=gpus, workers=args.workers, log=log)
            except InputError as exc:
                log(f"   skipped: {exc}")
                continue
            wall = time.perf_counter() - started
            best = found.best
            summary = best.trial.result.summary
            entry = DefaultEntry(deployment=best.setup.deployment,
                                 tokens_per_s_per_gpu=best.trial.tokens_per_s / summary["num_gpus"],
                                 peak_qps=best.search.peak if scenario != "offline" else None,
                                 searched_gpus=summary["num_gpus"], search_wall_s=round(wall, 1),
                                 run_wall_s=round(summary["wall_s"], 1))
            table.entries.setdefault(setup.model.id, {})[scenario] = entry
            table.date, table.command = today(), command
            write_defaults(table)  # after every entry: an interrupted refresh keeps what it found
            log(f"   {entry.deployment.name}: {entry.tokens_per_s_per_gpu:,.0f} tokens/s/GPU")
