"""Offline predictions beside the published MLPerf results shipped in reference/mlperf_calibration.csv.

    python benchmarks/mlperf_check.py [--round v6.1] [--max-gpus 8]

For each published Offline row whose hardware and benchmark gpusim models, the default deployment runs
on exactly that many GPUs, for as long as submitters run (`SUBMISSION_DURATION_S`) and in process
(`frontend: loadgen`: the cost model alone, without the serving front end some benchmarks' submissions
use), and the predicted tokens/s/GPU is printed beside the published one. This is a sanity check (the
spine's factor-of-two bar); `gpusim validate mlperf` predicts each row the way its submitters run it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gpusim
from gpusim.analysis.published import read_published
from gpusim.deploy import default_deployment
from gpusim.errors import InputError
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.specs.benchmark import benchmark_names, load_benchmark
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.validate.datasets import MLPERF_CSV

CSV = MLPERF_CSV


def predict_offline(hardware: str, systems: int, gpus: int, benchmark: str) -> float:
    """Predicted Offline tokens/s/GPU of the default deployment on `gpus` GPUs."""
    hw = load_hardware(hardware, systems)
    dep = default_deployment(hw, load_model(load_benchmark(benchmark).model))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round")
    parser.add_argument("--max-gpus", type=int)
    args = parser.parse_args()
    rows = comparisons(round_=args.round, max_gpus=args.max_gpus)
    print("| round | hardware | GPUs | benchmark | published tok/s/GPU | predicted | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")


if __name__ == "__main__":
    main()
