"""The `gpusim` command: run simulations, list and show profiles."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpusim.errors import InputError

EXIT_INPUT = 2


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"gpusim: error: {exc}", file=sys.stderr)
        return EXIT_INPUT


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpusim", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="simulate one run (flags, or an experiment YAML)")
    r.add_argument("experiment", nargs="?", type=Path, help="experiment YAML (fields of a run, see README)")
    r.add_argument("--hardware", help="system profile, e.g. gb300-nvl72 (gpusim list hardware)")
    r.add_argument("--systems", type=int, help="systems joined over the scale-out fabric")
    r.add_argument("--benchmark", help="MLPerf benchmark, e.g. deepseek-r1 (gpusim list benchmarks)")
    r.add_argument("--scenario", choices=["offline", "server", "interactive", "singlestream", "concurrency", "trace"])
    r.add_argument("--qps", type=float, help="Poisson arrival rate (server, interactive)")
    r.add_argument("--concurrency", type=int, help="closed-loop requests in flight (scenario concurrency)")
    r.add_argument("--isl", type=int, help="input tokens per request (scenario concurrency)")
    r.add_argument("--osl", type=int, help="output tokens per request (scenario concurrency)")
    r.add_argument("--trace", help="Azure CSV, Mooncake JSONL or arrived_at/num_prefill_tokens CSV")
    r.add_argument("--deployment", help="deployment YAML (default: chosen for the hardware and model)")
    r.add_argument("--duration", dest="duration_s", type=float, help="seconds of arrivals (server)")
    r.add_argument("--samples", type=int, help="requests to issue")
    r.add_argument("--seed", type=int)
    r.add_argument("--out", type=Path, help="write summary.json, requests.parquet and requests.csv here")
    r.add_argument("--json", action="store_true", help="print exactly one JSON object")
    r.set_defaults(func=_cmd_run)

    ls = sub.add_parser("list", help="list hardware, models or benchmarks")
    ls.add_argument("kind", choices=["hardware", "models", "benchmarks"])
    ls.set_defaults(func=_cmd_list)

    sh = sub.add_parser("show", help="show one profile with its sources and derived figures")
    sh.add_argument("kind", choices=["hardware", "model", "benchmark"])
    sh.add_argument("name")
    sh.set_defaults(func=_cmd_show)
    return p


_RUN_FIELDS = ("hardware", "systems", "benchmark", "scenario", "qps", "concurrency", "isl", "osl", "trace",
               "deployment", "duration_s", "samples", "seed")


def _cmd_run(args: argparse.Namespace) -> int:
    from gpusim.api import run_spec
    from gpusim.specs.experiment import RunSpec, load_run_spec
    from gpusim.specs.loading import validate

    flags = {k: getattr(args, k) for k in _RUN_FIELDS if getattr(args, k) is not None}
    if args.experiment is not None:
        base = load_run_spec(args.experiment)
        source = str(args.experiment)
        spec = validate(RunSpec, {**base.model_dump(exclude_unset=True), **flags}, source)
    else:
        source = "command line"
        spec = validate(RunSpec, flags, source)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("command line", "out", f"{args.out} exists and is not a directory")
    result = run_spec(spec, source)
    if args.out is not None:
        _write_outputs(args.out, result)
    if args.json:
        print(json.dumps(result.summary))
    else:
        print(_format_summary(result.summary))
    return 0


def _write_outputs(out: Path, result) -> None:
    """Write each file under a temporary name first, so no half-written file is left behind."""
    out.mkdir(parents=True, exist_ok=True)
    writers = {
        "summary.json": lambda p: p.write_text(json.dumps(result.summary, indent=2) + "\n"),
        "requests.parquet": lambda p: result.requests.to_parquet(p, index=False),
        "requests.csv": lambda p: result.requests.to_csv(p, index=False),
    }
    for name, write in writers.items():
        tmp = out / f".{name}.tmp"
        write(tmp)
        tmp.replace(out / name)


def _format_summary(s: dict) -> str:
    dep = s["deployment"]
    par = f"tp{dep['tp']} pp{dep['pp']} ep{dep['ep']}{' attention-dp' if dep['attention_dp'] else ''}"
    lines = [
        f"{s['benchmark']} ({s['model']}) on {s['systems']}× {s['hardware']} ({s['num_gpus']} GPUs), "
        f"scenario {s['scenario']}" + (f" at {s['target_qps']:g} QPS" if s["target_qps"] else ""),
        f"deployment  {dep['name']}: {s['instances']} instances × {par}, weights {dep['weights']}, "
        f"KV {dep['kv_cache']}, {s['kv_capacity_tokens_per_instance']:,} KV tokens per instance",
        f"completed   {s['completed_requests']:,} requests, {s['output_tokens']:,} output tokens "
        f"in {s['simulated_s']:.1f} simulated s ({s['wall_s']:.2f} s wall)",
        f"throughput  {s['output_tokens_per_s']:,.0f} tokens/s, {s['output_tokens_per_s_per_gpu']:,.1f} tokens/s/GPU",
        f"TTFT        p50 {_ms(s['ttft_p50_s'])}  p99 {_ms(s['ttft_p99_s'])}",
        f"TPOT        p50 {_ms(s['tpot_p50_s'])}  p99 {_ms(s['tpot_p99_s'])}",
    ]
    if s["valid"] is not None:
        lines.append(f"verdict     {'VALID' if s['valid'] else 'INVALID: ' + str(s['invalid_reason'])}")
    return "\n".join(lines)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f} ms"


def _cmd_list(args: argparse.Namespace) -> int:
    from gpusim.specs.benchmark import benchmark_names
    from gpusim.specs.hardware import all_profiles
    from gpusim.specs.model import model_names

    if args.kind == "hardware":
        for kind, names in all_profiles().items():
            print(f"{kind}: {', '.join(names)}")
    else:
        print("\n".join(model_names() if args.kind == "models" else benchmark_names()))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    import yaml

    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model

    if args.kind == "hardware":
        hw = load_hardware(args.name)
        doc = {"system": hw.system.model_dump(exclude_none=True), "gpu": hw.gpu.model_dump(exclude_none=True),
               "nvlink": hw.nvlink.model_dump(exclude_none=True),
               "scaleout": hw.scaleout.model_dump(exclude_none=True),
               "derived": {k: round(v, 3) for k, v in hw.derived().items()}}
    elif args.kind == "model":
        m = load_model(args.name)
        doc = {**m.model_dump(exclude_none=True), "derived": {
            "total_params_b": round(m.total_params / 1e9, 2), "active_params_b": round(m.active_params / 1e9, 2),
            "kv_bytes_per_token_bf16": m.kv_bytes_per_token(2)}}
    else:
        doc = load_benchmark(args.name).model_dump(exclude_none=True)
    print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
