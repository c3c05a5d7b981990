"""Speed benchmark (not a timed test): simulated seconds and requests per wall-clock second.

    python benchmarks/speed.py            # the canonical runs, a table on stdout
    python benchmarks/speed.py --write    # and the table in docs/speed.md and README.md
    python benchmarks/speed.py --json

1. One GB300 NVL72 rack, DeepSeek-R1 Offline on its searched default deployment with the default sizing
   (samples = 1.1 × 2,400 s × the expected QPS, as LoadGen sizes a run as long as submitters run).
2. The same rack, DeepSeek-R1 Server at 100 QPS on its searched default (600 s).
3. The first 1,000 requests of the Azure 2023 conversation trace on one 8-GPU H100 system serving
   Llama-2-70B (reference/traces/, source and licence in reference/README.md).
4. Run 1 with `timing="table"` (kernel times from the measured tables; needs the calibration extra,
   skipped without it).
5. One Vera Rubin NVL72 rack, Llama 2 70B Offline on its default: 25.7 M samples as long as submitters run,
   of which the run simulates what its steady rate needs (`gpusim/run_length.py`).
6. The same rack, Llama 2 70B Server at 9,700 QPS (about its searched peak) for 2,400 s: 23 M arrivals, of which
   the run simulates what its p99s need, a million at most.

Each row runs in a fresh process and carries that process's peak resident memory, the 1-minute load average
just before it ran (the machine is shared) and, for runs 1, 3, 5 and 6, whether the target is met (`RACK_TARGET_X`,
`AZURE_TARGET_S`, `DEFAULT_RUN_S` and `DEFAULT_RUN_MB`). `requests` and `simulated s` count what was simulated;
an Offline run that skipped part of its middle says how many requests its figure stands for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path

import gpusim
from gpusim.perf.kernel_tables import aic_data_dir

AZURE = Path(__file__).resolve().parents[1] / "reference" / "traces" / "AzureLLMInferenceTrace_conv.csv"


RACK_TARGET_X = 1000.0
"""Target: the rack run simulates at least this many seconds per wall second (1,000x real time)."""
AZURE_TARGET_S = 1.0
"""Target: the 1,000 Azure requests in under this many wall seconds."""
DEFAULT_RUN_S, DEFAULT_RUN_MB = 60.0, 2048
"""Target: a default `gpusim run` of a rack within this wall time and peak memory."""


def timed(target: str = "", **kwargs) -> dict:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    result = gpusim.run(**kwargs)
    wall = time.perf_counter() - start
    s = result.summary
    how = s.get("run_length") or {}
    skipped = how.get("skipped_requests", 0)
    requests, simulated_s = s["completed_requests"] - skipped, s["simulated_s"] - how.get("skipped_s", 0.0)
    return {
        "run": f"{kwargs['hardware']} {kwargs['benchmark']} {kwargs['scenario']}"
               + (f" timing {kwargs['timing']}" if "timing" in kwargs else "")
               + (f" (for {s['completed_requests']:,} requests, ±{100 * how['uncertainty']:.1f}%)" if skipped else ""),
        "requests": requests,
        "simulated_s": round(simulated_s, 1),
        "wall_s": round(wall, 3),
        "simulated_s_per_wall_s": round(simulated_s / wall, 1),
        "requests_per_wall_s": round(requests / wall, 1),
        "engine_steps": result.stats.steps,
        "load_before": round(load, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "target": target,
    }


def fresh(target: str = "", **kwargs) -> dict:
    """`timed` in a new process, so that its peak memory is its own."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(partial(timed, target, **kwargs)).result()


def verdict(row: dict) -> str:
    """The row's target and whether it is met, in words (empty for rows without one)."""
    if row["target"] == "rack":
        x = row["simulated_s"] / row["wall_s"]
        return f"≥ {RACK_TARGET_X:,.0f}x real time: {'met' if x >= RACK_TARGET_X else 'MISSED'} ({x:,.0f}x)"
    if row["target"] == "azure":
        return f"< {AZURE_TARGET_S:.0f} s: {'met' if row['wall_s'] < AZURE_TARGET_S else 'MISSED'}"
    if row["target"] == "default":
        met = row["wall_s"] <= DEFAULT_RUN_S and row["peak_rss_mb"] <= DEFAULT_RUN_MB
        return f"≤ {DEFAULT_RUN_S:.0f} s and ≤ {DEFAULT_RUN_MB / 1024:.0f} GB: {'met' if met else 'MISSED'}"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true", help="also replace the table in docs/speed.md and README.md")
    args = parser.parse_args()
    rows = [fresh("rack", hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="offline"),
            fresh(hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="server", qps=100.0)]
    if AZURE.exists():
        rows.append(fresh("azure", hardware="h100-hgx", benchmark="llama2-70b", scenario="trace", trace=str(AZURE),
                          samples=1000))
    if aic_data_dir() is not None:
        rows.append(fresh(hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="offline", timing="table"))
    rows.append(fresh("default", hardware="vr-nvl72", benchmark="llama2-70b", scenario="offline"))
    rows.append(fresh("default", hardware="vr-nvl72", benchmark="llama2-70b", scenario="server", qps=9700.0,
                      duration_s=2400.0))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = markdown(rows)
    print(table)
    if args.write:
        for doc in DOCS:
            write_table(doc, table)


ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "docs" / "speed.md", ROOT / "README.md")


def markdown(rows: list[dict]) -> str:
    lines = ["| run | requests | simulated s | wall s | simulated s / wall s | requests / wall s | engine steps "
             "| wall µs / step | peak RSS MB | load before | target |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['requests']:,} | {r['simulated_s']:,.1f} | {r['wall_s']:,.2f} | "
              f"{r['simulated_s_per_wall_s']:,.0f} | {r['requests_per_wall_s']:,.0f} | {r['engine_steps']:,} | "
              f"{1e6 * r['wall_s'] / max(r['engine_steps'], 1):,.0f} | {r['peak_rss_mb']:,} | "
              f"{r['load_before']} | "
              f"{verdict(r)} |" for r in rows]
    return "\n".join(lines)


def write_table(doc: Path, table: str) -> None:
    """Replace the first markdown table of `doc` that starts with `| run |` (the measured one) with `table`."""
    lines = doc.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| run |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    doc.write_text("\n".join([*lines[:start], *table.splitlines(), *lines[end:]]) + "\n")


if __name__ == "__main__":
    main()
