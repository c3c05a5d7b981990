"""`gpusim plot KIND RESULTS -o FILE`: a figure from a sweep or a run (gpusim/analysis/plots.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpusim.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a figure from a sweep's results or a run's output (PNG or SVG)")
    p.add_argument("kind", help="scaling | generations | pareto | latency-cdf")
    p.add_argument("results", type=Path, help="DIR/results.parquet of gpusim sweep, or a run's --out DIR (or its "
                   "requests.parquet)")
    p.add_argument("-o", "--out", type=Path, required=True, help="image file, .png or .svg")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="keep only rows where the column has this value (repeatable)")
    p.set_defaults(func=_cmd_plot)


def _cmd_plot(args: argparse.Namespace) -> int:
    from gpusim.analysis.plots import plot

    where = {}
    for item in args.where:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InputError("command line", "where", f"{item!r}: expected COLUMN=VALUE")
        where[key] = value
    print(plot(args.kind, args.results, args.out, where))
    return 0
