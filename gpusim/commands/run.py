"""`gpusim run`: simulate one run from flags or an experiment YAML."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from gpusim.analysis.describe import batch_limits, layout_text
from gpusim.commands import add_timing
from gpusim.errors import InputError
from gpusim.loadgen.rules import SUBMISSION_DURATION_S, ms_text

SCENARIOS = ["offline", "server", "interactive", "singlestream", "concurrency", "trace", "sessions"]


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="simulate one run (flags, or an experiment YAML)")
    r.add_argument("experiment", nargs="?", type=Path, help="experiment YAML (fields of a run, see README)")
    r.add_argument("--hardware", help="system profile, e.g. gb300-nvl72 (gpusim list hardware)")
    r.add_argument("--systems", type=int, help="systems joined over the scale-out fabric")
    r.add_argument("--oversubscription", type=float, help="scale-out fat-tree oversubscription (default 1)")
    r.add_argument("--benchmark", help="MLPerf benchmark, e.g. deepseek-r1 (gpusim list benchmarks)")
    r.add_argument("--model", help="serve this model instead of the benchmark's (gpusim list models)")
    r.add_argument("--scenario", choices=SCENARIOS)
    r.add_argument("--qps", type=_qps, help="Poisson arrival rate (server, interactive), or `peak`: the highest "
                   "rate LoadGen's rules pass on the deployment (over 2,400 s unless --duration says otherwise)")
    r.add_argument("--concurrency", type=int, help="closed-loop requests in flight (scenario concurrency)")
    r.add_argument("--isl", type=int, help="input tokens per request (scenario concurrency)")
    r.add_argument("--osl", type=int, help="output tokens per request (scenario concurrency)")
    r.add_argument("--session-rate", dest="session_rate", type=float,
                   help="agent sessions starting per second (scenario sessions, an agentic benchmark)")
    r.add_argument("--trace", help="Azure CSV, Mooncake JSONL or arrived_at/num_prefill_tokens CSV")
    r.add_argument("--deployment", help="deployment YAML (what it leaves out comes from the default), `default` "
                   "(the searched default for the hardware, model and scenario) or `best` (searched now, cached)")
    r.add_argument("--software", help="run the deployment with this software profile instead of its own, e.g. "
                   "trtllm-v5.1 (gpusim list software)")
    r.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="with --deployment best: search contenders simulated at once (default: the CPU count)")
    r.add_argument("--duration", dest="duration_s", type=float,
                   help="seconds of arrivals (server, default 600); the min duration an Offline run is sized for "
                        "(default 2400); of session starts (sessions: by default 600, and longer until the load is "
                        "steady)")
    r.add_argument("--samples", type=int, help="requests to issue")
    r.add_argument("--full", dest="run_length", action="store_const", const="full",
                   help="simulate every request (default: an Offline run until its steady rate is known, a Server "
                        "run of over a million arrivals until its p99s are, the rest of the stationary middle "
                        "skipped; the output says how much and each figure's uncertainty)")
    r.add_argument("--seed", type=int)
    r.add_argument("--costs", type=Path, help="YAML of cost overrides, e.g. `capex_usd: 4.0e6` (fields of "
                   "hardware_profiles/costs.yaml)")
    add_timing(r, default=None)  # None: the experiment's value, else RunSpec's default
    r.add_argument("--out", type=Path, help="write summary.json, requests.parquet/.csv, timeline.csv and "
                   "steps.json here (gpusim report DIR draws them)")
    r.add_argument("--json", action="store_true", help="print exactly one JSON object")
    r.set_defaults(func=_cmd_run)


_RUN_FIELDS = ("hardware", "systems", "benchmark", "model", "scenario", "qps", "concurrency", "isl", "osl", "trace",
               "session_rate", "deployment", "software", "duration_s", "samples", "run_length", "seed",
               "oversubscription", "timing")


def _qps(text: str) -> float | str:
    if text == "peak":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate; valid: a number > 0, or peak") from None


def _cmd_run(args: argparse.Namespace) -> int:
    from gpusim.api import run_spec
    from gpusim.specs.experiment import RunSpec, load_run_spec
    from gpusim.specs.loading import validate

    flags = {k: getattr(args, k) for k in _RUN_FIELDS if getattr(args, k) is not None}
    if args.costs is not None:
        from gpusim.specs.costs import CostOverrides
        from gpusim.specs.loading import read_yaml
        flags["costs"] = validate(CostOverrides, read_yaml(args.costs), str(args.costs))
    if args.experiment is not None:
        base = load_run_spec(args.experiment)
        source = str(args.experiment)
        spec = validate(RunSpec, {**base.model_dump(exclude_unset=True), **flags}, source)
    else:
        source = "command line"
        spec = validate(RunSpec, flags, source)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("command line", "out", f"{args.out} exists and is not a directory")
    result = run_spec(spec, source, workers=args.workers)
    if args.out is not None:
        write_outputs(args.out, result)
    if args.json:
        print(json.dumps(result.summary))
    else:
        print(_format_summary(result.summary))
    return 0


def write_outputs(out: Path, result) -> None:
    """Write each file under a temporary name first, so no half-written file is left behind."""
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    writers = {
        "summary.json": lambda p: p.write_text(json.dumps(result.summary, indent=2) + "\n"),
        "deployment.yaml": lambda p: p.write_text(yaml.safe_dump(result.summary["deployment"], sort_keys=False)),
        "requests.parquet": lambda p: result.requests.to_parquet(p, index=False),
        "requests.csv": lambda p: result.requests.to_csv(p, index=False),
        "steps.json": lambda p: p.write_text(json.dumps(result.steps, indent=2) + "\n"),
    }
    if result.timeline is not None:
        writers["timeline.csv"] = lambda p: result.timeline.to_csv(p, index=False)
    for name, write in writers.items():
        tmp = out / f".{name}.tmp"
        write(tmp)
        tmp.replace(out / name)


THRASH_SHARE = 0.1
"""Preemptions per request above which a run's text output says the deployment recomputes its requests."""


def _worth_saying(origin: str | None) -> bool:
    """Whether the deployment line says where the deployment came from: a fallback, or a base system's default."""
    return bool(origin) and (origin.startswith("fallback") or "of its base" in origin)


def _format_summary(s: dict) -> str:
    dep = s["deployment"]
    par, limits = layout_text(dep), batch_limits(dep)
    lines = [
        f"{s['benchmark']} ({s['model']}) on {s['systems']}× {s['hardware']} ({s['num_gpus']} GPUs), "
        f"scenario {s['scenario']}" + (f" at {s['target_qps']:g} QPS" if s["target_qps"] else "")
        + (f" (its peak valid rate over {s['peak_search_s']:,.0f} s of arrivals)" if s.get("peak_qps") else ""),
        f"deployment  {dep['name']}: {s['instances']} instances × {par}, weights {dep['weights']}, "
        f"KV {dep['kv_cache']}, software {dep['software']}, batch ≤ {limits['max_batch_size']}, "
        f"≤ {limits['max_num_tokens']:,} tokens per step, "
        f"{s['kv_capacity_tokens_per_instance']:,} KV tokens per instance",
        *([f"            ({s['deployment_origin']})"] if _worth_saying(s.get("deployment_origin")) else []),
        f"completed   {s['completed_requests']:,} requests, {s['output_tokens']:,} output tokens "
        f"in {s['simulated_s']:.1f} simulated s ({s['wall_s']:.2f} s wall)",
        *([_run_length_text(s["run_length"])] if (s.get("run_length") or {}).get("skipped_requests") else []),
        f"throughput  {s['output_tokens_per_s']:,.0f} tokens/s, {s['output_tokens_per_s_per_gpu']:,.1f} tokens/s/GPU "
        f"(LoadGen's, to the {'last-scheduled query' if s['scenario'] in ('server', 'interactive') else 'last'} "
        "completion" + ("; more than the deployment sustains: it is overloaded, see load" if s.get("overloaded")
                        else "") + ")",
        f"TTFT        p50 {ms_text(s['ttft_p50_s'])}  p99 {ms_text(s['ttft_p99_s'])}",
        f"TPOT        p50 {ms_text(s['tpot_p50_s'])}  p99 {ms_text(s['tpot_p99_s'])}",
    ]
    for role, sources in s["kernel_sources"].items():
        table = [op for op, src in sources.items() if src == "table"]
        lines.append(f"timing      {role}: measured tables for {', '.join(table) or 'no op'}; roofline for the rest")
    if s.get("steady_output_tokens_per_s") is not None and not s.get("sessions"):  # sessions: their load window
        a, b = s["steady_window_s"]
        lines.append(f"steady      {s['steady_output_tokens_per_s']:,.0f} tokens/s, "
                     f"{s['steady_output_tokens_per_s_per_gpu']:,.1f} tokens/s/GPU over {a:,.0f}-{b:,.0f} s "
                     "(after the warm-up, before the drain)")
        if s.get("steady_turned_over") is False:
            lines.append("            the run ended before its batch turned over (the p90 request outlives half of "
                         "it): the window is not yet stationary; run longer")
    if s.get("sessions"):
        lines.append(_sessions_text(s["sessions"], s.get("prefix_hit_rate")))
    if s.get("preemptions_per_request", 0) > THRASH_SHARE:
        lines.append(f"preemption  {s['preemptions']:,} recomputes for {s['issued_requests']:,} requests "
                     f"({s['preemptions_per_request']:.2f} each): the batch cap admits more sequences than the KV "
                     "cache holds once their outputs grow")
    if s["valid"] is not None:
        lines.append(f"verdict     {_verdict(s)}")
    if s.get("conformant") is False:
        met = " (its p99 TTFT and TPOT meet the limits)" if s.get("latency_met") else ""
        lines.append(f"conformance not an MLPerf-conformant run{met}: {'; '.join(s['conformance_reasons'])}; "
                     "`gpusim mlperf` runs the conformant test")
    if s.get("overloaded"):
        lines.append(f"load        overloaded: the deployment serves about {s['capacity_qps_estimate']:,.1f} QPS "
                     f"(steady-state estimate); {s['started_share']:.0%} of the late arrivals started by the end")
    return "\n".join(lines)


def _sessions_text(a: dict, hit_rate: float | None) -> str:
    """Agent sessions: how many finished, how long they took, how many a rack carries, where their context came
    from (`gpusim/analysis/sessions.py`)."""
    if not a["completed_sessions"]:
        return f"sessions    none of {a['sessions']:,} completed"
    rate = (f"; {a['sessions_per_s']:.2f} sessions/s ({a['sessions_per_s_per_mw']:.1f} per MW)"
            if a["sessions_per_s"] else "")
    tiers = "".join(f", {name} tier {t['reloaded_share']:.1%} reloaded" for name, t in (a["kv_tiers"] or {}).items()
                    if t["reloaded_share"] is not None)
    hits = f"; prefix hits {hit_rate:.0%}{tiers}" if hit_rate is not None else ""
    return (f"sessions    {a['completed_sessions']:,} of {a['sessions']:,} completed, "
            f"{a['calls_per_session']:.1f} calls each, p50 context {a['context_tokens_p50']:,.0f} tokens; "
            f"session time p50 {a['session_time_p50_s']:,.0f} s, p99 {a['session_time_p99_s']:,.0f} s{rate}{hits}\n"
            + _steady_text(a["steady"]))


def _steady_text(st: dict) -> str:
    """The calls begun once the sessions' load levelled off (`gpusim/analysis/sessions.py`, `steady_figures`)."""
    if not st["steady"]:
        return (f"load window none: the load levels off {st['warm_up_s']:,.0f} s after the first session "
                f"starts; --duration {st['needs_duration_s']:,.0f} or more judges the calls of a steady window")
    return (f"load window {st['calls']:,} calls begun in the {st['window_s']:,.0f} s after the load levelled off "
            f"({st['warm_up_s']:,.0f} s in), {st['calls_per_s']:,.1f} a second: TTFT p50 {st['ttft_p50_s']:.2f} s, "
            f"p99 {st['ttft_p99_s']:.2f} s; TPOT p99 {1e3 * st['tpot_p99_s']:.1f} ms")


def _run_length_text(r: dict) -> str:
    """What a run simulated and skipped (`gpusim/run_length.py`)."""
    p99 = f", p99 TTFT/TPOT ±{100 * r['latency_uncertainty']:.1f}%" if r.get("latency_uncertainty") else ""
    return (f"run length  simulated {r['simulated_requests']:,} of {r['issued_requests']:,} requests, then "
            f"{r['skipped_s']:,.0f} s of the stationary middle at its steady rate ({r['decided_by']}): throughput "
            f"±{100 * r['uncertainty']:.1f}%{p99}; --full simulates every request")


def _verdict(s: dict) -> str:
    """LoadGen's verdict; a peak searched over a shorter run than a submission's is VALID only over that run."""
    if not s["valid"]:
        return f"INVALID: {s['invalid_reason']}"
    if s.get("peak_short"):
        return (f"VALID over {s['peak_search_s']:,.0f} s only: `gpusim mlperf` searches the peak over "
                f"{SUBMISSION_DURATION_S:,.0f} s, where long requests fill the batch, and reports that rate")
    return "VALID"



