"""`gpusim validate mlperf`: the best result gpusim finds for each published MLPerf row, beside it.

Rows (shaped like ../shared/reference/mlperf_calibration.csv) name hardware in submitters' spellings;
`map_accelerator` maps them by rule to a profile and a system count, and the run uses exactly
`num_accelerators` GPUs. The benchmark name maps by `benchmark_id`. Units: `tokens/s` (all GPUs),
`tokens/s/GPU`, `samples/s` and `queries/s` (completed requests per second).

Software: the `round` column selects the software profile by rule: `trtllm-<round>` when that profile
exists, else the newest TensorRT-LLM profile not newer than the round (v4.1 → `trtllm-v5.1`, the oldest
one; v6.0/v6.1 → `trtllm`, the generation behind them); the status says when a round borrows a profile.

Offline: the best (highest predicted value) of a documented small set of deployments:
  1. the default deployment (gpusim/deploy.py: smallest power-of-two TP group with weights ≤ half HBM);
  2. the same with twice the TP group (EP and batch limits scaled alike), when it fits the GPUs of the
     row and the NVLink domain;
  3. the same with half the TP group, when the weights still fit.
Server and Interactive: the peak Poisson QPS whose run passes LoadGen's rules (`gpusim.search.peak_qps`)
with deployment 1, reported in the row's unit from that run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

import gpusim
from gpusim.analysis.published import PublishedRow, RowUnsupported, map_row
from gpusim.build import prepare
from gpusim.deploy import default_deployment
from gpusim.errors import InputError
from gpusim.search import peak_qps
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware, load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import software_names

OLDEST_TRTLLM_ROUND = "v5.1"
"""Rounds up to this one run with `trtllm-v5.1`; later rounds with `trtllm` (TensorRT-LLM 1.2, v6.x)."""


def _round_key(round_: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", round_)) or (0,)


def software_for_round(round_: str) -> tuple[str, str]:
    """(software profile, note) for an MLPerf round (module docstring)."""
    name = f"trtllm-{round_}"
    if name in software_names():
        return name, ""
    if _round_key(round_) <= _round_key(OLDEST_TRTLLM_ROUND) and f"trtllm-{OLDEST_TRTLLM_ROUND}" in software_names():
        return f"trtllm-{OLDEST_TRTLLM_ROUND}", f"round {round_} runs with trtllm-{OLDEST_TRTLLM_ROUND} (oldest)"
    return "trtllm", "" if _round_key(round_) > _round_key(OLDEST_TRTLLM_ROUND) else f"round {round_}: trtllm"


def value_in_unit(summary: dict, unit: str, gpus: int) -> float:
    """The summary's throughput in the published unit."""
    if unit == "tokens/s":
        return float(summary["output_tokens_per_s"])
    if unit == "tokens/s/GPU":
        return float(summary["output_tokens_per_s"]) / gpus
    return float(summary["samples_per_s"])


def candidate_deployments(hw: Hardware, benchmark: str, gpus: int, software: str) -> list[Deployment]:
    """The documented Offline candidates (module docstring), each sized to exactly `gpus` GPUs."""
    model = load_model(load_benchmark(benchmark).model)
    base = default_deployment(hw, model)
    out = []
    for factor in (1.0, 2.0, 0.5):
        tp = int(base.tp * factor)
        if tp < 1 or tp > min(gpus, hw.domain_gpus) or (factor != 1.0 and tp == base.tp):
            continue
        scale = tp / base.tp
        ep = max(1, int(base.ep * scale)) if model.moe is not None else 1
        dep = base.model_copy(update={
            "name": f"{base.name}x{factor:g}", "tp": tp, "ep": ep, "software": software,
            "attention_dp": base.attention_dp and tp > 1, "instances": max(1, gpus // tp),
            "max_batch_size": max(1, int(base.max_batch_size * scale)) if base.attention_dp else base.max_batch_size,
            "max_num_tokens": max(1, int(base.max_num_tokens * scale)) if base.attention_dp else base.max_num_tokens,
        })
        out.append(Deployment.model_validate(dep.model_dump()))
    return out


def predict_offline(row: PublishedRow, software: str, samples: int | None = None) -> tuple[float, str]:
    """Best Offline value over the candidates, and the name of the deployment that gave it."""
    hw = load_hardware(row.hardware, row.systems)
    best: tuple[float, str] | None = None
    errors = []
    for dep in candidate_deployments(hw, row.benchmark, row.gpus, software):
        try:
            s = gpusim.run(row.hardware, row.benchmark, "offline", systems=row.systems, deployment=dep,
                           samples=samples).summary
        except InputError as exc:
            errors.append(f"{dep.name}: {exc.message}")
            continue
        v = value_in_unit(s, row.unit, row.gpus)
        if best is None or v > best[0]:
            best = (v, dep.name)
    if best is None:
        raise RowUnsupported("no candidate deployment fits: " + "; ".join(errors))
    return best


def predict_server(row: PublishedRow, software: str) -> tuple[float, str]:
    """Peak valid Server/Interactive value of the default deployment, from `gpusim.search.peak_qps`."""
    hw = load_hardware(row.hardware, row.systems)
    dep = candidate_deployments(hw, row.benchmark, row.gpus, software)[0]
    found = peak_qps(prepare(row.hardware, row.benchmark, row.systems, dep), row.scenario)
    if found.search.peak <= 0:
        raise RowUnsupported(f"no QPS of {dep.name} is VALID: {found.limit}")
    return value_in_unit(found.trial.result.summary, row.unit, row.gpus), dep.name


def validate_mlperf(path: Path, samples: int | None = None) -> dict:
    """Predicted, published and ratio per row, and the MAPE over the supported rows (fractions)."""
    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError) as exc:
        raise InputError(str(path), "PATH", f"cannot read a CSV: {exc}") from None
    need = {"round", "accelerator", "num_accelerators", "benchmark", "scenario", "value", "unit"}
    missing = sorted(need - set(table.columns))
    if missing:
        raise InputError(str(path), ", ".join(missing), "missing columns of a published-results CSV")
    cache: dict[tuple, tuple[float, str] | str] = {}
    rows = []
    for r in table.to_dict("records"):
        out = {"system": str(r.get("system", "")), "benchmark": str(r["benchmark"]),
               "scenario": str(r["scenario"]), "predicted": None, "published": float(r["value"]),
               "ratio": None, "unit": str(r["unit"]), "round": str(r["round"])}
        try:
            row = map_row(r)
            software, note = software_for_round(row.round)
            key = (row.hardware, row.systems, row.gpus, row.benchmark, row.scenario, row.unit, software)
            if key not in cache:
                try:
                    if row.scenario == "offline":
                        cache[key] = predict_offline(row, software, samples)
                    else:
                        cache[key] = predict_server(row, software)
                except RowUnsupported as exc:
                    cache[key] = str(exc)
            got = cache[key]
            if isinstance(got, str):
                raise RowUnsupported(got)
            predicted, dep_name = got
            out.update(predicted=predicted, ratio=predicted / row.value, hardware=row.hardware, gpus=row.gpus,
                       deployment=dep_name, status="ok" + (f" ({note})" if note else ""))
        except RowUnsupported as exc:
            out["status"] = f"unsupported: {exc}"
        rows.append(out)
    ok = [r for r in rows if r["ratio"] is not None]
    mape = sum(abs(r["ratio"] - 1) for r in ok) / len(ok) if ok else None
    return {"rows": rows, "mape": mape, "rows_supported": len(ok), "rows_total": len(rows),
            "within_15pct": sum(abs(r["ratio"] - 1) <= 0.15 for r in ok)}


def format_mlperf(result: dict) -> str:
    """A markdown table of `validate_mlperf`'s result."""
    lines = ["| round | system | benchmark | scenario | published | predicted | ratio | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        pred = "-" if r["predicted"] is None else f"{r['predicted']:,.1f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['round']} | {r['system']} | {r['benchmark']} | {r['scenario']} | "
                     f"{r['published']:,.1f} {r['unit']} | {pred} | {ratio} | {r['status']} |")
    mape = result["mape"]
    lines.append(f"\nMAPE {'-' if mape is None else f'{100 * mape:.1f}%'} over {result['rows_supported']} of "
                 f"{result['rows_total']} rows; {result['within_15pct']} within ±15%")
    return "\n".join(lines)


JSON_ROW_KEYS = ("system", "benchmark", "scenario", "predicted", "published", "ratio", "status")


def json_result(result: dict) -> dict:
    """The `--json` object: exactly the issue's keys."""
    return {"rows": [{k: r[k] for k in JSON_ROW_KEYS} for r in result["rows"]], "mape": result["mape"],
            "rows_supported": result["rows_supported"]}


__all__ = ["JSON_ROW_KEYS", "PublishedRow", "RowUnsupported", "candidate_deployments", "format_mlperf", "json_result",
           "map_row", "predict_server", "software_for_round", "validate_mlperf", "value_in_unit"]
