"""Fit the prompt-length scale of a benchmark whose dataset lengths are not published (Qwen3-VL) on one
calibration row: the factor on every prompt's length (text + image tokens) at which the simulated Offline
samples/s on the row's hardware matches the published figure.

Only the first 20 prompts of the Qwen3-VL calibration list are published (809 to 61,566 tokens); their
log-normal fit is kept in the benchmark's `input_tokens.fitted_to` (`log_mean`, `log_std`) and the fit
sets `mu = log_mean + ln(scale)`, so a re-fit starts from the same published samples. The other scenarios
of the benchmark are then predictions (held out).

    python -m gpusim.calibrate.prompt_scale [--benchmark qwen3-vl-235b-a22b] [--hardware b300-hgx]
        [--target 129.358] [--software vllm] [--duration 600] [--write]
"""

from __future__ import annotations

import argparse
import math
import re
from datetime import date
from pathlib import Path

from gpusim.build import make_setup, prepare
from gpusim.search import trial
from gpusim.specs.benchmark import BenchmarkSpec
from gpusim.specs.catalog import resolve

ROW = {"benchmark": "qwen3-vl-235b-a22b", "hardware": "b300-hgx", "target": 129.358, "software": "vllm"}
"""The calibration row: v6.1 NVIDIA B300-SXM-270GBx8, Offline 129.358 samples/s, vLLM + Dynamo
(mlperf_calibration.csv)."""
TOLERANCE = 0.005
"""Relative error of samples/s at which the bisection stops."""


def scaled(bench: BenchmarkSpec, scale: float) -> BenchmarkSpec:
    """`bench` with every prompt `scale` times as long (mu moved from the published samples' log mean)."""
    base = bench.input_tokens.fitted_to.get("log_mean", bench.input_tokens.mu)
    tokens = bench.input_tokens.model_copy(update={"mu": base + math.log(scale)})
    return bench.model_copy(update={"input_tokens": tokens})


def offline_samples_per_s(benchmark: str, hardware: str, software: str, scale: float, duration_s: float) -> float:
    """Simulated Offline samples/s of the default deployment with `software` at prompt scale `scale`."""
    base = prepare(hardware, benchmark, scenario="offline")
    dep = base.deployment.model_copy(update={"software": software})
    setup = make_setup(base.hardware, scaled(base.bench, scale), base.model, dep, "prompt_scale")
    return trial(setup, "offline", duration_s=duration_s).result.summary["samples_per_s"]


def fit(benchmark: str, hardware: str, software: str, target: float, duration_s: float,
        log=print) -> tuple[float, float]:
    """(scale, samples/s at it): bisection on log(scale) in [1/64, 4] (samples/s falls as prompts grow)."""
    lo, hi = math.log(1 / 64), math.log(4.0)
    best = (1.0, float("nan"))
    for _ in range(24):
        mid = (lo + hi) / 2
        got = offline_samples_per_s(benchmark, hardware, software, math.exp(mid), duration_s)
        log(f"scale {math.exp(mid):.4f}: {got:.2f} samples/s (target {target})")
        best = (math.exp(mid), got)
        if abs(got / target - 1) <= TOLERANCE:
            break
        lo, hi = (mid, hi) if got > target else (lo, mid)
    return best


def write(benchmark: str, scale: float, got: float, target: float, command: str) -> Path:
    """Rewrite the benchmark file's input_tokens mu and its fitted_to, and name the command."""
    path = resolve("benchmarks", benchmark, "prompt_scale", "benchmark")
    text = path.read_text()
    block = re.search(r"^input_tokens:\n(?:  .*\n)+", text, re.M)
    if block is None:
        raise SystemExit(f"{path}: no input_tokens block")
    old = block.group(0)
    log_mean = float(re.search(r"log_mean: ([-\d.e]+)", old).group(1))
    new = re.sub(r"^  mu: .*$", f"  mu: {log_mean + math.log(scale):.5f}", old, flags=re.M)
    new = re.sub(r"prompt_scale: [-\d.e]+", f"prompt_scale: {scale:.4f}", new) if "prompt_scale:" in new else \
        re.sub(r"(fitted_to: \{[^}]*)\}", rf"\1, prompt_scale: {scale:.4f}}}", new)
    note = (f" Prompt-length scale {scale:.4f} fitted by `{command}` on {date.today()}: simulated Offline "
            f"{got:.2f} samples/s against the published {target} (calibration row).")
    new = re.sub(r'( Prompt-length scale [^"]*\.)?"\n', note.replace("\\", "\\\\") + '"\n', new, count=1)
    path.write_text(text.replace(old, new))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpusim.calibrate.prompt_scale", description=__doc__.split("\n")[0])
    p.add_argument("--benchmark", default=ROW["benchmark"])
    p.add_argument("--hardware", default=ROW["hardware"])
    p.add_argument("--software", default=ROW["software"])
    p.add_argument("--target", type=float, default=ROW["target"], help="published Offline samples/s")
    p.add_argument("--duration", dest="duration_s", type=float, default=600.0)
    p.add_argument("--write", action="store_true", help="write the fitted mu into the benchmark file")
    args = p.parse_args(argv)
    scale, got = fit(args.benchmark, args.hardware, args.software, args.target, args.duration_s)
    print(f"prompt scale {scale:.4f}: {got:.2f} samples/s, ratio {got / args.target:.3f}")
    if args.write:
        command = "python -m gpusim.calibrate.prompt_scale --write"
        print(f"wrote {write(args.benchmark, scale, got, args.target, command)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
