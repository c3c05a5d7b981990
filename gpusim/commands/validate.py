"""`gpusim validate silicon|mlperf`: predictions against measured and published results."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpusim.commands import add_timing
from gpusim.errors import InputError
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.validate.datasets import MLPERF_CSV, silicon_path
from gpusim.validate.runner import WAVES

SILICON_JSON_KEYS = ("rows_total", "rows_predicted", "mape_ttft", "mape_tpot", "partitions", "generations",
                     "fronts")


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("validate", help="compare predictions with measured data (silicon sample, MLPerf results)")
    vs = v.add_subparsers(dest="target", required=True)
    s = vs.add_parser("silicon", help="closed-loop rows (silicon_sample.csv): TTFT and TPOT error per partition")
    s.add_argument("path", type=Path, nargs="?", help="measured rows shaped like the silicon sample (default: the one "
                   "aiconfigurator-core ships; docs/accuracy.md)")
    s.add_argument("--json", action="store_true", help="print exactly one JSON object")
    s.add_argument("--sample", type=int, help="validate a seeded random sample of N rows")
    s.add_argument("--seed", type=int, default=0, help="seed of --sample")
    s.add_argument("--held-out", action="store_true",
                   help="only the rows `gpusim calibrate` holds out (a fixed-seed 30%%), before --sample")
    s.add_argument("--generations", action="store_true",
                   help="only setups measured on both GPUs of a generation pair (B300/B200, GB300/GB200, B200/H200, "
                        "H200/H100): the report compares their measured and predicted speed-ups")
    s.add_argument("--workers", type=int, default=2, help="processes simulating rows in parallel")
    s.add_argument("--waves", type=int, default=WAVES,
                   help=f"requests per run in multiples of the concurrency (default {WAVES}, InferenceX's client); "
                        "the first wave weighs 1/N in the mean TTFT")
    add_timing(s)
    s.add_argument("--out", type=Path, help="write DIR/rows.csv (id, predicted_ttft_ms, predicted_tpot_ms, status)")
    s.add_argument("--report", type=Path, help="write DIR/README.md and scatter plots per partition")
    s.set_defaults(func=_cmd_silicon)
    m = vs.add_parser("mlperf", help="published MLPerf rows (mlperf_calibration.csv): predicted / published")
    m.add_argument("path", type=Path, nargs="?", default=MLPERF_CSV, help="published results shaped like "
                   "reference/mlperf_calibration.csv (default: that file, in a clone of the repository)")
    m.add_argument("--json", action="store_true", help="print exactly one JSON object")
    m.add_argument("--workers", type=int, default=2, help="processes searching rows in parallel")
    m.add_argument("--out", type=Path, help="append each finished search to DIR/searches.jsonl and resume from it; "
                   "write DIR/mlperf.md at the end")
    m.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    m.add_argument("--duration", type=float, default=SUBMISSION_DURATION_S,
                   help=f"simulated seconds per run (default {SUBMISSION_DURATION_S:.0f}, as long as submitters run; "
                        "600 is LoadGen's minimum)")
    add_timing(m)
    m.set_defaults(func=_cmd_mlperf)


def _cmd_silicon(args: argparse.Namespace) -> int:
    from gpusim.validate.report import front_table, generation_table, partition_table, write_report
    from gpusim.validate.silicon import validate_silicon

    for name in ("sample", "waves"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InputError("command line", name, f"must be > 0, got {value}")
    _check_timing(args.timing)
    given = f" {args.path}" if args.path is not None else ""
    result = validate_silicon(silicon_path(args.path, "path"), args.sample, max(1, args.workers), args.seed,
                              args.held_out, args.waves, args.timing, args.generations)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.rows_csv.to_csv(args.out / "rows.csv", index=False)
    if args.report is not None:
        sample = (" --held-out" if args.held_out else "") + (" --generations" if args.generations else "") + (
            f" --sample {args.sample} --seed {args.seed}" if args.sample else "") + (
            f" --waves {args.waves}" if args.waves != WAVES else "") + (
            f" --timing {args.timing}" if args.timing != "roofline" else "")
        title = ("Generation ratios on the silicon sample" if args.generations else "Silicon validation") + (
            f" (timing: {args.timing})" if args.timing != "roofline" else "")
        write_report(args.report, result.table, result.summary, title,
                     f"gpusim validate silicon{given}{sample} --report {args.report}")
    s = result.summary
    if args.json:
        print(json.dumps({k: s[k] for k in SILICON_JSON_KEYS}))
        return 0
    print(f"{s['rows_predicted']} of {s['rows_total']} rows predicted in {s['wall_s']:.1f} s; "
          f"TTFT MAPE {100 * (s['mape_ttft'] or 0):.1f}%, TPOT MAPE {100 * (s['mape_tpot'] or 0):.1f}%")
    for reason, n in s["not_predicted"].items():
        print(f"  not predicted ({n}): {reason}")
    print(partition_table(s["partitions"], ("system", "model", "backend", "mode", "isl/osl")))
    if s["generations"]:
        print(generation_table([r for r in s["generations"] if r["group"] == "all"]))
    if s["fronts"]:
        print(front_table(s["fronts"][:1]))
    return 0


def _check_timing(timing: str) -> None:
    """`--timing table` needs the measured tables: bad input without the extra."""
    from gpusim.perf.kernel_tables import aic_data_dir

    if timing == "table" and aic_data_dir() is None:
        raise InputError("command line", "--timing", "table needs aiconfigurator-core==0.12.0 "
                         "(pip install 'gpusim[calibration]'); valid without it: roofline")


def _cmd_mlperf(args: argparse.Namespace) -> int:
    from gpusim.validate.mlperf import format_mlperf, json_result, validate_mlperf

    if args.duration is not None and args.duration <= 0:
        raise InputError("command line", "--duration", f"{args.duration} is not positive; valid: seconds > 0")
    _check_timing(args.timing)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("command line", "out", f"{args.out} exists and is not a directory")
    progress = (lambda _: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    result = validate_mlperf(args.path, args.duration, max(1, args.workers), args.timing, args.out, progress)
    table = format_mlperf(result)
    if args.out is not None:
        tmp = args.out / ".mlperf.md.tmp"
        tmp.write_text(table + "\n")
        tmp.replace(args.out / "mlperf.md")
    print(json.dumps(json_result(result)) if args.json else table)
    return 0
