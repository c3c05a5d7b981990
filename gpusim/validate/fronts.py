"""Throughput–interactivity fronts on the silicon sample: a setup measured at several concurrencies, its measured
front beside the predicted one.

A row measured at concurrency c (a closed-loop client keeping c requests in flight) with mean TTFT and TPOT
serves c × OSL / (TTFT + (OSL − 1) × TPOT) output tokens per second over its GPUs, at 1 / TPOT tokens per second
per user; the same of the predicted TTFT and TPOT gives the predicted point. A front setup is a row's setup
with the concurrency and the batch sizes left out (`FRONT_BLIND`); repeated measurements are averaged first.
Where the setup has at least `MIN_POINTS` concurrencies, each measured point is compared with the predicted front
at the same tokens/s/user (interpolated on log tokens/s/user between the predicted points, not extrapolated):
distance = predicted / measured tokens/s/GPU − 1 (+: gpusim puts the front higher). Disaggregated rows whose
worker counts the sample leaves unstated are left out: their GPU count is an assumption that grows with the
concurrency.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FRONT_BLIND = ("batch_size", "prefill_batch_size", "decode_batch_size")
"""Columns that follow the concurrency within one front setup."""
MIN_POINTS = 2
"""Concurrencies a setup needs for a front."""
_BY = ["system", "model_path", "backend", "mode"]


def _rate(conc: pd.Series, osl: pd.Series, ttft_ms: pd.Series, tpot_ms: pd.Series, gpus: pd.Series) -> pd.Series:
    return conc * osl / ((ttft_ms + (osl - 1) * tpot_ms) / 1e3) / gpus


def front_points(table: pd.DataFrame) -> pd.DataFrame:
    """One row per front setup and concurrency: measured and predicted tokens/s/GPU and tokens/s/user. `table` is
    `silicon.scored_table`'s (columns `front_setup`, `concurrency`, `gpus`, `osl`)."""
    ok = table[table["predicted"] & ~table["status"].str.contains("workers unstated") & table["gpus"].notna()]
    cols = ["measured_ttft", "measured_tpot", "predicted_ttft", "predicted_tpot"]
    per = ok.groupby(["front_setup", *_BY, "concurrency", "osl", "gpus"], as_index=False)[cols].mean()
    for kind in ("measured", "predicted"):
        per[f"{kind}_per_gpu"] = _rate(per["concurrency"], per["osl"], per[f"{kind}_ttft"], per[f"{kind}_tpot"],
                                       per["gpus"])
        per[f"{kind}_per_user"] = 1e3 / per[f"{kind}_tpot"]
    counts = per.groupby("front_setup")["concurrency"].transform("nunique")
    return per[counts >= MIN_POINTS].reset_index(drop=True)


def front_distances(points: pd.DataFrame) -> pd.DataFrame:
    """`points` with `distance`: the predicted front at each measured point's tokens/s/user over its measured
    tokens/s/GPU, − 1 (NaN outside the predicted front's range of tokens/s/user)."""
    out = []
    for _, g in points.groupby("front_setup"):
        order = np.argsort(g["predicted_per_user"].to_numpy())
        x = np.log(g["predicted_per_user"].to_numpy()[order])
        y = g["predicted_per_gpu"].to_numpy()[order]
        at = np.log(g["measured_per_user"].to_numpy())
        inside = (at >= x[0]) & (at <= x[-1])
        pred = np.where(inside, np.interp(at, x, y), np.nan)
        out.append(g.assign(distance=pred / g["measured_per_gpu"].to_numpy() - 1))
    return pd.concat(out, ignore_index=True) if out else points.assign(distance=pd.Series(dtype=float))


def front_summary(table: pd.DataFrame) -> list[dict]:
    """Per system × model (and all together): front setups, measured points, points compared (inside the
    predicted front's range) and the median distance, absolute and signed; empty without a front setup."""
    d = front_distances(front_points(table))
    if d.empty:
        return []
    rows = []
    for key, g in [(("all", "all"), d), *d.groupby(["system", "model_path"])]:
        near = g["distance"].dropna()
        rows.append({"system": key[0], "model": key[1], "setups": int(g["front_setup"].nunique()),
                     "points": len(g), "compared": len(near),
                     "median_abs_distance": float(near.abs().median()) if len(near) else None,
                     "median_distance": float(near.median()) if len(near) else None})
    return rows


__all__ = ["FRONT_BLIND", "MIN_POINTS", "front_distances", "front_points", "front_summary"]
