"""`gpusim report DIR [-o FILE]`: one self-contained HTML page of a run's, a sweep's or an mlperf output."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="write one self-contained HTML report of a run, sweep or mlperf --out DIR")
    r.add_argument("dir", type=Path, help="the --out folder of gpusim run, sweep or mlperf")
    r.add_argument("-o", "--out", type=Path, help="HTML file to write (default DIR/report.html)")
    r.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from gpusim.analysis.report import write_report

    print(write_report(args.dir, args.out))
    return 0
