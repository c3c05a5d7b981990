"""Subcommands of `gpusim`: each module defines `register(subparsers)` and the functions it binds."""

from __future__ import annotations

import argparse
from typing import get_args

from gpusim.specs.experiment import Timing

TIMING_HELP = "kernel times: roofline (default) or NVIDIA's measured tables (needs gpusim[calibration])"


def add_timing(parser: argparse.ArgumentParser, default: str | None = "roofline", help: str = TIMING_HELP) -> None:
    """The `--timing` option (RunSpec.timing's choices)."""
    parser.add_argument("--timing", choices=get_args(Timing), default=default, help=help)

