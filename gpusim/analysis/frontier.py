"""The throughput–interactivity frontier: which runs may stand on it, the front itself, and its figure.

A point is one deployment served at one arrival rate: steady output tokens/s per GPU against tokens/s per
user (1 / median TPOT). It may stand on the front only if it is a steady state that meets the limits
(`meets_limits`): its steady window opened after the batch turned over (`steady_turned_over`), the engine kept
up with the arrivals (not `overloaded`), and its p99 TTFT and TPOT are within the limits. Points that miss are
drawn hollow and never joined (docs/design.md, *Latency under load*).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter


@dataclass(frozen=True)
class Limits:
    """p99 limits a frontier point must meet (infinite: unbounded)."""

    ttft_p99_s: float = math.inf
    tpot_p99_s: float = math.inf

    def text(self) -> str:
        parts = [f"p99 TTFT ≤ {self.ttft_p99_s * 1e3:g} ms" if math.isfinite(self.ttft_p99_s) else "",
                 f"p99 TPOT ≤ {self.tpot_p99_s * 1e3:g} ms" if math.isfinite(self.tpot_p99_s) else ""]
        return ", ".join(p for p in parts if p) or "no latency limits"


def is_steady(summary: Mapping) -> bool:
    """Whether a run's steady rate is a stationary one the deployment sustains (turned over, not overloaded)."""
    return bool(summary.get("steady_turned_over")) and not summary.get("overloaded")


def meets_limits(summary: Mapping, limits: Limits) -> bool:
    """Whether a run may stand on a front: steady (`is_steady`) and its p99 TTFT and TPOT within `limits`."""
    ttft, tpot = summary.get("ttft_p99_s"), summary.get("tpot_p99_s")
    return (is_steady(summary) and ttft is not None and tpot is not None
            and ttft <= limits.ttft_p99_s and tpot <= limits.tpot_p99_s)


def pareto_front(x: np.ndarray, y: np.ndarray) -> list[int]:
    """Indices of the points no other point beats on both x and y (larger is better), by x descending."""
    front, best_y = [], -np.inf
    for i in sorted(range(len(x)), key=lambda i: (-x[i], -y[i])):
        if y[i] > best_y:
            front.append(i)
            best_y = y[i]
    return front


def on_front(x: np.ndarray, y: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """A boolean per point: on the Pareto front of the `eligible` points (the others never are)."""
    x, y, eligible = np.asarray(x, float), np.asarray(y, float), np.asarray(eligible, bool)
    keep = np.flatnonzero(eligible & np.isfinite(x) & np.isfinite(y))
    out = np.zeros(len(x), bool)
    out[keep[pareto_front(x[keep], y[keep])]] = True
    return out


def fronts(points: pd.DataFrame, groups: Sequence[str] = ("hardware",)) -> np.ndarray:
    """A boolean per row of `points` (`tokens_per_s_per_user`, `tokens_per_s_per_gpu`, `meets_limits`): on the front
    of its group's eligible points (`on_front`), a group per value of the `groups` columns it has."""
    marks = np.zeros(len(points), bool)
    keys = [g for g in groups if g in points.columns]
    for rows in (points.groupby(keys).indices.values() if keys else [np.arange(len(points))]):
        g = points.iloc[rows]
        marks[rows] = on_front(g["tokens_per_s_per_user"].to_numpy(), g["tokens_per_s_per_gpu"].to_numpy(),
                               g["meets_limits"].to_numpy())
    return marks


TOKENS = EngFormatter(sep="")


def draw_fronts(points: pd.DataFrame, title: str, groups: Sequence[str] = ("hardware",)) -> Figure:
    """Tokens/s/GPU against tokens/s/user: filled where a point meets its limits, hollow where not, the front of
    each group joined and each of its deployments named at its highest point on it. `points` has the columns of
    `gpusim frontier --json`'s points (`tokens_per_s_per_user`, `tokens_per_s_per_gpu`, `meets_limits`, `on_front`,
    `deployment`)."""
    fig = Figure(figsize=(10, 7), layout="constrained")
    ax = fig.subplots()
    keys = [g for g in groups if g in points.columns]
    for i, (key, g) in enumerate(points.groupby(keys, sort=True) if keys else [("all", points)]):
        name = " ".join(map(str, np.atleast_1d(key)))
        ok = g["meets_limits"].astype(bool)
        ax.scatter(g["tokens_per_s_per_user"][ok], g["tokens_per_s_per_gpu"][ok], color=f"C{i}", s=28,
                   label=f"{name}: meets the limits")
        ax.scatter(g["tokens_per_s_per_user"][~ok], g["tokens_per_s_per_gpu"][~ok], facecolors="none",
                   edgecolors=f"C{i}", s=28, label=f"{name}: misses them (or not steady)")
        f = g[g["on_front"].astype(bool)].sort_values("tokens_per_s_per_user")
        ax.plot(f["tokens_per_s_per_user"], f["tokens_per_s_per_gpu"], "-", color=f"C{i}", lw=2, zorder=0,
                label=f"{name}: front")
        for _, p in f.loc[f.groupby("deployment")["tokens_per_s_per_gpu"].idxmax()].iterrows():  # once each
            ax.annotate(str(p["deployment"]), (p["tokens_per_s_per_user"], p["tokens_per_s_per_gpu"]),
                        textcoords="offset points", xytext=(4, 3), fontsize=6, color=f"C{i}")
    ax.set(xlabel="output tokens/s per user (1 / median TPOT)", ylabel="steady output tokens/s per GPU",
           title=title, xscale="log")
    ax.yaxis.set_major_formatter(TOKENS)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return fig


__all__ = ["Limits", "draw_fronts", "fronts", "is_steady", "meets_limits", "on_front", "pareto_front"]
