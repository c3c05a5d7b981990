"""`gpusim sweep`: run a grid of runs on local processes or a Dask cluster (gpusim/sweep.py)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sweep", help="run a grid of runs from a sweep YAML; resumes where it stopped")
    s.add_argument("experiment", type=Path, help="sweep YAML: run fields plus a `grid` (see gpusim/sweep.py)")
    s.add_argument("--out", type=Path, required=True, help="results.parquet and requests/ go here")
    s.add_argument("--workers", type=int, help="local processes (default: one per CPU; 1 runs in this process)")
    s.add_argument("--scheduler", help="address of an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
    s.add_argument("--retry-failed", action="store_true", help="run again the points recorded as errors")
    s.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from gpusim.sweep import run_sweep

    r = run_sweep(args.experiment, args.out, workers=args.workers, scheduler=args.scheduler,
                  retry_failed=args.retry_failed)
    print(f"{r.points} points: {r.ran} run ({r.failed} failed), {r.skipped} already done; results in {r.results}")
    return 0
