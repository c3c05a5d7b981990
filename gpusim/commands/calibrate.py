"""`gpusim calibrate`: fit a software profile's constants and write them into its YAML (gpusim/calibrate/fit.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpusim.commands import add_timing
from gpusim.errors import InputError
from gpusim.validate.datasets import MLPERF_CSV, silicon_path


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("calibrate", help="fit a software profile's constants (kernel tables, silicon sample)")
    c.add_argument("--profile", default="trtllm", help="software profile to write (hardware_profiles/software/)")
    c.add_argument("--backend", help="silicon/kernel-table backend to fit on (default: the profile id's stem)")
    c.add_argument("--start", help="profile to start from (default: --profile itself)")
    c.add_argument("--silicon", type=Path, help="silicon sample CSV (default: the one aiconfigurator-core ships)")
    c.add_argument("--train-sample", type=int, default=120, help="training rows the engine runs (seeded)")
    c.add_argument("--held-out-sample", type=int, help="held-out rows to validate on (default: all of them)")
    c.add_argument("--max-rows", type=int, default=800, help="kernel-table rows per family and system")
    c.add_argument("--no-ops", action="store_true", help="keep the op-level constants; fit only the overheads")
    c.add_argument("--op-families", nargs="+", default=[], metavar="PREFIX",
                   help="fit only these op families at op level (name prefixes, e.g. moe); keep the others")
    add_timing(c, help="table: fit the overheads the table timing backend uses (profile's table_timing; no op level)")
    c.add_argument("--mlperf", type=Path, default=MLPERF_CSV,
                   help="published MLPerf results: their Offline rows that run with --profile join the fit")
    c.add_argument("--no-mlperf", action="store_true", help="fit on the silicon sample alone")
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--json", action="store_true", help="print the calibration block as JSON")
    c.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace) -> int:
    from gpusim.calibrate import fit
    from gpusim.specs.software import load_software, software_names

    command = "gpusim calibrate " + " ".join(_argv(args))
    start = args.start or args.profile
    if start not in software_names():
        raise InputError("command line", "profile", f"no software profile {start!r} (valid: {software_names()})")
    args.silicon = silicon_path(args.silicon, "--silicon")
    for path, flag in ((args.silicon, "--silicon"), (None if args.no_mlperf else args.mlperf, "--mlperf")):
        if path is not None and not path.is_file():
            raise InputError(str(path), flag, "no such file")
    block = fit.calibrate(args.profile, load_software(start), args.backend or args.profile.split("-")[0],
                          args.silicon, command, train_sample=args.train_sample, held_sample=args.held_out_sample,
                          max_rows=args.max_rows, ops=not args.no_ops, workers=max(1, args.workers),
                          timing=args.timing, op_families=tuple(args.op_families),
                          mlperf=None if args.no_mlperf else args.mlperf)
    return _print(args, block)


def _argv(args: argparse.Namespace) -> list[str]:
    out = []
    for k in ("profile", "backend", "start", "train_sample", "held_out_sample"):
        v = getattr(args, k)
        if v is not None:
            out.append(f"--{k.replace('_', '-')} {v}")
    return (out + (["--no-ops"] if args.no_ops else []) + (["--timing table"] if args.timing == "table" else [])
            + (["--no-mlperf"] if args.no_mlperf else [])
            + (["--op-families " + " ".join(args.op_families)] if args.op_families else []))


def _print(args: argparse.Namespace, block: dict) -> int:
    if args.json:
        print(json.dumps(block))
    else:
        print(f"{args.profile}: fit {block['fit']}\n  held-out {block['held_out']}")
    return 0
