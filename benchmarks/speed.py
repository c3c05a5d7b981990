"""Speed benchmark (not a timed test): simulated seconds and requests per wall-clock second.

    python benchmarks/speed.py            # the canonical runs, a table on stdout
    python benchmarks/speed.py --write    # and the table in docs/speed.md and README.md
    python benchmarks/speed.py --json

1. One GB300 NVL72 rack, DeepSeek-R1 Offline on its searched default deployment with the default sizing
   (samples = 1.1 × 2,400 s × the expected QPS, as LoadGen sizes a run as long as submitters run).
2. The first 1,000 requests of the Azure 2023 conversation trace on one 8-GPU H100 system serving
   Llama-2-70B (needs ../shared/traces; skipped when absent).
3. Run 1 with `timing="table"` (kernel times from the measured tables; needs the calibration extra,
   skipped without it).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gpusim
from gpusim.perf.kernel_tables import aic_data_dir

AZURE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def timed(**kwargs) -> dict:
    start = time.perf_counter()
    result = gpusim.run(**kwargs)
    wall = time.perf_counter() - start
    s = result.summary
    return {
        "run": f"{kwargs['hardware']} {kwargs['benchmark']} {kwargs['scenario']}"
               + (f" timing {kwargs['timing']}" if "timing" in kwargs else ""),
        "requests": s["completed_requests"],
        "simulated_s": round(s["simulated_s"], 1),
        "wall_s": round(wall, 3),
        "simulated_s_per_wall_s": round(s["simulated_s"] / wall, 1),
        "requests_per_wall_s": round(s["completed_requests"] / wall, 1),
        "engine_steps": result.stats.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true", help="also replace the table in docs/speed.md and README.md")
    args = parser.parse_args()
    rows = [timed(hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="offline"),
            timed(hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="server", qps=100.0)]
    if AZURE.exists():
        rows.append(timed(hardware="h100-hgx", benchmark="llama2-70b", scenario="trace", trace=str(AZURE),
                          samples=1000))
    if aic_data_dir() is not None:
        rows.append(timed(hardware="gb300-nvl72", benchmark="deepseek-r1", scenario="offline", timing="table"))
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
    lines = ["| run | requests | simulated s | wall s | simulated s / wall s | requests / wall s |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['requests']:,} | {r['simulated_s']:,.1f} | {r['wall_s']:,.2f} | "
              f"{r['simulated_s_per_wall_s']:,.0f} | {r['requests_per_wall_s']:,.0f} |" for r in rows]
    return "\n".join(lines)


def write_table(doc: Path, table: str) -> None:
    """Replace the first markdown table of `doc` that starts with `| run |` (the measured one) with `table`."""
    lines = doc.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| run |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    doc.write_text("\n".join([*lines[:start], *table.splitlines(), *lines[end:]]) + "\n")


if __name__ == "__main__":
    main()
