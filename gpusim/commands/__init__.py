"""Subcommands of `gpusim`: each module defines `register(subparsers)` and the functions it binds."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, get_args

from gpusim.errors import InputError
from gpusim.specs.experiment import Timing

if TYPE_CHECKING:
    from gpusim.analysis.frontier import Limits

TIMING_HELP = "kernel times: roofline (default) or NVIDIA's measured tables (needs gpusim[calibration])"


def latency_limits(args: argparse.Namespace, benchmark: str, scenario: str) -> Limits:
    """The p99 limits a command judges by: `--ttft-limit`/`--tpot-limit` (or `--tokens-per-user` as 1 / TPOT; each
    > 0), else the benchmark's own for `scenario`; InputError where the benchmark has none and the flags do not
    give both."""
    from gpusim.analysis.frontier import Limits
    from gpusim.specs.benchmark import load_benchmark

    for name in ("ttft_limit", "tpot_limit", "tokens_per_user"):
        value = getattr(args, name, None)
        if value is not None and not value > 0:
            raise InputError("command line", name.replace("_", "-"), f"must be > 0, got {value}")
    tpot = args.tpot_limit
    per_user = getattr(args, "tokens_per_user", None)
    if per_user is not None:
        if tpot is not None:
            raise InputError("command line", "tokens-per-user", "give --tokens-per-user or --tpot-limit, not both")
        tpot = 1.0 / per_user
    own = load_benchmark(benchmark).limits(scenario)
    if own is None and (args.ttft_limit is None or tpot is None):
        raise InputError("command line", "scenario", f"{benchmark} has no {scenario} latency limits; give "
                         "--ttft-limit and --tpot-limit, or a benchmark with them (gpusim list benchmarks)")
    return Limits(args.ttft_limit or (own.ttft_s if own else math.inf), tpot or (own.tpot_s if own else math.inf))


def add_timing(parser: argparse.ArgumentParser, default: str | None = "roofline", help: str = TIMING_HELP) -> None:
    """The `--timing` option (RunSpec.timing's choices)."""
    parser.add_argument("--timing", choices=get_args(Timing), default=default, help=help)

