"""`gpusim calibrate`: fit a software profile's constants, op level then request level, and write them back.

Procedure (DESIGN §5; every number lands in hardware_profiles/software/<profile>.yaml with this command):

1. **Op level** (needs the optional `aiconfigurator-core` tables, `gpusim.calibrate.kernels`): per system,
   each op family is fitted alone on the constants it depends on (`kernels.RELEVANT`), GEMMs first (their
   shape curve, bandwidth and per-dtype efficiencies), then attention, MoE (relative to the GEMM
   efficiency of its dtype) and collectives. A constant's value per GPU architecture is the median over
   that architecture's systems and families. The base values are Blackwell Ultra's (so Rubin, which has
   no tables, inherits them: grade D by rule); Hopper and Blackwell differ through `overrides`.
2. **Request level** on the silicon sample: a fixed-seed random 30% of the rows is held out. On (a
   sample of) the profile's training rows the real engine runs once with the op-level constants; the
   per-step overhead `s` and per-request front-end time `r` then follow in closed form from the
   first-order surrogate TPOT(s) = TPOT₀ + Δs, TTFT(s, r) = TTFT₀ + Δs + Δr (one step before the first
   token): each is the 1/measured-weighted median of the residuals, which minimises MAPE exactly.
3. The held-out rows of the profile's backend run in the real engine with the final constants; the fit
   (surrogate, training rows) and held-out MAPE go into the profile's `calibration:` block.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gpusim.specs.software import SOFTWARE, SoftwareProfile, load_software

HOLDOUT = 0.3
SEED = 0
BASE_ARCH = "blackwell_ultra"
"""Architecture whose op-level values are the profile's base (Rubin inherits them)."""
STAGES: tuple[tuple[str, ...], ...] = (
    ("gemm_bf16",),
    ("gemm_fp8", "gemm_fp4"),
    ("context_attention", "mla_context", "generation_attention", "mla_generation", "moe", "allreduce",
     "alltoall"),
)
"""Families fitted in order; each stage starts from the medians of the stages before."""


# ---- statistics ------------------------------------------------------------------------------------------
def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The x minimising Σ w·|v − x| (lower weighted median)."""
    order = np.argsort(values)
    v, w = np.asarray(values, float)[order], np.asarray(weights, float)[order]
    cum = np.cumsum(w)
    return float(v[np.searchsorted(cum, 0.5 * cum[-1])])


def mape(pred: np.ndarray, meas: np.ndarray) -> float | None:
    """Mean |pred − meas| / meas over finite pairs (a fraction); None when there are none."""
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    return float(np.mean(np.abs(pred[ok] - meas[ok]) / meas[ok])) if ok.any() else None


def split_rows(rows: pd.DataFrame, holdout: float = HOLDOUT, seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training, held-out) rows: a seeded random `holdout` fraction held out, both in file order."""
    held = rows.sample(frac=holdout, random_state=seed).sort_index()
    return rows.drop(held.index), held


def fit_overheads(ttft0: np.ndarray, tpot0: np.ndarray, ttft: np.ndarray, tpot: np.ndarray,
                  s0: float, r0: float) -> tuple[float, float]:
    """(s, r) in ms: per-step and per-request overheads minimising TPOT then TTFT MAPE under the surrogate
    TPOT = TPOT₀ + (s − s0), TTFT = TTFT₀ + (s − s0) + (r − r0); both kept ≥ 0. Inputs in ms."""
    ok = np.isfinite(ttft0) & np.isfinite(tpot0) & (ttft > 0) & (tpot > 0)
    ds = weighted_median(tpot[ok] - tpot0[ok], 1 / tpot[ok])
    s = max(s0 + ds, 0.0)
    dr = weighted_median(ttft[ok] - ttft0[ok] - (s - s0), 1 / ttft[ok])
    return s, max(r0 + dr, 0.0)


# ---- op level ------------------------------------------------------------------------------------------------
def with_values(sw: SoftwareProfile, values: dict[str, float], source: str) -> SoftwareProfile:
    """`sw` with `values` as grade-D fitted constants (`source` says how)."""
    from gpusim.specs.sourced import Sourced

    return sw.model_copy(update={k: Sourced(value=round(v, 4), source=source, grade="D") for k, v in values.items()})


def fit_ops(sw: SoftwareProfile, backend: str = "trtllm", max_rows: int = 800,
            systems: Iterable[str] | None = None) -> tuple[dict[str, dict[str, float]], dict[str, dict]]:
    """Op-level constants per architecture (medians, see the module docstring) and per-system family MAPE."""
    from gpusim.calibrate import kernels
    from gpusim.specs.hardware import load_hardware

    data = kernels.aic_data_dir()
    if data is None:
        raise RuntimeError("aiconfigurator-core is not installed: pip install 'aiconfigurator-core==0.12.0'")
    per_arch: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, dict] = {}
    loaded = {}
    for system in systems or kernels.SYSTEMS:
        hw = load_hardware(kernels._profile(system))
        loaded[system] = (hw, kernels.load_tables(data, system, max_rows, backend=backend))
    for stage in STAGES:
        for system, (hw, tables) in loaded.items():
            arch = hw.gpu.architecture
            base = with_values(sw.for_architecture(arch), _medians(per_arch[arch]), "stage")
            for name in stage:
                if name in tables:
                    got = kernels.fit_per_family({name: tables[name]}, hw, base)[name]
                    for k, v in got["fitted"].items():
                        per_arch[arch][k].append(v)
                    errors.setdefault(system, {})[name] = got["mape"]
    return {arch: _medians(vals) for arch, vals in per_arch.items()}, errors


def _medians(values: dict[str, list[float]]) -> dict[str, float]:
    return {k: float(np.median(v)) for k, v in values.items() if v}


# ---- request level ------------------------------------------------------------------------------------------------
def row_errors(rows: pd.DataFrame, pred: pd.DataFrame) -> dict[str, float | int | None]:
    """Rows predicted and TTFT / TPOT MAPE of `pred` against the rows' measured values."""
    ok = pred["status"].str.startswith("ok").to_numpy() & pred["predicted_ttft_ms"].notna().to_numpy()
    r = rows[ok]
    return {"rows": len(rows), "predicted": int(ok.sum()),
            "mape_ttft": mape(pred.loc[ok, "predicted_ttft_ms"], r["silicon_ttft_ms"]),
            "mape_tpot": mape(pred.loc[ok, "predicted_tpot_ms"], r["silicon_tpot_ms"])}


KERNEL_TIMES = ("gemm_kernel_us", "attention_kernel_us", "moe_kernel_us", "collective_kernel_us")
"""Fixed per-kernel times: measured on isolated kernels, partly hidden in serving (CUDA graphs, overlap)."""


def _ok(pred: pd.DataFrame) -> np.ndarray:
    return pred["status"].str.startswith("ok").to_numpy() & pred["predicted_ttft_ms"].notna().to_numpy()


def fit_requests(train: pd.DataFrame, full: pd.DataFrame, bare: pd.DataFrame, s0: float, r0: float,
                 grid: int = 21) -> tuple[float, float, float, dict]:
    """(k, s ms, r ms, fit errors): the share k of the op-level kernel times that serving keeps, the per-step
    and per-request overheads. `full` / `bare` are engine predictions of `train` with all / none of the
    kernel times; in between the surrogate interpolates linearly, then `fit_overheads` (docstring step 2)."""
    ok = _ok(full) & _ok(bare)
    t = train[ok]
    ttft, tpot = t["silicon_ttft_ms"].to_numpy(float), t["silicon_tpot_ms"].to_numpy(float)
    col = {c: (full.loc[ok, c].to_numpy(float), bare.loc[ok, c].to_numpy(float))
           for c in ("predicted_ttft_ms", "predicted_tpot_ms")}
    best = None
    for k in np.linspace(0.0, 1.0, grid):
        ttft0, tpot0 = (b + k * (a - b) for a, b in (col["predicted_ttft_ms"], col["predicted_tpot_ms"]))
        s, r = fit_overheads(ttft0, tpot0, ttft, tpot, s0, r0)
        err = (mape(ttft0 + (s - s0) + (r - r0), ttft), mape(tpot0 + (s - s0), tpot))
        if best is None or sum(err) < sum(best[3]):
            best = (float(k), s, r, err)
    k, s, r, (e_ttft, e_tpot) = best
    return k, s, r, {"rows": len(train), "predicted": int(ok.sum()), "mape_ttft": e_ttft, "mape_tpot": e_tpot}


# ---- the profile file ----------------------------------------------------------------------------------------
def write_profile(name: str, base: SoftwareProfile, arch_values: dict[str, dict[str, float]],
                  request_values: dict[str, float], calibration: dict, path: Path | None = None) -> Path:
    """Write hardware_profiles/software/<name>.yaml: `base` with the fitted constants and a calibration block."""
    src = f"fitted by `{calibration['command']}` on {calibration['date']}"
    prof = with_values(base, {**arch_values.get(BASE_ARCH, {}), **request_values}, src)
    data = prof.model_dump(exclude_none=True, exclude={"overrides", "calibration"})
    data["id"] = name
    over: dict[str, dict] = {}
    for arch, vals in sorted(arch_values.items()):
        if arch == BASE_ARCH:
            continue
        diff = {k: {"value": round(v, 4), "source": src, "grade": "D"} for k, v in vals.items()
                if not math.isclose(round(v, 4), prof.value(k))}
        if diff:
            over[arch] = diff
    data["overrides"] = over
    data["calibration"] = calibration
    path = path or SOFTWARE / f"{name}.yaml"
    header = (f"# {prof.name}: kernel efficiencies and overheads, fitted by gpusim calibrate (see calibration:).\n"
              "# Re-fit: the command in calibration.command; procedure in gpusim/calibrate/fit.py.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120))
    load_software.cache_clear()
    return path


def calibration_block(command: str, data: str, fit: dict, held_out: dict) -> dict:
    """The profile's `calibration:` mapping (MAPE as fractions rounded to 3 decimals)."""
    def clean(d: dict) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}

    return {"command": command, "date": dt.date.today().isoformat(), "data": data, "fit": clean(fit),
            "held_out": clean(held_out)}


# ---- the whole procedure --------------------------------------------------------------------------------------------
def calibrate(name: str, start: SoftwareProfile, backend: str, silicon: Path, command: str, train_sample: int = 120,
              held_sample: int | None = None, max_rows: int = 800, ops: bool = True, workers: int = 2) -> dict:
    """Steps 1-3 of the module docstring for profile `name` fitted on `backend`; returns the calibration block."""
    from gpusim.validate.silicon import predict_rows, read_sample

    if start.id != name:
        start = start.model_copy(update={"id": name, "name": f"{backend} (from {start.name})"})
    arch_values: dict[str, dict[str, float]] = {}
    op_note = "op level kept"
    if ops:
        arch_values, op_err = fit_ops(start, backend, max_rows)
        op_note = f"op level: aiconfigurator-core 0.12.0 {backend} kernel tables, {max_rows} rows/family/system"
        mean_err = np.mean([v for fam in op_err.values() for v in fam.values()])
    rows = read_sample(silicon)
    train, held = split_rows(rows)
    train, held = train[train["backend"] == backend], held[held["backend"] == backend]
    if len(train) > train_sample:
        train = train.sample(n=train_sample, random_state=SEED).sort_index()
    if held_sample is not None and len(held) > held_sample:
        held = held.sample(n=held_sample, random_state=SEED).sort_index()
    sw = start
    if arch_values:
        write_profile(name, start, arch_values, {}, {"command": command, "date": "in progress"})
        sw = load_software(name)

    def predict(r: pd.DataFrame) -> pd.DataFrame:
        return predict_rows(r.reset_index(drop=True), workers)

    if not arch_values:
        archs = (BASE_ARCH, *sw.overrides)
        arch_values = {a: {n: sw.for_architecture(a).value(n) for n in KERNEL_TIMES} for a in archs}

    def scaled(k: float) -> dict[str, dict[str, float]]:
        return {a: {**v, **{n: v[n] * k for n in KERNEL_TIMES if n in v}} for a, v in arch_values.items()}

    def trial(k: float) -> pd.DataFrame:
        write_profile(name, sw, scaled(k), {}, {"command": command, "date": "in progress"})
        return predict(train)

    full, bare = trial(1.0), trial(0.0)
    k, s_ms, req_ms, fitted = fit_requests(train, full, bare, sw.step_overhead_us.value * 1e-3,
                                           sw.value("request_overhead_ms"))
    arch_values = scaled(k)
    request_values = {"step_overhead_us": s_ms * 1e3, "request_overhead_ms": req_ms}
    fitted["kernel_time_share"] = k
    data = (f"{silicon.name}: {backend} rows, {HOLDOUT:.0%} held out (seed {SEED}); engine on {len(train)} training "
            f"rows; {op_note}" + (f" (mean family MAPE after fit {mean_err:.0%})" if ops else ""))
    write_profile(name, sw, arch_values, request_values, calibration_block(command, data, fitted, {}))
    held_err = row_errors(held.reset_index(drop=True), predict(held))
    block = calibration_block(command, data, fitted, held_err)
    write_profile(name, load_software(name), arch_values, request_values, block)
    return block


GENERATION_SCALED = ("hbm_bandwidth_fraction", "gemm_efficiency_max", "gemm_efficiency_fp8", "gemm_efficiency_fp4",
                     "attention_prefill_flops_fraction", "attention_decode_bandwidth_fraction")
GENERATION_STRETCHED = ("gemm_kernel_us", "attention_kernel_us", "moe_kernel_us", "step_overhead_us")


def generation_ratio(mlperf: Path, old_round: str) -> tuple[float, str]:
    """Per-GPU Offline throughput of the newest round over `old_round` on the same accelerator and benchmark
    (the geometric mean over such pairs), and which pairs."""
    df = pd.read_csv(mlperf)
    df = df[df["scenario"] == "Offline"].assign(per_gpu=lambda d: d["value"] / d["num_accelerators"].where(
        d["unit"] == "tokens/s", 1.0))
    old = df[df["round"] == old_round]
    newer = df[df["round"].map(lambda r: str(r) > old_round)]
    ratios, pairs = [], []
    for _, o in old.iterrows():
        n = newer[(newer["accelerator"] == o["accelerator"]) & (newer["benchmark"] == o["benchmark"])]
        if len(n):
            ratios.append(n["per_gpu"].max() / o["per_gpu"])
            pairs.append(f"{o['accelerator']} {o['benchmark']} {ratios[-1]:.2f}x")
    if not ratios:
        raise ValueError(f"no Offline rows of round {old_round} with a newer round on the same accelerator")
    return float(np.exp(np.mean(np.log(ratios)))), "; ".join(pairs)


def derive_generation(name: str, newer: SoftwareProfile, mlperf: Path, old_round: str, command: str) -> dict:
    """An older generation of `newer`: kernel efficiencies divided and fixed times multiplied by the MLPerf
    Offline per-GPU ratio between the rounds on the same hardware (grade D: one speed factor for all kernels)."""
    ratio, pairs = generation_ratio(mlperf, old_round)

    def scaled(sw: SoftwareProfile) -> dict[str, float]:
        out = {k: sw.value(k) / ratio for k in GENERATION_SCALED}
        return {**out, **{k: sw.value(k) * ratio for k in GENERATION_STRETCHED}}

    archs = {BASE_ARCH, *newer.overrides}
    arch_values = {a: scaled(newer.for_architecture(a)) for a in archs}
    data = f"{mlperf.name}: Offline per-GPU ratio newest round / {old_round} = {ratio:.3f} ({pairs})"
    block = calibration_block(command, data, {"speed_ratio": ratio}, {})
    base = newer.model_copy(update={"name": f"{newer.name} ({old_round} generation)"})
    write_profile(name, base, arch_values, {}, block)
    return block


__all__ = [
    "HOLDOUT",
    "SEED",
    "calibrate",
    "calibration_block",
    "derive_generation",
    "fit_ops",
    "fit_overheads",
    "fit_requests",
    "generation_ratio",
    "mape",
    "row_errors",
    "split_rows",
    "weighted_median",
    "with_values",
    "write_profile",
]
