"""`gpusim mlperf`: the command line of `gpusim.submission` (what an MLPerf submission would report).

Experiment YAMLs (experiments/mlperf/) run in turn and print predicted beside published.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gpusim.commands import add_timing
from gpusim.errors import InputError
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.specs.loading import validate
from gpusim.submission import MlperfRun, load_experiment, mlperf_result, published_for
from gpusim.validate.datasets import MLPERF_CSV

SCENARIOS = ["offline", "server", "interactive", "singlestream"]


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("mlperf", help="MLPerf result: Offline tokens/s or peak valid Server/Interactive QPS")
    m.add_argument("experiments", nargs="*", type=Path,
                   help="experiments/mlperf/*.yaml: run each and print predicted beside published")
    m.add_argument("--hardware", help="system profile, e.g. gb300-nvl72")
    m.add_argument("--systems", type=int, default=None, help="systems joined over the scale-out fabric")
    m.add_argument("--benchmark", help="MLPerf benchmark, e.g. deepseek-r1")
    m.add_argument("--scenario", choices=SCENARIOS)
    how = m.add_mutually_exclusive_group()
    how.add_argument("--deployment", help="deployment YAML, `default` (the default deployment) or `best` (the "
                     "searched best, the default)")
    how.add_argument("--search", action="store_true", help="search the deployments that fit for the best (the default)")
    m.add_argument("--software", help="software profile every deployment runs, e.g. trtllm-v5.1 (its kernels and "
                   "serving features; default: the deployment's own)")
    m.add_argument("--no-cache", dest="use_cache", action="store_false",
                   help="search again even if this question's result is cached ($GPUSIM_CACHE, ~/.cache/gpusim)")
    m.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="search contenders simulated at once, in separate processes (default: the CPU count)")
    m.add_argument("--qps", type=float, help="judge this Server/Interactive QPS instead of searching the peak (on "
                   "the default deployment unless --search or --deployment)")
    m.add_argument("--duration", dest="duration_s", type=float,
                   help=f"min duration in seconds (default {SUBMISSION_DURATION_S:.0f}, as long as submitters run; "
                        "mlperf.conf's minimum is 600, shorter runs are not conformant)")
    m.add_argument("--seed", type=int, default=None)
    add_timing(m, default=None)  # None: the experiment's value, else roofline
    m.add_argument("--out", type=Path, help="write mlperf_log_summary.txt and summary.json here")
    m.add_argument("--json", action="store_true", help="print exactly one JSON object")
    m.add_argument("--loadgen", action="store_true",
                   help="also run the real MLPerf LoadGen against the simulated system in real time")
    m.add_argument("--min-duration", dest="min_duration_s", type=float, default=600.0,
                   help="LoadGen's min duration in real seconds for --loadgen (default 600)")
    m.add_argument("--published", type=Path, default=MLPERF_CSV,
                   help="published results CSV to compare experiments with (compare only)")
    m.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    m.set_defaults(func=_cmd_mlperf)


def _cmd_mlperf(args: argparse.Namespace) -> int:
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("command line", "out", f"{args.out} exists and is not a directory")
    for name in ("duration_s", "qps", "min_duration_s"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise InputError("command line", name, f"must be > 0, got {value}")
    if args.systems is not None and args.systems < 1:
        raise InputError("command line", "systems", f"must be >= 1, got {args.systems}")
    log = (lambda _: None) if args.quiet or args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    if args.experiments:
        return _run_experiments(args, log)
    for name in ("hardware", "benchmark", "scenario"):
        if getattr(args, name) is None:
            raise InputError("command line", name, f"--{name} is required (or give experiment YAMLs)")
    run = validate(MlperfRun, {"hardware": args.hardware, "systems": args.systems or 1, "benchmark": args.benchmark,
                               "scenario": args.scenario, "deployment": args.deployment, "search": args.search or None,
                               "duration_s": args.duration_s or SUBMISSION_DURATION_S, "seed": args.seed or 0,
                               "timing": args.timing or "roofline", "software": args.software, **_how(args)},
                   "command line")
    out, text = mlperf_result(run, log)
    if args.out is not None:
        _write(args.out, text, out)
    print(json.dumps(out) if args.json else text, end="\n" if args.json else "")
    return 0


def _how(args: argparse.Namespace) -> dict:
    """The MlperfRun fields that say how to run, from the flags."""
    return {"qps": args.qps, "workers": args.workers, "use_cache": args.use_cache, "loadgen": args.loadgen,
            "min_duration_s": args.min_duration_s,
            "loadgen_dir": (args.out / "loadgen") if args.out is not None else None}


def _write(out_dir: Path, text: str, out: dict) -> None:
    """The LoadGen-style summary, the JSON object and the deployment (a file `--deployment` accepts)."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    dep = yaml.safe_dump(out["deployment"], sort_keys=False)
    for name, content in (("mlperf_log_summary.txt", text), ("summary.json", json.dumps(out, indent=2) + "\n"),
                          ("deployment.yaml", f"# The deployment of {out['hardware']} {out['benchmark']} "
                                              f"{out['scenario']}: gpusim mlperf ... --deployment this-file\n" + dep)):
        tmp = out_dir / f".{name}.tmp"
        tmp.write_text(content)
        tmp.replace(out_dir / name)


def _run_experiments(args: argparse.Namespace, log) -> int:
    results = []
    for path in args.experiments:
        exp = load_experiment(path)
        exp = exp.model_copy(update={k: v for k, v in (("search", args.search or exp.search),
                                                      ("duration_s", args.duration_s or exp.duration_s),
                                                      ("timing", args.timing)) if v})
        run = validate(MlperfRun, {**exp.model_dump(), **_how(args)}, "command line")
        log(f"== {path}: {exp.claim}")
        row: dict = {"experiment": str(path), "claim": exp.claim}
        try:
            out, text = mlperf_result(run, log)
        except InputError as exc:
            row["error"] = str(exc)
            results.append(row)
            continue
        if args.out is not None:
            _write(args.out / path.stem, text, out)
        pub = published_for(exp, out["num_gpus"], args.published)
        row.update({k: out[k] for k in ("hardware", "systems", "num_gpus", "benchmark", "scenario", "valid",
                                        "conformant_duration",
                                        "peak_qps", "result_tokens_per_s", "result_tokens_per_s_per_gpu")})
        row["deployment"] = out["deployment"]["name"]
        if pub is not None:
            row["published"] = pub
            row["ratio_per_gpu"] = out["result_tokens_per_s_per_gpu"] / pub["tokens_per_s_per_gpu"]
        results.append(row)
    if args.json:
        print(json.dumps(results))
        return 0
    print("| experiment | GPUs | scenario | deployment | peak QPS | predicted tok/s | tok/s/GPU | "
          "published tok/s/GPU (round, GPUs) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        name = Path(r["experiment"]).stem
        if "error" in r:
            print(f"| {name} | | | unsupported: {r['error']} | | | | | |")
            continue
        pub = r.get("published")
        pub_s = f"{pub['tokens_per_s_per_gpu']:,.0f} ({pub['round']}, {pub['gpus']})" if pub else "-"
        ratio = f"{r['ratio_per_gpu']:.2f}" if pub else "-"
        qps = f"{r['peak_qps']:.2f}" if r["peak_qps"] else "-"
        valid = ("" if r["valid"] else " INVALID") + ("" if r["conformant_duration"] else " (short run)")
        print(f"| {name} | {r['num_gpus']} | {r['scenario']}{valid} | {r['deployment']} | {qps} | "
              f"{r['result_tokens_per_s']:,.0f} | {r['result_tokens_per_s_per_gpu']:,.0f} | {pub_s} | {ratio} |")
    return 0
