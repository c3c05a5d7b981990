"""Offline predictions beside the published MLPerf results shipped in reference/mlperf_calibration.csv.

    python benchmarks/mlperf_check.py [--round v6.1] [--max-gpus 8] [--write]

For each published Offline row whose hardware and benchmark gpusim models, the rule deployment
(`deploy.rule_deployment`, the same for every question, not the searched default) runs
on exactly that many GPUs, for as long as submitters run (`SUBMISSION_DURATION_S`) and in process
(`frontend: loadgen`: the cost model alone, without the serving front end some benchmarks' submissions
use), and the predicted tokens/s/GPU is printed beside the published one. This is a sanity check (the
spine's factor-of-two bar); `gpusim validate mlperf` predicts each row the way its submitters run it.
`--write` replaces the block between the `<!-- mlperf_check -->` markers of docs/accuracy.md with one line per
setting (the newest round's median over submitters) and the ratio's range, count within ±15% and MAPE over
all rows.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import gpusim
from gpusim.analysis.published import read_published
from gpusim.deploy import rule_deployment
from gpusim.errors import InputError
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.specs.benchmark import benchmark_names, load_benchmark
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.validate.datasets import MLPERF_CSV
from gpusim.validate.mlperf import round_key

CSV = MLPERF_CSV


def predict_offline(hardware: str, systems: int, gpus: int, benchmark: str) -> float:
    """Predicted Offline tokens/s/GPU of the rule deployment (not the searched default) on `gpus` GPUs."""
    hw = load_hardware(hardware, systems)
    dep = rule_deployment(hw, load_model(load_benchmark(benchmark).model))
    dep = dep.model_copy(update={"instances": max(1, gpus // dep.gpus_per_instance), "frontend": "loadgen"})
    return gpusim.run(hardware, benchmark, "offline", systems=systems, deployment=dep,
                      duration_s=SUBMISSION_DURATION_S).summary["output_tokens_per_s_per_gpu"]


def comparisons(csv: Path = CSV, round_: str | None = None, max_gpus: int | None = None) -> list[dict]:
    """One dict per comparable Offline row (same setting predicted once)."""
    cache: dict[tuple, float] = {}
    out = []
    for row in read_published(csv):
        if row.scenario != "offline" or row.benchmark not in benchmark_names():
            continue
        if (round_ and row.round != round_) or (max_gpus and row.gpus > max_gpus):
            continue
        key = (row.hardware, row.systems, row.gpus, row.benchmark)
        if key not in cache:
            try:
                cache[key] = predict_offline(*key)
            except InputError as exc:
                cache[key] = float("nan")
                print(f"# {key}: {exc}")
        predicted = cache[key]
        out.append({"round": row.round, "hardware": row.hardware, "gpus": row.gpus, "benchmark": row.benchmark,
                    "published_per_gpu": round(row.tokens_per_s_per_gpu), "predicted_per_gpu": round(predicted),
                    "ratio": round(predicted / row.tokens_per_s_per_gpu, 2)})
    return out


DOC = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
MARK = ("<!-- mlperf_check -->", "<!-- /mlperf_check -->")


def block(rows: list[dict]) -> str:
    """The documented table: per setting, the newest round's median published value beside the prediction;
    then the ratio's spread over every row."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault((r["hardware"], r["gpus"], r["benchmark"]), []).append(r)
    lines = ["| hardware | GPUs | benchmark | published tok/s/GPU (round) | predicted | ratio |",
             "|---|---|---|---|---|---|"]
    for (hw, gpus, bench), rs in by.items():
        newest = max((r["round"] for r in rs), key=round_key)
        pub = statistics.median(r["published_per_gpu"] for r in rs if r["round"] == newest)
        pred = rs[0]["predicted_per_gpu"]
        lines.append(f"| {hw} | {gpus} | {bench} | {pub:,.0f} ({newest}) | {pred:,} | {pred / pub:.2f} |")
    ratios = [r["ratio"] for r in rows]
    within = sum(abs(x - 1) <= 0.15 for x in ratios)
    mape = 100 * statistics.mean(abs(x - 1) for x in ratios)
    lines += ["", f"Over all {len(rows)} such rows the ratio lies between {min(ratios):.2f} and {max(ratios):.2f}, "
              f"{within} rows are within ±15%, MAPE {mape:.0f}% (written by `python benchmarks/mlperf_check.py "
              "--write`)."]
    return "\n".join(lines)


def write_block(doc: Path, text: str) -> None:
    """Replace what lies between the markers of `doc` with `text`."""
    body = doc.read_text()
    start, end = body.index(MARK[0]) + len(MARK[0]), body.index(MARK[1])
    doc.write_text(body[:start] + "\n" + text + "\n" + body[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round")
    parser.add_argument("--max-gpus", type=int)
    parser.add_argument("--write", action="store_true", help="also replace the table in docs/accuracy.md")
    args = parser.parse_args()
    rows = comparisons(round_=args.round, max_gpus=args.max_gpus)
    print("| round | hardware | GPUs | benchmark | published tok/s/GPU | predicted | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")
    if args.write:
        write_block(DOC, block([r for r in rows if r["ratio"] == r["ratio"]]))  # NaN: not modelled
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
