"""Generation and vendor comparisons on the searched default deployments, beside published ratios (compare only).

    python benchmarks/comparisons.py [reference/mlperf_calibration.csv]
        [--other reference/mlperf_other_vendors.csv reference/mlperf_held_out.csv] [--workers 2]
        [--out docs/comparisons.md]

Reads the shipped searched defaults (`hardware_profiles/defaults/`, written by `gpusim defaults --write`: each
entry is the deployment search's winner at 2,400 s with the v6 TensorRT-LLM profile) and writes one page:
each system's deployment and tokens/s per GPU per model and scenario, what each search cost in full-length
runs of its winner, and the per-GPU ratios between generations beside the ratio of the published medians
(over submitters, per system) of the same round. Published results only ever appear in the comparison
column: no prediction reads them. A second section sets other vendors' systems (AMD Instinct, Google TPU) beside
NVIDIA's, each on its own serving stack and with the evidence grade of its key numbers, and runs each such pair
on the first side's deployment and stack so that the hardware's share of the ratio shows (about 10 minutes on 2
cores).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

from gpusim.analysis.published import RowUnsupported, map_row
from gpusim.compare import Side, compare
from gpusim.defaults import read_defaults
from gpusim.errors import InputError
from gpusim.specs.experiment import RunSpec
from gpusim.specs.hardware import load_hardware, system_names
from gpusim.validate.csvfile import read_checked_csv
from gpusim.validate.datasets import HELD_OUT_CSV, MLPERF_CSV, OTHER_VENDORS_CSV, cited

PAIRS = (("b300-hgx", "b200-hgx"), ("gb300-nvl72", "gb200-nvl72"), ("gb300-nvl72", "b300-hgx"),
         ("vr-nvl72", "gb300-nvl72"), ("b200-hgx", "h200-hgx"), ("h200-hgx", "h100-hgx"))
"""Generations side by side, and GB300 beside B300: the same Blackwell Ultra die at 1,400 W and 1,100 W with a
Grace or an x86 host, so their published ratio shows what the die alone does not."""
CROSS_VENDOR = (("mi355x-platform", "b200-hgx"), ("mi355x-platform", "b300-hgx"), ("helios-mi455x", "gb300-nvl72"),
                ("helios-mi455x", "vr-nvl72"), ("tpu7x-cube", "gb300-nvl72"), ("tpu7x-cube", "helios-mi455x"))
"""Another vendor's system beside the NVIDIA one it is sold against (and the two rack-scale challengers)."""
MODELS = {"deepseek-r1": "deepseek-r1", "gpt-oss-120b": "gpt-oss-120b", "llama2-70b": "llama2-70b"}
ROUND = "v6.1"
TOLERANCE = 0.10
"""The issue's target: a predicted generation ratio within 10% of the published one."""


def published_medians(*csvs: Path) -> dict[tuple[str, str, str], float]:
    """Median tokens/s per GPU over the round's submitters, per (hardware, benchmark, scenario)."""
    records = [r for csv in csvs for r in read_checked_csv(
        csv, {"round", "accelerator", "num_accelerators", "benchmark", "scenario", "value", "unit"},
        "a published-results CSV").to_dict("records")]
    by: dict[tuple[str, str, str], list[float]] = {}
    for r in records:
        try:
            row = map_row(r)
        except RowUnsupported:
            continue
        if row.round == ROUND and row.unit.startswith("tokens"):
            by.setdefault((row.hardware, row.benchmark, row.scenario), []).append(row.tokens_per_s_per_gpu)
    return {k: statistics.median(v) for k, v in by.items()}


Key = tuple[str, str, str]
"""(system, model, scenario)."""


class Predicted(NamedTuple):
    """One searched default: tokens/s per GPU, its deployment and stack, what the search cost in runs of its
    winner, and its peak valid QPS per GPU (Server)."""

    tokens_per_s_per_gpu: float
    deployment: str
    cost: float | None
    peak_qps_per_gpu: float | None
    software: str


class Ratio(NamedTuple):
    """Two systems' searched defaults on one model and scenario, and their ratios, predicted and published."""

    a: str
    b: str
    model: str
    scenario: str
    pa: Predicted
    pb: Predicted
    predicted: float
    published: float | None


def ratios(pairs: tuple[tuple[str, str], ...], pred: dict[Key, Predicted], pub: dict[Key, float]) -> Iterator[Ratio]:
    """Every pair, model and scenario that both systems have a searched default for."""
    for a, b in pairs:
        for model in MODELS:
            for scenario in ("offline", "server"):
                pa, pb = pred.get((a, model, scenario)), pred.get((b, model, scenario))
                if pa is None or pb is None:
                    continue
                qa, qb = pub.get((a, model, scenario)), pub.get((b, model, scenario))
                yield Ratio(a, b, model, scenario, pa, pb, pa.tokens_per_s_per_gpu / pb.tokens_per_s_per_gpu,
                            qa / qb if qa and qb else None)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def predicted() -> dict[Key, Predicted]:
    """Each shipped system's searched defaults, per (system, model, scenario)."""
    out = {}
    for system in system_names():
        table = read_defaults(system)
        for model, by in (table.entries if table else {}).items():
            for scenario, e in by.items():
                cost = e.search_wall_s / e.run_wall_s if e.search_wall_s and e.run_wall_s else None
                peak = e.peak_qps / e.searched_gpus if e.peak_qps else None
                out[(system, model, scenario)] = Predicted(e.tokens_per_s_per_gpu, e.deployment.name, cost, peak,
                                                           table.software)
    return out


def evidence(system: str) -> str:
    """The grades of what sets a system's speed: dense FLOPS, HBM bandwidth, scale-up bandwidth (worst of each)."""
    hw = load_hardware(system)
    flops = max(s.grade for s in hw.gpu.dense_tflops.values())
    return f"FLOPS {flops}, HBM {hw.gpu.hbm_bandwidth_tbps.grade}, scale-up {hw.nvlink.bandwidth_gbps_per_dir.grade}"


def held_ratio(pair_model: tuple[str, str, str]) -> float | None:
    """First / second steady tokens/s per GPU, Offline, both on the first side's searched deployment and stack
    (`gpusim compare A B --same-deployment`): what the hardware alone changes. None where it cannot run there."""
    a, b, model = pair_model
    sides = [Side(s, RunSpec(hardware=s, benchmark=model, scenario="offline"), "benchmarks/comparisons.py")
             for s in (a, b)]
    try:
        ratio = compare(sides, same_deployment=True).ratio(1, "steady_output_tokens_per_s_per_gpu")
    except InputError:  # the first side's deployment does not fit the second (HBM) or its domain
        return None
    return 1 / ratio if ratio else None


def held_ratios(workers: int) -> dict[Key, float | None]:
    """`held_ratio` for every cross-vendor pair and model, `workers` at once."""
    keys = [(a, b, m) for a, b in CROSS_VENDOR for m in MODELS]
    with ProcessPoolExecutor(workers) as pool:
        return dict(zip(keys, pool.map(held_ratio, keys), strict=True))


def cross_vendor(pub: dict[Key, float], pred: dict[Key, Predicted], held: dict[Key, float | None]) -> list[str]:
    """The cross-vendor section: each pair's per-GPU ratio with both sides' deployment, stack and grades, and the
    ratio with the deployment and stack held (`held`, Offline)."""
    systems = sorted({s for pair in CROSS_VENDOR for s in pair})
    lines = ["", "## Across vendors", "",
             "Other vendors' systems on the same questions, each on its own searched deployment and serving stack "
             "(the stack its vendor's submissions or recipes use; `software` in the system profile). Their stacks "
             "are not measured: `vllm-rocm` and `vllm-tpu` carry vLLM's constants at grade D (docs/own-hardware.md), "
             "so a ratio here says what the hardware numbers and the modelled mechanisms give (FLOPS per precision, "
             "HBM, the scale-up fabric's topology, TPU7x's lack of FP4, XLA's compiled-shape padding), not what "
             "each vendor's software reaches. Grades: A datasheet, B derived from one, C secondary report, D assumed.",
             "", "Each side on its own stack mixes hardware and software: the NVIDIA side's TensorRT-LLM constants "
             "are fitted on measured rows, the others' are vLLM's carried over. The column *held* separates them: "
             "both sides run the first side's searched Offline deployment and stack (`gpusim compare A B "
             "--same-deployment`, steady tokens/s per GPU over a converged run), so only the hardware differs; "
             "'-' where that deployment does not fit the second system.",
             "", "| system | stack | evidence (worst grade) |", "|---|---|---|"]
    stacks = {s: p.software for (s, _, _), p in pred.items()}
    lines += [f"| {s} | {stacks.get(s, '-')} | {evidence(s)} |" for s in systems]
    lines += ["", "| ratio | model | scenario | deployment (first) | deployment (second) | predicted | held "
              "| published | predicted / published |", "|---|---|---|---|---|---|---|---|---|"]
    for r in ratios(CROSS_VENDOR, pred, pub):
        same = held.get((r.a, r.b, r.model)) if r.scenario == "offline" else None
        rel = r.predicted / r.published if r.published else None
        lines.append(f"| {r.a} / {r.b} | {r.model} | {r.scenario} | {r.pa.deployment} ({r.pa.software}) | "
                     f"{r.pb.deployment} ({r.pb.software}) | {r.predicted:.2f} | {_f(same)} | {_f(r.published)} | "
                     f"{_f(rel)} |")
    return lines


def page(csv: Path, others: list[Path], workers: int = 2) -> str:
    pub, pred = published_medians(csv, *others), predicted()
    lines = ["# Generation comparisons on searched deployments", "",
             f"Written by `python benchmarks/comparisons.py {cited(csv)} --other {' '.join(map(cited, others))}`. "
             "Predicted: the searched default of each system (`hardware_profiles/defaults/`, `gpusim defaults "
             "--write`; 2,400 s runs, on the system's own serving stack: TensorRT-LLM v6 on NVIDIA's), tokens/s "
             "per GPU as LoadGen reports it (Server: in expectation over the last-scheduled query's output length, "
             f"docs/mlperf.md). Published: the median over {ROUND} submitters of each system (compare only).", "",
             "## Each system's searched deployment", "",
             "| system | model | scenario | deployment | tokens/s/GPU | search cost (runs of its winner) |",
             "|---|---|---|---|---|---|"]
    for (system, model, scenario), p in sorted(pred.items()):
        lines.append(f"| {system} | {model} | {scenario} | {p.deployment} | {p.tokens_per_s_per_gpu:,.0f} | "
                     f"{'-' if p.cost is None else f'{p.cost:.1f}'} |")
    lines += ["", "## Per-GPU ratios between generations", "",
              "The ratios come from the GPU profiles (dense rates per precision, the softmax's exponential rate in "
              "prompt attention (docs/design.md, *Prompt attention*), HBM capacity and bandwidth, NVLink and NIC "
              "generations) and, on Blackwell and Blackwell Ultra, the power limit: a step takes at least its "
              "tensor-core energy over the TDP, at one fitted energy per FLOP for both (docs/design.md, *The power "
              "limit*); Hopper and Rubin have no such limit in the model.", "",
              "Server's LoadGen tokens/s ends at the completion of the last-scheduled query, so with DeepSeek-R1's "
              "20k-token tail one run's figure moves by a few percent with which request runs last (the table "
              "gives it in expectation over that draw); the ratio of the peak valid QPS per GPU (the rate each "
              "system sustains) is given beside it. GB300 beside B300 compares one die at two TDPs and hosts: there "
              "the model differs only by the power limit, HBM and NVLink domain.", "",
              "The same ratios on measured steps rather than published medians (setups the silicon sample measured "
              "on two generations, the same engine version on both) are in docs/validation/generations/README.md "
              "(`gpusim validate silicon --generations`).", "",
              "| ratio | model | scenario | predicted | peak QPS ratio | published | predicted / published "
              "| within 10% |",
              "|---|---|---|---|---|---|---|---|"]
    for r in ratios(PAIRS, pred, pub):
        qa, qb = r.pa.peak_qps_per_gpu, r.pb.peak_qps_per_gpu
        rel = r.predicted / r.published if r.published else None
        lines.append(f"| {r.a} / {r.b} | {r.model} | {r.scenario} | {r.predicted:.2f} | "
                     f"{_f(qa / qb if qa and qb else None)} | {_f(r.published)} | {_f(rel)} | "
                     f"{'-' if rel is None else ('yes' if abs(rel - 1) <= TOLERANCE else 'no')} |")
    return "\n".join(lines + cross_vendor(pub, pred, held_ratios(workers))) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("published", type=Path, nargs="?", default=MLPERF_CSV,
                    help="CSV shaped like mlperf_calibration.csv (default: the repository's reference/ copy)")
    ap.add_argument("--other", type=Path, nargs="+", default=[OTHER_VENDORS_CSV, HELD_OUT_CSV],
                    help="published results no fit reads, shaped alike: other vendors' and NVIDIA's beyond the "
                         "calibration set (default: the repository's reference/ copies)")
    ap.add_argument("--workers", type=int, default=2, help="held-deployment runs at once (default 2)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "comparisons.md")
    args = ap.parse_args()
    text = page(args.published, args.other, args.workers)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
