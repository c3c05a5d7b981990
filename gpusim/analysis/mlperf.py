"""A LoadGen-style `mlperf_log_summary.txt` for a simulated run (layout of `loadgen/results.cc::LogSummary`).

Interactive is a Server run with other limits (LoadGen has no Interactive scenario): its summary says
`Scenario : Server` as LoadGen's does, and names the limits used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpusim.loadgen.metrics import SERVER_LIKE, add_latency_columns, loadgen_percentile, loadgen_rates
from gpusim.loadgen.rules import Checks

RULE = "=" * 48
PERCENTILES = (0.50, 0.90, 0.95, 0.97, 0.99, 0.999)


def _yes(ok: bool) -> str:
    return "Yes" if ok else "NO"


def _stats(label: str, values: np.ndarray, pct_label: str) -> list[str]:
    """Min/max/mean and LoadGen's percentiles of one latency array, in ns."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return [f"{label}: no samples"]
    head = label[0].upper() + label[1:]
    width = max(len(f"Min {label} (ns)"), len(f"99.90 percentile {pct_label} (ns)"))
    rows = [(f"Min {head} (ns)", v.min()), (f"Max {head} (ns)", v.max()), (f"Mean {head} (ns)", v.mean())]
    rows += [(f"{p * 100:.2f} percentile {pct_label} (ns)", loadgen_percentile(v, p)) for p in PERCENTILES]
    return [f"{name:<{width}} : {round(x * 1e9)}" for name, x in rows]


def log_summary(summary: dict, requests: pd.DataFrame, checks: Checks, notes: dict[str, object] | None = None) -> str:
    """The text of `mlperf_log_summary.txt` for one run: `summary` from `gpusim.run`, its records, its checks.

    `notes` adds a closing gpusim section (deployment, peak-QPS search, ...), one `key : value` a line.
    """
    server = checks.scenario in SERVER_LIKE
    df = add_latency_columns(requests)
    df = df[df["completion_s"].notna()]
    lines = [RULE, "MLPerf Results Summary", RULE,
             f"SUT name : gpusim {summary.get('hardware', '')} x{summary.get('systems', 1)} "
             f"({summary.get('deployment', {}).get('name', '')})",
             f"Scenario : {'Server' if server else 'Offline'}"
             + (" (Interactive limits)" if checks.scenario == "interactive" else ""),
             "Mode     : PerformanceOnly"]
    samples_per_s, tokens_per_s = ((summary["samples_per_s"], summary["output_tokens_per_s"])
                                   if "samples_per_s" in summary else loadgen_rates(requests, checks.scenario))
    if server:
        lines += [f"Completed samples per second    : {samples_per_s:.2f}",
                  f"Completed tokens per second: {tokens_per_s:.2f}"]
    else:
        lines += [f"Samples per second: {samples_per_s:.2f}", f"Tokens per second: {tokens_per_s:.2f}"]
    lines.append(f"Result is : {'VALID' if checks.valid else 'INVALID'}")
    if server:
        lines.append(f"  Performance constraints satisfied : {_yes(checks.perf_constraints_met)}")
    lines += [f"  Min duration satisfied : {_yes(checks.min_duration_met)}",
              f"  Min queries satisfied : {_yes(checks.min_queries_met)}",
              f"  Early stopping satisfied: {_yes(checks.early_stopping_met)}"]
    if not checks.valid:
        lines += ["Recommendations:"] + [f" * {r}" for r in checks.reasons]
    for e in checks.early_stopping:
        lines += [f"{e.metric} Early Stopping Result:", e.message]
    lines += ["", RULE, "Additional Stats", RULE]
    if server and len(df):
        last = float(df["scheduled_s"].max())
        lines.append(f"Scheduled samples per second : {(len(df) - 1) / last if last > 0 else 0.0:.2f}")
    lines += _stats("latency", df["latency_s"].to_numpy(), "latency")
    if server:
        lines += ["", f"Completed tokens per second                 : {tokens_per_s:.2f}"]
        lines += _stats("First Token latency", df["ttft_s"].to_numpy(), "first token latency")
        lines += ["", *_stats("Time per Output Token", df["tpot_s"].to_numpy(), "time to output token")]
    lines += ["", RULE, "Test Parameters Used", RULE]
    if summary.get("target_qps") is not None:
        lines.append(f"target_qps : {summary['target_qps']:g}")
    if checks.limits is not None:
        lines += [f"{name}_latency (ns): {round(limit * 1e9)}"
                  for name, limit in zip(("ttft", "tpot"), checks.limits, strict=True) if limit < float("inf")]
    if checks.latency_limit_s is not None:
        lines.append(f"target_latency (ns): {round(checks.latency_limit_s * 1e9)}")
    lines += [f"min_duration (ms): {round(checks.min_duration_s * 1e3)}",
              f"min_query_count : {checks.min_query_count}",
              f"samples issued : {checks.queries_issued}"]
    if notes:
        lines += ["", RULE, "gpusim", RULE] + [f"{k} : {v}" for k, v in notes.items()]
    return "\n".join(lines) + "\n"
