"""What a deployment search costs, against the runs a user would otherwise make (not a timed test).

    python benchmarks/search_cost.py                     # DeepSeek-R1 Server on every system it fits
    python benchmarks/search_cost.py --hardware b200-hgx --benchmark llama2-70b --scenario offline
    python benchmarks/search_cost.py --write             # and the table in docs/search-cost.md

Each question runs three commands one after another, cold (an empty `$GPUSIM_CACHE`, nothing else running
that the script starts):

1. `gpusim mlperf --search --json --out DIR`: the search, with the CPU count as workers;
2. `gpusim mlperf --deployment DIR/deployment.yaml --json`: the conformant answer for the deployment the
   search picked, on its own: Offline one full-length run, Server/Interactive its own peak search from a
   capacity probe (the runs `gpusim mlperf` makes for any one deployment);
3. `gpusim run --deployment DIR/deployment.yaml --qps PEAK`: one full-length run of it (Offline: as 2).

The search's cost is given as a multiple of 2 and of 3 (the issue's 5x rack / 3x 8-GPU targets read against
one run of the deployment it picks), and whether 1 and 2 report the same result (the search's `deployment.yaml`
reproduces it). Wall times on a shared 2-core machine move by about ±30% between repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "search-cost.md"
SYSTEMS = ("h200-hgx", "b200-hgx", "b300-hgx", "gb200-nvl72", "gb300-nvl72", "vr-nvl72")
SAME = ("result", "result_tokens_per_s_per_gpu", "peak_qps", "valid")
"""The fields that must agree between the search and the run of the deployment it wrote."""


def gpusim(args: list[str], env: dict[str, str]) -> tuple[dict, float]:
    """Run one gpusim command that prints one JSON object: (that object, wall seconds)."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "gpusim.cli", *args, "--json"], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out), time.perf_counter() - start


def measure(hardware: str, benchmark: str, scenario: str) -> dict:
    """The three commands of the module docstring for one question, cold."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GPUSIM_CACHE": str(Path(tmp) / "cache")}
        question = ["--hardware", hardware, "--benchmark", benchmark, "--scenario", scenario]
        out = Path(tmp) / "search"
        found, search_s = gpusim(["mlperf", *question, "--search", "--no-cache", "--out", str(out)], env)
        dep = str(out / "deployment.yaml")
        again, mlperf_s = gpusim(["mlperf", *question, "--deployment", dep, "--no-cache"], env)
        if scenario == "offline":
            run_s = mlperf_s
        else:
            _, run_s = gpusim(["run", *question, "--deployment", dep, "--qps", str(found["peak_qps"]),
                               "--duration", str(found["min_duration_s"])], env)
    name = found["deployment"]["name"] if isinstance(found["deployment"], dict) else found["deployment"]
    return {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, "deployment": name,
            "tokens_per_s_per_gpu": round(found["result_tokens_per_s_per_gpu"]),
            "search_s": round(search_s, 1), "mlperf_s": round(mlperf_s, 1), "run_s": round(run_s, 1),
            "same_result": all(found.get(k) == again.get(k) for k in SAME)}


def table(rows: list[dict]) -> str:
    head = ("| system | model | scenario | picked | tokens/s/GPU | search s | `mlperf --deployment` s | x | "
            "one run s | x | same result |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['hardware']} | {r['benchmark']} | {r['scenario']} | {r['deployment']} | {r['tokens_per_s_per_gpu']:,} | "
        f"{r['search_s']} | {r['mlperf_s']} | {r['search_s'] / r['mlperf_s']:.1f} | {r['run_s']} | "
        f"{r['search_s'] / r['run_s']:.1f} | {'yes' if r['same_result'] else 'no'} |\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", nargs="+", default=list(SYSTEMS))
    ap.add_argument("--benchmark", default="deepseek-r1")
    ap.add_argument("--scenario", default="server")
    ap.add_argument("--write", action="store_true", help=f"write the table to {DOCS.name} in docs/")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for hw in args.hardware:
        rows.append(measure(hw, args.benchmark, args.scenario))
        print(json.dumps(rows[-1]), file=sys.stderr)
    if args.json:
        print(json.dumps(rows))
        return 0
    text = table(rows)
    print(text)
    if args.write:
        cmd = "python benchmarks/search_cost.py" + ("" if args.hardware == list(SYSTEMS) else
                                                    " --hardware " + " ".join(args.hardware))
        DOCS.write_text(
            "# What a deployment search costs\n\n"
            f"Written by `{cmd}` on {os.cpu_count()} cores, each question cold (module docstring). "
            "*search s*: `gpusim mlperf --search`; *`mlperf --deployment` s*: the same command on the "
            "`deployment.yaml` the search wrote, which for Server runs that deployment's own peak search; *one "
            "run s*: `gpusim run` of it at its peak QPS for the full duration. *x*: the search's wall time over "
            "the column before. *same result*: the search and the run of its `deployment.yaml` report the same "
            "result, peak QPS and verdict.\n\n" + text)
        print(f"wrote {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
