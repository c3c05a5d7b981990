"""Absolute percentage errors of predictions against measurements, per partition (docs/design.md: Accuracy
discipline)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd


def ape(predicted: pd.Series | np.ndarray, measured: pd.Series | np.ndarray) -> pd.Series | np.ndarray:
    """|predicted − measured| / measured (a fraction; NaN where either is missing)."""
    return np.abs(predicted - measured) / measured


def mape(predicted: pd.Series | np.ndarray, measured: pd.Series | np.ndarray) -> float | None:
    """Mean `ape` over the finite pairs with a positive measurement (a fraction); None when there are none."""
    pred, meas = np.asarray(predicted, float), np.asarray(measured, float)
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    return float(np.mean(ape(pred[ok], meas[ok]))) if ok.any() else None


def _stat(values: pd.Series, how: str) -> float | None:
    v = values.dropna()
    if v.empty:
        return None
    out = float(v.mean() if how == "mean" else v.median())
    return None if math.isnan(out) else out


def error_stats(df: pd.DataFrame, metrics: tuple[str, ...]) -> dict:
    """MAPE, median APE and mean signed error (fractions) of each metric over the predicted rows of `df`.

    `df` has `predicted_<m>` and `measured_<m>` columns for every metric `m`, and a bool `predicted`.
    """
    ok = df[df["predicted"]]
    out: dict = {"rows": len(df), "rows_predicted": len(ok)}
    for m in metrics:
        p, s = ok[f"predicted_{m}"], ok[f"measured_{m}"]
        e = ape(p, s)
        out[f"mape_{m}"] = _stat(e, "mean")
        out[f"median_ape_{m}"] = _stat(e, "median")
        out[f"bias_{m}"] = _stat((p - s) / s, "mean")
    return out


def partition_errors(df: pd.DataFrame, keys: dict[str, list[str]], metrics: tuple[str, ...]) -> list[dict]:
    """One `error_stats` dict per value of each partition; `keys` maps a partition kind to its columns."""
    rows = []
    for kind, cols in keys.items():
        for value, group in df.groupby(cols, dropna=False, sort=True):
            rows.append({"kind": kind, "value": _label(value), **error_stats(group, metrics)})
    return rows


def _label(value: object) -> str:
    """A groupby key as text: its parts joined by commas."""
    return ", ".join(str(v) for v in (value if isinstance(value, tuple) else (value,)))


def repeat_scatter(measured: pd.Series, setup: pd.Series) -> pd.Series:
    """|measured / median of its setup − 1| (a fraction) for the distinct measurements of setups measured
    more than once with different results; NaN elsewhere. No deterministic prediction of a setup gets
    much below its measurements' mean scatter: it is the floor the data sets under any model's MAPE."""
    distinct = ~pd.DataFrame({"s": setup, "m": measured}).duplicated()
    m, s = measured[distinct], setup[distinct]
    med = m.groupby(s).transform("median")
    varied = m.groupby(s).transform("nunique") > 1
    return ((m / med) - 1).abs().where(varied).reindex(measured.index)


def scatter_stats(df: pd.DataFrame, keys: dict[str, list[str]], metrics: tuple[str, ...]) -> list[dict]:
    """Per partition value (and `all`): distinct repeated measurements and their mean `repeat_scatter`,
    from `scatter_<m>` columns."""
    rows = []
    groups = [("all", "all", df)] + [(kind, value, g) for kind, cols in keys.items()
                                     for value, g in df.groupby(cols, dropna=False, sort=True)]
    for kind, value, g in groups:
        out = {"kind": kind, "value": _label(value), "rows_repeated": int(g[f"scatter_{metrics[0]}"].notna().sum())}
        out.update({f"scatter_{m}": _stat(g[f"scatter_{m}"], "mean") for m in metrics})
        rows.append(out)
    return rows


def first_wave_weights(df: pd.DataFrame, by: str, min_contrast: float = 0.25) -> list[dict]:
    """How much the first wave weighs in the measured TTFT mean, per value of `by` (and `all`).

    A closed-loop run's mean TTFT mixes its first wave (the requests sent together at t = 0) with its
    steady state: mean = w·first + (1 − w)·steady. The simulation predicts both TTFTs (and its own w is
    one wave in `runner.WAVES`); the measurement implies w = (measured − steady) / (first − steady). Only
    rows whose predicted first wave exceeds the steady state by `min_contrast` of it are used (elsewhere w
    is ill-defined). Per group: the rows used and the implied w's median and quartiles."""
    ok = df[df["predicted"]]
    first, steady = ok["predicted_ttft_first_wave"], ok["predicted_ttft_steady"]
    used = ok[(first - steady) >= min_contrast * steady]
    implied = (used["measured_ttft"] - used["predicted_ttft_steady"]) / (
        used["predicted_ttft_first_wave"] - used["predicted_ttft_steady"])
    groups = [("all", implied)] + [(str(v), g) for v, g in implied.groupby(used[by], sort=True)]
    return [{"value": value, "rows": len(w), "weight_median": _stat(w, "median"),
             "weight_q25": float(w.quantile(0.25)) if len(w) else None,
             "weight_q75": float(w.quantile(0.75)) if len(w) else None} for value, w in groups]


SLOT_EDGES = (0.9, 1.05, 1.2)
"""Band edges of concurrency over decode slots (`slot_queueing`)."""


def slot_queueing(df: pd.DataFrame, edges: tuple[float, ...] = SLOT_EDGES) -> list[dict]:
    """Disaggregated rows banded by c / S, the client's concurrency over the decode slots (decode instances ×
    their batch). A closed loop with more requests than slots keeps c − S of them waiting for a slot, by Little's
    law each for (c / S − 1) of the time a request holds one, and the decode worker streams the first token once
    it takes the request: above one, TTFT is mostly that wait, set by the decode step, so its error should follow
    TPOT's. Per band: rows; the medians of TTFT and of TPOT predicted / measured and of their quotient; the
    measured TTFT in request decode times, TTFT / (OSL · TPOT); and Little's bound, max(0, c / S − 1)."""
    ok = df[df["predicted"] & (df["mode"] == "disagg")]
    c_per_slot = pd.to_numeric(ok["concurrency"]) / pd.to_numeric(ok["decode_slots"])
    ttft = ok["predicted_ttft"] / ok["measured_ttft"]
    tpot = ok["predicted_tpot"] / ok["measured_tpot"]
    wait = ok["measured_ttft"] / (ok["osl"] * ok["measured_tpot"])
    bounds = (-math.inf, *edges, math.inf)
    out = []
    for lo, hi in itertools.pairwise(bounds):
        band = (c_per_slot >= lo) & (c_per_slot < hi)
        out.append({"low": lo, "high": hi, "rows": int(band.sum()), "ttft_ratio": _stat(ttft[band], "median"),
                    "tpot_ratio": _stat(tpot[band], "median"), "ttft_over_tpot": _stat((ttft / tpot)[band], "median"),
                    "measured_wait": _stat(wait[band], "median"),
                    "little": _stat((c_per_slot[band] - 1).clip(lower=0), "median")})
    return out


def target_status(df: pd.DataFrame, keys: dict[str, list[str]], targets: dict[str, float],
                  min_rows: int) -> list[dict]:
    """Every partition value with at least `min_rows` predicted rows, against a MAPE target per metric:
    its MAPEs, whether it meets them all (`meets`), and beside them the measurement scatter of its repeated
    setups (`scatter_stats`: the floor under any deterministic model's error there; None without repeats).
    `df` is a scored table with `scatter_<m>` columns; `targets` maps a metric to its largest MAPE."""
    metrics = tuple(targets)
    floors = {(s["kind"], s["value"]): s for s in scatter_stats(df, keys, metrics)}
    rows = []
    for p in partition_errors(df, keys, metrics):
        if p["rows_predicted"] < min_rows:
            continue
        mapes = {f"mape_{m}": p[f"mape_{m}"] for m in metrics}
        meets = all(v is not None and v <= targets[m] for m, v in zip(metrics, mapes.values(), strict=True))
        floor = floors[(p["kind"], p["value"])]
        rows.append({"kind": p["kind"], "value": p["value"], "rows_predicted": p["rows_predicted"], **mapes,
                     "meets": meets, "rows_repeated": floor["rows_repeated"],
                     **{f"scatter_{m}": floor[f"scatter_{m}"] for m in metrics}})
    return rows


def worst(partitions: list[dict], metric: str, top: int = 10, min_rows: int = 1) -> list[dict]:
    """The `top` partitions with the largest MAPE of `metric` among those with predictions."""
    scored = [p for p in partitions if p.get(f"mape_{metric}") is not None and p["rows_predicted"] >= min_rows]
    return sorted(scored, key=lambda p: -np.float64(p[f"mape_{metric}"]))[:top]


__all__ = ["ape", "error_stats", "first_wave_weights", "partition_errors", "repeat_scatter", "scatter_stats",
           "target_status", "worst"]
