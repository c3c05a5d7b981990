"""`gpusim validate mlperf`: the best result gpusim finds for each published MLPerf row, beside it.

Rows (shaped like the published-results CSV of docs/accuracy.md) name hardware in submitters' spellings;
`map_accelerator` maps them by rule to a profile and a system count, and the run uses exactly
`num_accelerators` GPUs. The benchmark name maps by `benchmark_id`. Units: `tokens/s` (all GPUs),
`tokens/s/GPU`, `samples/s` and `queries/s` (completed requests per second).

Software: the `round` column selects the software profile by rule: `trtllm-<round>` when that profile
exists, else the newest TensorRT-LLM profile not newer than the round (v4.1 → `trtllm-v5.1`, the oldest
one; v6.0/v6.1 → `trtllm`, the generation behind them); the status says when a round borrows a profile.

Prediction: what a submitter does, the deployment search (`gpusim.search.search_deployments`, the same
search `gpusim mlperf` runs) from the default deployment with the round's software, on exactly the row's
GPUs (a slice of a system keeps to aggregated instances inside it). Offline: the highest throughput;
Server and Interactive: the peak Poisson QPS whose run passes LoadGen's rules; the value is read in the
row's unit from the winning run. Distinct (hardware, GPUs, benchmark, scenario, unit, software) keys
run once each, `workers` at a time in separate processes.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from gpusim.analysis.published import PublishedRow, RowUnsupported, map_row
from gpusim.best import find_best
from gpusim.build import prepare
from gpusim.deploy import default_for, rule_deployment
from gpusim.errors import InputError
from gpusim.items import load_workload_model
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.parallel import parallel_imap
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.deployment import AnyDeployment, deployment_type
from gpusim.specs.experiment import Timing
from gpusim.specs.hardware import Hardware, load_hardware
from gpusim.specs.software import software_names
from gpusim.validate.csvfile import read_checked_csv

OLDEST_TRTLLM_ROUND = "v5.1"
"""Rounds up to this one run with `trtllm-v5.1`; later rounds with `trtllm` (TensorRT-LLM 1.2, v6.x)."""


def round_key(round_: str) -> tuple[int, ...]:
    """A round's name as a sortable version ('v6.1' -> (6, 1))."""
    return tuple(int(x) for x in re.findall(r"\d+", round_)) or (0,)


def software_for_round(round_: str) -> tuple[str, str]:
    """(software profile, note) for an MLPerf round (module docstring)."""
    name = f"trtllm-{round_}"
    if name in software_names():
        return name, ""
    if round_key(round_) <= round_key(OLDEST_TRTLLM_ROUND) and f"trtllm-{OLDEST_TRTLLM_ROUND}" in software_names():
        return f"trtllm-{OLDEST_TRTLLM_ROUND}", f"round {round_} runs with trtllm-{OLDEST_TRTLLM_ROUND} (oldest)"
    return "trtllm", "" if round_key(round_) > round_key(OLDEST_TRTLLM_ROUND) else f"round {round_}: trtllm"


def value_in_unit(summary: dict, unit: str, gpus: int) -> float:
    """The summary's throughput in the published unit."""
    if unit == "tokens/s":
        return float(summary["output_tokens_per_s"])
    if unit == "tokens/s/GPU":
        return float(summary["output_tokens_per_s"]) / gpus
    return float(summary["samples_per_s"])


def system_software(row: PublishedRow) -> str | None:
    """The serving stack the row's system profile names (another vendor's, e.g. vLLM on ROCm for MI355X), or
    None for systems that run the round's TensorRT-LLM."""
    return load_hardware(row.hardware).system.software


def software_for_row(row: PublishedRow) -> tuple[str, str]:
    """(software profile, note): the benchmark's own serving stack where it names one (its submissions all
    run it, e.g. vLLM for Qwen3-VL), else the system's own (`system_software`), else the round's
    (`software_for_round`)."""
    named = load_benchmark(row.benchmark).software
    if named is not None and named in software_names():
        return named, f"{row.benchmark} is served with {named}"
    own = system_software(row)
    if own is not None:
        return own, f"{row.hardware} runs {own}"
    return software_for_round(row.round)


def base_deployment(hw: Hardware, benchmark: str, gpus: int, software: str,
                    scenario: str | None = None) -> AnyDeployment:
    """The search's starting point: the default deployment with `software`, on at most `gpus` GPUs."""
    bench = load_benchmark(benchmark)
    model = load_workload_model(bench)
    dep = default_for(hw, bench, model, scenario)
    if gpus < hw.num_gpus and dep.mode != "aggregated":  # a slice of a system keeps to aggregated instances
        dep = rule_deployment(hw, model)
    update: dict = {"software": software}
    if gpus < hw.num_gpus:
        update["instances"] = max(1, gpus // dep.gpus_per_instance)
    return type(dep).model_validate(dep.model_copy(update=update).model_dump())


def predict_row(row: PublishedRow, software: str, duration_s: float | None = None,
                timing: Timing = "roofline") -> tuple[float, AnyDeployment]:
    """The searched best value of `row` in its unit (kernels timed by `timing`), and the deployment that gave it
    (the search is cached on disk, `gpusim.best`, so a repeated validation recalls it)."""
    try:
        hw = load_hardware(row.hardware, row.systems)
        dep = base_deployment(hw, row.benchmark, row.gpus, software, row.scenario)
        setup = prepare(row.hardware, row.benchmark, row.systems, dep, timing=timing)
        found, _ = find_best(setup, row.scenario, duration_s, gpus=row.gpus)
    except InputError as exc:
        raise RowUnsupported(exc.message) from None
    summary = {"output_tokens_per_s": found.tokens_per_s, "samples_per_s": found.samples_per_s}
    return value_in_unit(summary, row.unit, row.gpus), found.deployment


def _predict_key(args: tuple[PublishedRow, str, float | None, Timing]
                 ) -> tuple[tuple[float, AnyDeployment] | str, float]:
    """(`predict_row`, or the reason the row is unsupported; its wall seconds), for the process pool."""
    started = time.perf_counter()
    try:
        res: tuple[float, AnyDeployment] | str = predict_row(*args)
    except RowUnsupported as exc:
        res = str(exc)
    return res, time.perf_counter() - started


def _key(row: PublishedRow, software: str) -> tuple:
    return row.hardware, row.systems, row.gpus, row.benchmark, row.scenario, row.unit, software


def validate_mlperf(path: Path, duration_s: float = SUBMISSION_DURATION_S, workers: int = 1,
                    timing: Timing = "roofline", out: Path | None = None,
                    progress: Callable[[str], None] = lambda _: None) -> dict:
    """Predicted, published and ratio per row, and the MAPE over the supported rows (fractions); runs last
    `duration_s` (default: as long as submitters run, `SUBMISSION_DURATION_S`).

    With `out`, each distinct search is appended to `out/searches.jsonl` as it finishes, and searches already
    there are not run again: an interrupted validation resumes where it stopped."""
    need = {"round", "accelerator", "num_accelerators", "benchmark", "scenario", "value", "unit"}
    table = read_checked_csv(path, need, "a published-results CSV")
    mapped: list[tuple[dict, PublishedRow | None, str, str]] = []
    jobs: dict[tuple, tuple[PublishedRow, str, float | None, Timing]] = {}
    for r in table.to_dict("records"):
        row_out = {"system": str(r.get("system", "")), "benchmark": str(r["benchmark"]),
                   "scenario": str(r["scenario"]), "predicted": None, "published": float(r["value"]),
                   "ratio": None, "unit": str(r["unit"]), "round": str(r["round"])}
        try:
            row = map_row(r)
        except RowUnsupported as exc:
            row_out["status"] = f"unsupported: {exc}"
            mapped.append((row_out, None, "", ""))
            continue
        software, note = software_for_row(row)
        jobs.setdefault(_key(row, software), (row, software, duration_s, timing))
        mapped.append((row_out, row, software, note))
    log = out / "searches.jsonl" if out is not None else None
    got = _resumed(log, duration_s, timing)
    todo = sorted((k for k in jobs if _job_id(k) not in got), key=_longest_first)
    progress(f"validate mlperf: {len(jobs)} distinct searches, {len(jobs) - len(todo)} already in {log}" if log
             else f"validate mlperf: {len(jobs)} distinct searches")
    started = time.perf_counter()
    for done, (i, (res, wall)) in enumerate(parallel_imap(_predict_key, [jobs[k] for k in todo], workers), 1):
        key = todo[i]
        got[_job_id(key)] = res
        if log is not None:
            _append(log, {"key": _job_id(key), "duration_s": duration_s, "timing": timing, "wall_s": round(wall, 1),
                          "result": res if isinstance(res, str) else [res[0], res[1].model_dump(mode="json")]})
        what = res if isinstance(res, str) else f"{res[0]:,.1f} on {res[1].name}"
        progress(f"  [{done}/{len(todo)}, {time.perf_counter() - started:,.0f} s] {' '.join(map(str, key[:5]))}: "
                 f"{what} ({wall:,.0f} s)")
    rows = []
    for row_out, row, software, note in mapped:
        if row is not None:
            res = got[_job_id(_key(row, software))]
            if isinstance(res, str):
                row_out["status"] = f"unsupported: {res}"
            else:
                predicted, dep = res
                row_out.update(predicted=predicted, ratio=predicted / row.value, hardware=row.hardware,
                               gpus=row.gpus, deployment=dep.name, status="ok" + (f" ({note})" if note else ""))
        rows.append(row_out)
    ok = [r for r in rows if r["ratio"] is not None]
    mape = sum(abs(r["ratio"] - 1) for r in ok) / len(ok) if ok else None
    return {"rows": rows, "mape": mape, "rows_supported": len(ok), "rows_total": len(rows),
            "within_15pct": sum(abs(r["ratio"] - 1) <= 0.15 for r in ok)}


def _longest_first(key: tuple) -> tuple[int, bool]:
    """Order searches so that the long ones start first and none starts last on a busy pool: a rate search
    (Server, Interactive) on many GPUs simulates the most requests per run and walks the most runs (on 2 cores,
    392 s in the CSV's order against 372 s this way; 366 s with the searches' own wall times known)."""
    _, _, gpus, _, scenario, *_ = key
    return -gpus, scenario == "offline"


def _job_id(key: tuple) -> str:
    return "|".join(map(str, key))


def _resumed(log: Path | None, duration_s: float, timing: str) -> dict[str, tuple[float, AnyDeployment] | str]:
    """Searches an earlier run of the same settings wrote to `log` (a torn last line is ignored)."""
    got: dict[str, tuple[float, AnyDeployment] | str] = {}
    if log is None or not log.is_file():
        return got
    for line in log.read_text().splitlines():
        try:
            e = json.loads(line)
            if e["duration_s"] != duration_s or e["timing"] != timing:
                continue
            r = e["result"]
            got[e["key"]] = r if isinstance(r, str) else (float(r[0]), deployment_type(r[1]).model_validate(r[1]))
        except (ValueError, KeyError, TypeError, IndexError):
            continue
    return got


def _append(log: Path, entry: dict) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


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


__all__ = ["JSON_ROW_KEYS", "PublishedRow", "RowUnsupported", "base_deployment", "format_mlperf", "json_result",
           "map_row", "predict_row", "software_for_round", "validate_mlperf", "value_in_unit"]
