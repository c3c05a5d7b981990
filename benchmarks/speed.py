"""Speed benchmark (not a timed test): simulated seconds and requests per wall-clock second.

    python benchmarks/speed.py            # both canonical runs, a table on stdout
    python benchmarks/speed.py --json

1. One GB300 NVL72 rack, DeepSeek-R1 Offline with the default sizing, as LoadGen sizes Offline runs
   (samples = 1.1 × 600 s × the expected QPS), so it simulates at least about 600 s.
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
    cols = list(rows[0])
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))


if __name__ == "__main__":
    main()
