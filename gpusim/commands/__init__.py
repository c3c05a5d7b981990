"""Subcommands of `gpusim`: each module defines `register(subparsers)` and the functions it binds."""

from __future__ import annotations

import argparse
from typing import get_args

from gpusim.specs.experiment import Timing

TIMING_HELP = "kernel times: roofline (default) or NVIDIA's measured tables (needs gpusim[calibration])"


def add_timing(parser: argparse.ArgumentParser, default: str | None = "roofline", help: str = TIMING_HELP) -> None:
    """The `--timing` option (RunSpec.timing's choices)."""
    parser.add_argument("--timing", choices=get_args(Timing), default=default, help=help)


def layout_text(dep: dict) -> str:
    """A deployment's parallelism from its dump: `tp8 pp1 ep8 attention-dp`, a disaggregated one's per pool."""
    def one(p: dict) -> str:
        return f"tp{p['tp']} pp{p['pp']} ep{p['ep']}{' attention-dp' if p['attention_dp'] else ''}"

    if dep.get("mode") == "disaggregated":
        return f"prefill {one(dep['prefill'])}, decode {one(dep['decode'])}"
    return one(dep)


def batch_limits(dep: dict) -> dict:
    """The dump that holds a deployment's batch limits: its own, or a disaggregated one's decode pool's."""
    return dep["decode"] if dep.get("mode") == "disaggregated" else dep
