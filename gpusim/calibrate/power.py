"""Fit the Blackwell tensor cores' energy per FLOP, which sets the power limit, on MLPerf Llama 2 70B Offline.

    python -m gpusim.calibrate.power [CSV] [--write]

NVIDIA publishes no energy per FLOP, and the spec sheets' dense rates assume clocks that a GPU at its TDP does
not hold under dense NVFP4 GEMMs: the v6.1 Llama 2 70B Offline results per kW of TDP are the same on B200
(1,000 W) and B300 (1,100 W), although B300's NVFP4 peak is 1.56x B200's. The power limit (`perf.step`) models
that: a step takes at least its tensor-core joules over the TDP.

One energy per dense NVFP4 FLOP serves Blackwell and Blackwell Ultra (both TSMC 4NP; Blackwell Ultra's extra
NVFP4 rate is more FP4 datapath at the same energy per operation, an assumption). An FP8 FLOP costs 2x and a
BF16 FLOP 4x (B200's dense rates halve per precision step at the same power), each capped so that no saturated
GEMM in aiconfigurator-core's measured kernel tables of a Blackwell system would draw more than its TDP (B200's
BF16 GEMMs reach 1.5 PFLOP/s at 1,000 W, which caps BF16 at about 3.3x).

The fit picks the NVFP4 energy that minimises the squared log error of the predicted tokens/s per GPU against
the round's Llama 2 70B Offline results (the median over submitters per system), each system on its searched
default deployment (`hardware_profiles/defaults/`) on the result's GPUs, with `--duration` runs: Llama 2 is
the benchmark whose dense NVFP4 work draws the most power per token. `--write` puts the result into the GPU
profiles of both architectures. Hopper and Rubin have no fitted energy: the power limit is not modelled there.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from datetime import date
from functools import partial
from pathlib import Path

from gpusim.analysis.published import map_system, read_published
from gpusim.build import make_setup
from gpusim.calibrate.kernels import SYSTEMS, load_tables, saturated_gemm_rate
from gpusim.parallel import parallel_map
from gpusim.perf.kernel_tables import aic_data_dir
from gpusim.search import trial
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.hardware import PROFILES, Hardware, load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.sourced import Sourced
from gpusim.validate.datasets import MLPERF_CSV, cited
from gpusim.validate.mlperf import base_deployment

ARCHITECTURES = ("blackwell", "blackwell_ultra")
BENCHMARK, SCENARIO, ROUND = "llama2-70b", "offline", "v6.1"
PRECISION_COST = {"fp4": 1.0, "fp8": 2.0, "bf16": 4.0}
"""Energy per FLOP relative to NVFP4: B200's dense rates halve from FP4 to FP8 to BF16 at the same power."""
NOTE = ("board power per FLOP at the TDP, HBM, SRAM and static power folded in; one value for Blackwell and "
        "Blackwell Ultra (TSMC 4NP, equal per operation: an assumption); docs/design.md, The power limit")
BOUNDS_PJ = (0.05, 1.0)
"""The search interval for the NVFP4 energy, picojoules per FLOP (1 pJ caps a 1,000 W GPU at 1 PFLOP/s)."""


def targets(csv: Path) -> dict[tuple[str, int], float]:
    """Published tokens/s per GPU per (system, GPUs) (median over the round's submitters) of Blackwell systems."""
    by: dict[tuple[str, int], list[float]] = {}
    for row in read_published(csv):
        if (row.round, row.benchmark, row.scenario) == (ROUND, BENCHMARK, SCENARIO):
            by.setdefault((row.hardware, row.gpus), []).append(row.tokens_per_s_per_gpu)
    return {key: statistics.median(v) for key, v in sorted(by.items())
            if load_hardware(key[0]).gpu.architecture in ARCHITECTURES}


def with_energy(hw: Hardware, fp4_pj: float, bounds: dict[str, tuple[float, str]]) -> Hardware:
    """`hw` with tensor-core energies of `fp4_pj` per NVFP4 FLOP and the others as `energies` sets them."""
    energy = {d: Sourced(value=v, source="candidate", grade="D") for d, (v, _) in energies(fp4_pj, bounds).items()}
    return hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"tensor_pj_per_flop": energy})})


def predicted(job: tuple[tuple[str, int], float], duration_s: float, bounds: dict[str, tuple[float, str]]) -> float:
    """Tokens/s per GPU of a system's searched default on `gpus` of its GPUs at an NVFP4 energy of `fp4_pj` (a
    process-pool job)."""
    (system, gpus), fp4_pj = job
    shipped = load_hardware(system)
    bench = load_benchmark(BENCHMARK)
    dep = base_deployment(shipped, BENCHMARK, gpus, "trtllm", SCENARIO)
    setup = make_setup(with_energy(shipped, fp4_pj, bounds), bench, load_model(bench.model), dep, system)
    t = trial(setup, SCENARIO, duration_s=duration_s)
    return t.tokens_per_s / t.result.summary["num_gpus"]


def loss(fp4_pj: float, goal: dict[tuple[str, int], float], duration_s: float, workers: int,
         bounds: dict[str, tuple[float, str]]) -> tuple[float, dict[str, float]]:
    """Σ log²(predicted / published) over the systems, and each system's predicted / published."""
    got = parallel_map(partial(predicted, duration_s=duration_s, bounds=bounds), [(s, fp4_pj) for s in goal],
                       workers)
    ratios = {f"{s} x{n}": g / goal[(s, n)] for (s, n), g in zip(goal, got, strict=True)}
    return sum(math.log(r) ** 2 for r in ratios.values()), ratios


def fit(goal: dict[tuple[str, int], float], duration_s: float, workers: int, bounds: dict[str, tuple[float, str]],
        steps: int = 14) -> tuple[float, dict[str, float]]:
    """Golden-section search of log(energy) over BOUNDS_PJ, up to what the measured NVFP4 GEMMs allow (`bounds`);
    the best energy seen and its ratios."""
    lo, hi = math.log(BOUNDS_PJ[0]), math.log(min(BOUNDS_PJ[1], bounds["fp4"][0]))
    g = (math.sqrt(5) - 1) / 2
    seen: dict[float, tuple[float, dict[str, float]]] = {}

    def f(x: float) -> float:
        if x not in seen:
            seen[x] = loss(math.exp(x), goal, duration_s, workers, bounds)
            print(f"  {math.exp(x):.4f} pJ: loss {seen[x][0]:.5f}, predicted/published "
                  + ", ".join(f"{s} {r:.3f}" for s, r in seen[x][1].items()), flush=True)
        return seen[x][0]

    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    for _ in range(steps):
        if f(a) < f(b):
            hi, b = b, a
            a = hi - g * (hi - lo)
        else:
            lo, a = a, b
            b = lo + g * (hi - lo)
    best = min(seen, key=lambda x: seen[x][0])
    return math.exp(best), seen[best][1]


def measured_bounds() -> dict[str, tuple[float, str]]:
    """Per precision, the highest energy per FLOP (pJ) that lets every Blackwell system's measured saturated GEMMs
    (aiconfigurator-core's trtllm tables) run within its TDP, and the system that sets it."""
    data = aic_data_dir()
    if data is None:
        raise SystemExit("the precision caps read aiconfigurator-core's kernel tables: pip install -e '.[calibration]'")
    bounds: dict[str, tuple[float, str]] = {}
    for system in SYSTEMS:
        mapped = map_system(system)
        hw = load_hardware(mapped[0]) if mapped else None
        if hw is None or hw.gpu.architecture not in ARCHITECTURES:
            continue
        for name, df in load_tables(data, system).items():
            rate = saturated_gemm_rate(df, hw) if df["op"].iloc[0] == "gemm" else None
            if rate:
                d, pj = name.removeprefix("gemm_"), hw.gpu.tdp_w.value / rate * 1e12
                if d in PRECISION_COST and (d not in bounds or pj < bounds[d][0]):
                    bounds[d] = (pj, f"{system} {rate / 1e15:.2f} PFLOP/s at {hw.gpu.tdp_w.value:,.0f} W")
    return bounds


def energies(fp4_pj: float, bounds: dict[str, tuple[float, str]],
             fitted: str = "fitted") -> dict[str, tuple[float, str]]:
    """pJ per FLOP and how it was set, per precision: NVFP4's `fp4_pj` (`fitted` says how), FP8 and BF16 at
    PRECISION_COST x NVFP4, within the bounds."""
    out = {"fp4": (fp4_pj, fitted)}
    for d, c in PRECISION_COST.items():
        if d == "fp4":
            continue
        cap, by = bounds.get(d, (math.inf, ""))
        out[d] = ((cap, f"capped so that the measured saturated {d} GEMMs ({by}, aiconfigurator-core trtllm "
                        f"tables) fit within the TDP; {c:g}x NVFP4 would not") if c * fp4_pj > cap else
                  (c * fp4_pj, f"{c:g}x the NVFP4 energy (the dense {d} rate of B200 is 1/{c:g} of its NVFP4 rate "
                               f"at the same power; within the measured bound, {by})"))
    return out


def write(fp4_pj: float, ratios: dict[str, float], duration_s: float, csv: Path,
          bounds: dict[str, tuple[float, str]]) -> list[Path]:
    """Replace the `tensor_pj_per_flop` block of every GPU profile of ARCHITECTURES."""
    today = date.today().isoformat()
    errors = ", ".join(f"{s} {r:.2f}" for s, r in ratios.items())
    where = cited(csv)
    fitted = (f"fitted by `python -m gpusim.calibrate.power --write` on {today}: {ROUND} {BENCHMARK} Offline "
              f"medians in {where}, searched defaults, {duration_s:.0f} s runs (predicted/published {errors})")
    lines = ["tensor_pj_per_flop:"]
    for d, (value, how) in energies(fp4_pj, bounds, fitted).items():
        lines += [f"  {d}:", f"    value: {value:.4f}", f"    source: \"{how}\"", "    grade: D",
                  f"    note: \"{NOTE}\""]
    written = []
    for path in sorted((PROFILES / "gpus").glob("*.yaml")):
        text = path.read_text()
        if not re.search(rf"^architecture: ({'|'.join(ARCHITECTURES)})$", text, re.M):
            continue
        text = re.sub(r"^tensor_pj_per_flop:\n(?:  .*\n)*", "", text, flags=re.M).rstrip("\n")
        path.write_text(text + "\n" + "\n".join(lines) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", type=Path, default=MLPERF_CSV)
    ap.add_argument("--duration", type=float, default=600.0, help="simulated seconds per run (LoadGen's minimum)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="write the fitted energy into the GPU profiles")
    args = ap.parse_args(argv)
    goal, bounds = targets(args.csv), measured_bounds()
    print(f"published {ROUND} {BENCHMARK} Offline tokens/s/GPU: "
          + ", ".join(f"{s} x{n} {v:,.0f}" for (s, n), v in goal.items()), flush=True)
    print("measured bounds, pJ per FLOP: " + ", ".join(f"{d} {v:.3f} ({by})" for d, (v, by) in bounds.items()))
    best, ratios = fit(goal, args.duration, max(1, args.workers), bounds)
    print(f"fitted: {best:.4f} pJ per NVFP4 FLOP; predicted/published "
          + ", ".join(f"{s} {r:.3f}" for s, r in ratios.items()))
    if args.write:
        for path in write(best, ratios, args.duration, args.csv, bounds):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
