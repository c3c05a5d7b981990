"""`gpusim calibrate`: fit a software profile's constants, op level then request level, and write them back.

Procedure (docs/design.md: Accuracy discipline; every number lands in hardware_profiles/software/<profile>.yaml,
written once when the fit is done):

1. **Op level** (needs the optional `aiconfigurator-core` tables, `gpusim.calibrate.kernels`): the op
   families are fitted on the constants they depend on (`kernels.RELEVANT`), GEMMs first (their shape
   curve, bandwidth and per-dtype efficiencies), then attention, MoE (relative to the GEMM efficiency of
   its dtype) and collectives, each stage from the values of the stages before. A stage's families are
   fitted together on all of a GPU architecture's systems at once (`kernels.fit_architecture`, as
   `python -m gpusim.calibrate.kernels --pooled` does), so families that share a constant (context and
   MLA context attention; FP8 and FP4 GEMMs) share its value: one value per architecture, as a profile
   holds. The base values are Blackwell Ultra's (so Rubin, which has no tables, inherits them: grade D
   by rule); Hopper and Blackwell differ through `overrides`.
2. **Request level** on the silicon sample: a fixed-seed random 30% of the rows is held out. On (a
   sample of) the profile's training rows the real engine runs with the op-level constants, and once
   more per engine constant with that constant nudged (`FITTED`: the per-step and per-layer overheads,
   the disaggregated KV handoff time and the host time per sequence). Their differences give each row's
   TTFT and TPOT slopes; the per-request front-end time adds to TTFT alone. Kernel efficiencies are op
   constants: the prefill-attention length curve comes from the kernel tables, as the GEMM curve does.
   The published MLPerf Offline rows whose round runs with the profile join them
   (`gpusim.calibrate.offline`): each on the deployment the MLPerf search finds, its seconds per output
   token per GPU nudged the same way. They weigh the large batches the silicon sample never reaches.
   Under that linear surrogate the constants minimising MAPE(TTFT) + MAPE(TPOT) + MAPE(MLPerf Offline)
   are a weighted L1 regression, solved exactly as a linear program.
3. The held-out rows of the profile's backend run in the real engine with the final constants, and so do
   the MLPerf Offline rows; the fit (surrogate, training rows) and held-out MAPE go into the profile's
   `calibration:` block.

Trial constants never go through the tracked files: each prediction pass runs with its trial profile as data
(`software_overlay`; `gpusim.parallel` hands it to the worker processes), and the fitted profile is written once,
at the end, atomically (`write_profile`), so an interrupted calibration leaves every profile as it was.

With `--timing table` the engine times kernels from the measured tables (gpusim.perf.table_step): step 1
does not apply, step 2 fits the same overheads, and they and the errors go into the profile's
`table_timing:` and `table_calibration:`, the roofline's constants untouched.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import yaml
from scipy import sparse
from scipy.optimize import linprog

from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.specs.experiment import Timing
from gpusim.specs.software import SOFTWARE, SoftwareProfile, reload_software, software_overlay
from gpusim.validate.errors import mape
from gpusim.validate.holdout import HOLDOUT, SEED, split_rows
from gpusim.validate.silicon import predict_rows, read_sample

if TYPE_CHECKING:
    from gpusim.specs.hardware import Hardware

BASE_ARCH = "blackwell_ultra"
"""Architecture whose op-level values are the profile's base (Rubin inherits them)."""
STAGES: tuple[tuple[str, ...], ...] = (
    ("gemm_bf16",),
    ("gemm_fp8", "gemm_fp4"),
    ("context_attention", "mla_context", "generation_attention", "mla_generation", "moe_bf16", "moe_fp8",
     "moe_fp4", "allreduce", "alltoall"),
)
"""Families fitted in order; each stage starts from the values of the stages before."""


# ---- statistics ------------------------------------------------------------------------------------------
def fit_surrogate(base: dict[str, np.ndarray], slopes: dict[str, dict[str, np.ndarray]],
                  measured: dict[str, np.ndarray], theta0: dict[str, float]) -> dict[str, float]:
    """Constants θ ≥ 0 minimising Σ_metrics MAPE under the linear surrogate
    pred(θ) = base + Σₙ (θₙ − θ0ₙ) · slopesₙ (per metric, per row). That is a weighted L1 regression,
    solved exactly as a linear program: min Σ wᵢeᵢ with eᵢ ≥ ±(Jᵢθ − cᵢ), wᵢ = 1 / (measuredᵢ · rows)."""
    names = list(theta0)
    jac = np.vstack([np.column_stack([slopes[n][m] for n in names]) for m in base])
    target = np.concatenate([measured[m] - base[m] for m in base]) + jac @ np.array([theta0[n] for n in names])
    weight = np.concatenate([1 / (measured[m] * len(measured[m])) for m in base])
    k, rows = len(names), len(target)
    eye = sparse.identity(rows, format="csr")
    a_ub = sparse.bmat([[sparse.csr_matrix(jac), -eye], [sparse.csr_matrix(-jac), -eye]], format="csr")
    b_ub = np.concatenate([target, -target])
    bounds = [(0.0, None)] * (k + rows)
    res = linprog(np.concatenate([np.zeros(k), weight]), A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if not res.success:
        raise RuntimeError(f"calibration LP failed: {res.message}")
    return {n: float(res.x[i]) for i, n in enumerate(names)}


# ---- op level ------------------------------------------------------------------------------------------------
def with_values(sw: SoftwareProfile, values: dict[str, float], source: str) -> SoftwareProfile:
    """`sw` with `values` as grade-D fitted constants (`source` says how)."""
    from gpusim.specs.sourced import Sourced

    return sw.model_copy(update={k: Sourced(value=round(v, 4), source=source, grade="D") for k, v in values.items()})


def fit_ops(sw: SoftwareProfile, backend: str = "trtllm", max_rows: int = 800,
            systems: Iterable[str] | None = None,
            families: tuple[str, ...] = ()) -> tuple[dict[str, dict[str, float]], dict[str, dict]]:
    """Op-level constants per GPU architecture and each system's family MAPE with them (module docstring,
    step 1); only the families whose names start with one of `families` when given."""
    from gpusim.calibrate import kernels
    from gpusim.specs.hardware import load_hardware

    data = kernels.aic_data_dir()
    if data is None:
        raise RuntimeError("aiconfigurator-core is not installed: pip install 'aiconfigurator-core==0.12.0'")
    by_arch: dict[str, list[tuple[str, dict[str, pd.DataFrame], Hardware]]] = defaultdict(list)
    for system in systems or kernels.SYSTEMS:
        hw = load_hardware(kernels._profile(system))
        tables = kernels.load_tables(data, system, max_rows, backend=backend)
        by_arch[hw.gpu.architecture].append(
            (system, {k: v for k, v in tables.items() if not families or k.startswith(families)}, hw))
    values: dict[str, dict[str, float]] = defaultdict(dict)
    errors: dict[str, dict] = defaultdict(dict)
    for stage in STAGES:
        for arch, every in by_arch.items():
            sets = [(system, staged, hw) for system, tables, hw in every
                    if (staged := {n: tables[n] for n in stage if n in tables})]
            if sets:
                base = with_values(sw.for_architecture(arch), values[arch], "stage")
                fitted, errs = kernels.fit_architecture(sets, base)
                values[arch].update(fitted)
                for system, fams in errs.items():
                    errors[system].update({n: e["mape"] for n, e in fams.items()})
    return dict(values), dict(errors)


def with_kept_overrides(sw: SoftwareProfile, arch_values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """`arch_values` (op-level constants fitted per architecture) over `sw`'s own overrides: a partial op-level
    fit keeps every other per-architecture value."""
    kept = {a: {k: v.value for k, v in o.items()} for a, o in sw.overrides.items()}
    return {a: {**kept.get(a, {}), **arch_values.get(a, {})} for a in {*kept, *arch_values}}


# ---- request level ------------------------------------------------------------------------------------------------
def row_errors(rows: pd.DataFrame, pred: pd.DataFrame) -> dict[str, float | int | None]:
    """Rows predicted and TTFT / TPOT MAPE of `pred` against the rows' measured values."""
    ok = pred["status"].str.startswith("ok").to_numpy() & pred["predicted_ttft_ms"].notna().to_numpy()
    r = rows[ok]
    return {"rows": len(rows), "predicted": int(ok.sum()),
            "mape_ttft": mape(pred.loc[ok, "predicted_ttft_ms"], r["silicon_ttft_ms"]),
            "mape_tpot": mape(pred.loc[ok, "predicted_tpot_ms"], r["silicon_tpot_ms"])}


FITTED = {"step_overhead_us": 500.0, "layer_overhead_us": 20.0, "handoff_overhead_ms": 100.0, "host_seq_us": 50.0}
"""Engine constants fitted at request level, each with the step of its finite-difference slope."""


def _ok(pred: pd.DataFrame) -> np.ndarray:
    return pred["status"].str.startswith("ok").to_numpy() & pred["predicted_ttft_ms"].notna().to_numpy()


def _metrics(pred: pd.DataFrame, ok: np.ndarray) -> dict[str, np.ndarray]:
    return {"ttft": pred.loc[ok, "predicted_ttft_ms"].to_numpy(float),
            "tpot": pred.loc[ok, "predicted_tpot_ms"].to_numpy(float)}


@dataclass(frozen=True)
class OfflineFit:
    """MLPerf Offline rows in the request-level fit (`gpusim.calibrate.offline`): seconds per output token
    per GPU, predicted at `theta0` (`base`) and with each constant nudged (`nudged[n]`), and published."""

    base: np.ndarray
    nudged: dict[str, np.ndarray]
    measured: np.ndarray


def fit_requests(train: pd.DataFrame, base: pd.DataFrame, nudged: dict[str, pd.DataFrame],
                 theta0: dict[str, float], offline: OfflineFit | None = None) -> tuple[dict[str, float], dict]:
    """(constants, fit errors): the `FITTED` engine constants and `request_overhead_ms`, fitted on the
    training rows (and the `offline` MLPerf rows, a third metric of equal weight). `base` holds the engine's
    predictions at the values `theta0`, `nudged[n]` those with constant n raised by `FITTED[n]`; their
    differences are the surrogate's slopes. The request overhead adds to TTFT alone (front-end time before
    the engine), so its slope is exact."""
    ok = _ok(base)
    for pred in nudged.values():
        ok &= _ok(pred)
    t = train[ok]
    measured = {"ttft": t["silicon_ttft_ms"].to_numpy(float), "tpot": t["silicon_tpot_ms"].to_numpy(float)}
    b = _metrics(base, ok)
    slopes = {n: {m: (v - b[m]) / FITTED[n] for m, v in _metrics(nudged[n], ok).items()} for n in nudged}
    slopes["request_overhead_ms"] = {"ttft": np.ones(len(t)), "tpot": np.zeros(len(t))}
    if offline is not None:
        good = np.isfinite(offline.base) & np.logical_and.reduce([np.isfinite(v) for v in offline.nudged.values()])
        if good.any():
            b["mlperf"], measured["mlperf"] = offline.base[good], offline.measured[good]
            for n in nudged:
                slopes[n]["mlperf"] = (offline.nudged[n][good] - b["mlperf"]) / FITTED[n]
            slopes["request_overhead_ms"]["mlperf"] = np.zeros(int(good.sum()))
    x = fit_surrogate(b, slopes, measured, theta0)
    pred = {m: b[m] + sum((x[n] - theta0[n]) * slopes[n][m] for n in x) for m in b}
    errors = {"rows": len(train), "predicted": int(ok.sum()), "mape_ttft": mape(pred["ttft"], measured["ttft"]),
              "mape_tpot": mape(pred["tpot"], measured["tpot"])}
    if "mlperf" in b:
        errors.update(mlperf_offline_rows=len(b["mlperf"]),
                      mape_mlperf_offline=throughput_mape(pred["mlperf"], measured["mlperf"]))
    return x, errors


def throughput_mape(pred_s: np.ndarray, measured_s: np.ndarray) -> float | None:
    """MAPE of throughput (predicted / published − 1, as `gpusim validate mlperf` reports it) from seconds
    per token."""
    ratio = np.asarray(measured_s, float) / np.asarray(pred_s, float)
    return float(np.mean(np.abs(ratio - 1))) if ratio.size else None


# ---- the profile file ----------------------------------------------------------------------------------------
def profile_text(name: str, base: SoftwareProfile, arch_values: dict[str, dict[str, float]],
                 request_values: dict[str, float], calibration: dict, timing: Timing = "roofline") -> str:
    """The YAML of profile `name`: `base` with the fitted constants and a calibration block. An override
    `base` already has keeps its source where its value is unchanged. Under `timing: table` the
    request-level constants and the block go to `table_timing` and `table_calibration`, the rest stays."""
    src = f"fitted by `{calibration['command']}` on {calibration['date']}"
    if timing == "table":
        table = with_values(base, request_values, src)
        base = base.model_copy(update={"table_timing": {**base.table_timing, **{
            k: getattr(table, k) for k in request_values}}, "table_calibration": calibration})
        request_values, calibration = {}, base.calibration or {}
    prof = with_values(base, {**arch_values.get(BASE_ARCH, {}), **request_values}, src)
    data = prof.model_dump(exclude_none=True, exclude={"overrides", "calibration", "table_timing", "table_calibration"})
    data["id"] = name
    over: dict[str, dict] = {}
    for arch, vals in sorted(arch_values.items()):
        if arch == BASE_ARCH:
            continue
        kept = base.overrides.get(arch, {})
        diff = {k: (kept[k].model_dump(exclude_none=True) if k in kept and math.isclose(kept[k].value, round(v, 4))
                    else {"value": round(v, 4), "source": src, "grade": "D"})
                for k, v in vals.items() if not math.isclose(round(v, 4), prof.value(k))}
        if diff:
            over[arch] = diff
    data["overrides"] = over
    data["calibration"] = calibration
    if prof.table_timing:
        data["table_timing"] = {k: v.model_dump(exclude_none=True) for k, v in prof.table_timing.items()}
        data["table_calibration"] = prof.table_calibration
    header = (f"# {prof.name}: kernel efficiencies and overheads, fitted by gpusim calibrate (see calibration:).\n"
              "# Re-fit: the command in calibration.command; procedure in gpusim/calibrate/fit.py.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def trial_profile(name: str, base: SoftwareProfile, arch_values: dict[str, dict[str, float]],
                  request_values: dict[str, float], calibration: dict, timing: Timing = "roofline") -> SoftwareProfile:
    """The profile `write_profile` would write, in memory only (read back from its YAML, so it is the same
    profile the file would give): what a calibration's prediction passes run with (`software_overlay`)."""
    text = profile_text(name, base, arch_values, request_values, calibration, timing)
    return SoftwareProfile.model_validate(yaml.safe_load(text))


def write_profile(name: str, base: SoftwareProfile, arch_values: dict[str, dict[str, float]],
                  request_values: dict[str, float], calibration: dict, path: Path | None = None,
                  timing: Timing = "roofline") -> Path:
    """Write hardware_profiles/software/<name>.yaml (or `path`) as `profile_text` gives it, atomically: a
    temporary file in the same folder, then renamed over the old one, so an interrupted write leaves the old
    file whole."""
    path = path or SOFTWARE / f"{name}.yaml"
    text = profile_text(name, base, arch_values, request_values, calibration, timing)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    reload_software()
    return path


def calibration_block(command: str, data: str, fit: dict, held_out: dict) -> dict:
    """The profile's `calibration:` mapping (MAPE as fractions rounded to 3 decimals)."""
    def clean(d: dict) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}

    return {"command": command, "date": dt.date.today().isoformat(), "data": data, "fit": clean(fit),
            "held_out": clean(held_out)}


# ---- the whole procedure --------------------------------------------------------------------------------------------
def calibrate(name: str, start: SoftwareProfile, backend: str, silicon: Path, command: str, train_sample: int = 120,
              held_sample: int | None = None, max_rows: int = 800, ops: bool = True, workers: int = 2,
              timing: Timing = "roofline", op_families: tuple[str, ...] = (), mlperf: Path | None = None,
              mlperf_duration_s: float = SUBMISSION_DURATION_S) -> dict:
    """Steps 1-3 of the module docstring for profile `name` fitted on `backend`; returns the calibration block.
    `op_families` (name prefixes, e.g. "moe") limits step 1 to those families; the other op-level
    constants keep their values. `mlperf` adds the Offline rows of that published-results CSV whose round
    runs with `start` to step 2 (run with `name`; `gpusim.calibrate.offline`, runs of `mlperf_duration_s`).
    Under `timing: table` the engine times kernels from the measured tables: no op-level step, no MLPerf
    rows, and the request-level constants (but the prefill-attention fraction, which the tables replace)
    are fitted into the profile's `table_timing`."""
    from gpusim.calibrate.offline import offline_rows, predict_offline

    rounds_of = start.id  # the MLPerf rounds that run with the profile fitted from
    if start.id != name:
        start = start.model_copy(update={"id": name, "name": f"{backend} (from {start.name})"})
    arch_values: dict[str, dict[str, float]] = {}
    ops = ops and timing == "roofline"
    op_note = "op level kept" if timing == "roofline" else "kernel times from the measured tables (timing: table)"
    if ops:
        arch_values, op_err = fit_ops(start, backend, max_rows, families=op_families)
        if op_families:
            arch_values = with_kept_overrides(start, arch_values)
        op_note = (f"op level: aiconfigurator-core 0.12.0 {backend} kernel tables"
                   + (f" ({', '.join(op_families)} families only)" if op_families else "")
                   + f", {max_rows} rows/family/system")
        mean_err = np.mean([v for fam in op_err.values() for v in fam.values()])
    rows = read_sample(silicon)
    train, held = split_rows(rows)
    train, held = train[train["backend"] == backend], held[held["backend"] == backend]
    if len(train) > train_sample:
        train = train.sample(n=train_sample, random_state=SEED).sort_index()
    if held_sample is not None and len(held) > held_sample:
        held = held.sample(n=held_sample, random_state=SEED).sort_index()
    sw = start
    if arch_values:  # final op-level values: their source carries the date (the request level follows)
        sw = trial_profile(name, start, arch_values, {}, {"command": command, "date": dt.date.today().isoformat()})

    if not arch_values:  # keep the profile's per-architecture overrides as they are
        arch_values = {a: {k: v.value for k, v in o.items()} for a, o in sw.overrides.items()}
    names = list(FITTED)
    theta0 = {n: sw.for_timing(timing).value(n) for n in (*names, "request_overhead_ms")}
    pending = {"command": command, "date": "in progress"}

    def trial(values: dict[str, float], block: dict) -> SoftwareProfile:
        """Profile `name` with `values`: the engine runs with it as data; no file is written until the end."""
        return trial_profile(name, sw, arch_values, values, block, timing)

    def predict(prof: SoftwareProfile, r: pd.DataFrame) -> pd.DataFrame:
        with software_overlay(prof):
            return predict_rows(r.reset_index(drop=True), workers, timing=timing)

    def predict_offline_rows(prof: SoftwareProfile) -> np.ndarray:
        with software_overlay(prof):
            return predict_offline(offline, mlperf_duration_s, workers)

    first = trial({}, pending)
    with software_overlay(first):
        offline = (offline_rows(mlperf, rounds_of, name, mlperf_duration_s, workers)
                   if mlperf and timing == "roofline" else [])
    base, base_offline = predict(first, train), predict_offline_rows(first)
    nudged_silicon, nudged_offline = {}, {}
    for n in names:
        nudged = trial({n: theta0[n] + FITTED[n]}, pending)
        nudged_silicon[n], nudged_offline[n] = predict(nudged, train), predict_offline_rows(nudged)
    measured_offline = np.array([r.measured_s_per_token for r in offline])
    theta, fitted = fit_requests(train, base, nudged_silicon, theta0,
                                 OfflineFit(base_offline, nudged_offline, measured_offline) if offline else None)
    data = (f"{silicon.name}: {backend} rows, {HOLDOUT:.0%} held out (seed {SEED}); engine on {len(train)} training "
            f"rows; {op_note}" + (f" (mean family MAPE after fit {mean_err:.0%})" if ops else ""))
    if offline:
        data += (f"; {mlperf.name}: {len(offline)} Offline rows run with {name}, each on the deployment the MLPerf "
                 f"search finds ({mlperf_duration_s:.0f} s runs)")
    final = trial(theta, calibration_block(command, data, fitted, {}))
    held_err = row_errors(held.reset_index(drop=True), predict(final, held))
    if offline:  # the fitted rows in the real engine at the final constants
        held_err["mlperf_offline_simulated"] = throughput_mape(predict_offline_rows(final), measured_offline)
    block = calibration_block(command, data, fitted, held_err)
    write_profile(name, final, arch_values, theta, block, timing=timing)  # the one write, once all is known
    return block


__all__ = [
    "calibrate",
    "calibration_block",
    "fit_ops",
    "fit_requests",
    "fit_surrogate",
    "profile_text",
    "row_errors",
    "trial_profile",
    "with_values",
    "write_profile",
]
