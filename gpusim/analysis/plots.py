"""Figures from a sweep's results.parquet or a run's output: scaling, generations, pareto, latency-cdf (PNG or SVG).

Figures are built with matplotlib's object API (no pyplot), so no GUI backend or global state is involved.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, LogFormatter

from gpusim.analysis.frontier import draw_fronts, fronts, is_steady
from gpusim.analysis.outputs import RESULTS
from gpusim.errors import InputError, unknown_name
from gpusim.loadgen.metrics import add_latency_columns

GENERATIONS = ["h100-hgx", "h200-hgx", "b200-hgx", "b300-hgx", "gb200-nvl72", "gb300-nvl72", "vr-nvl72"]
"""Hardware in generation order, left to right in the `generations` figure."""
FORMATS = (".png", ".svg")
MAX_CDF_LINES = 12
TOKENS = EngFormatter(sep="")
LABEL = EngFormatter(places=1, sep="")


def plot(kind: str, results: Path, out: Path, where: Mapping[str, str] | None = None) -> Path:
    """Draw figure `kind` from a sweep's results (rows filtered by `where` column=value) into `out`."""
    if kind not in KINDS:
        raise unknown_name("command line", "kind", kind, list(KINDS))
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise InputError("command line", "out", f"{out.name}: unknown image type; valid: {', '.join(FORMATS)}")
    df = select(read_results(Path(results)), where or {}, str(results))
    draw, columns = KINDS[kind]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(str(results), missing[0], f"column missing for a {kind} plot; needs {', '.join(columns)}")
    fig = draw(df, Path(results))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150, bbox_inches="tight")
    return out


def read_results(path: Path) -> pd.DataFrame:
    """A results table with a `requests_file` column: a sweep's results.parquet (or its folder), or one run's
    --out folder (or its summary.json or requests.parquet) as a table of one row; else an InputError."""
    folder = path if path.is_dir() else path.parent
    if (path.is_dir() and (path / "summary.json").exists()) or (
            path.name in ("summary.json", "requests.parquet") and (folder / "summary.json").exists()):
        return _run_row(folder)
    if path.is_dir():
        path = path / RESULTS
    try:
        df = pd.read_parquet(path)
    except FileNotFoundError:
        raise InputError(str(path), "-", "file not found; `gpusim sweep` writes DIR/results.parquet, `gpusim run "
                         "--out DIR` writes DIR/summary.json") from None
    except Exception as exc:
        raise InputError(str(path), "-", f"not a Parquet results table ({type(exc).__name__})") from None
    if "point_id" in df.columns:
        df["requests_file"] = [str(path.parent / "requests" / f"{p}.parquet") for p in df["point_id"]]
    return df


def _run_row(folder: Path) -> pd.DataFrame:
    """One run's summary.json as a results row (point id `run`), its requests beside it."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(str(folder / "summary.json"), "-", f"not a run summary ({type(exc).__name__})") from None
    row = {k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in summary.items()}
    row.update(point_id="run", requests_file=str(folder / "requests.parquet"))
    return pd.DataFrame([row])


def select(df: pd.DataFrame, where: Mapping[str, str], source: str) -> pd.DataFrame:
    """Rows whose column equals the value (compared as text), for each `where` item."""
    for key, value in where.items():
        if key not in df.columns:
            raise InputError(source, key, f"no such column; valid: {', '.join(df.columns)}")
        df = df[df[key].astype(str) == str(value)]
    if df.empty:
        raise InputError(source, "-", f"no rows{' match ' + str(dict(where)) if where else ''}")
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Finished points only (a table without a status column is taken as all finished)."""
    return df[df["status"] == "ok"] if "status" in df.columns else df


PER_SAMPLE_UNITS = ("samples/s", "queries/s")


def throughput(df: pd.DataFrame) -> tuple[pd.Series, str]:
    """Each run's throughput in its benchmark's unit: MLPerf's `result` where the rows are scored per sample
    (Qwen3-VL, Wan 2.2, DLRMv3 in one unit), else output tokens/s."""
    units = set(df["result_unit"].dropna()) if "result_unit" in df else set()
    if len(units) == 1 and units <= set(PER_SAMPLE_UNITS):
        return df["result"].astype(float), units.pop()
    return df["output_tokens_per_s"], "tokens/s"


def plotted_rate(df: pd.DataFrame) -> tuple[pd.Series, str, bool]:
    """What a throughput figure draws per run, its unit, and whether that is the steady rate: each run's steady
    rate (after the warm-up, before the drain) where every run has one whose batch turned over, so a curve shows
    the system rather than the tail of its longest requests; else the benchmark's own result (`throughput`,
    LoadGen's), since a window that opened while the batch was still filling overstates the rate (a 600 s
    DeepSeek-R1 Offline run on GB300 NVL72: 17.4k steady against 8.5k LoadGen's per GPU). The scaling and
    generations figures of the same runs draw the same numbers."""
    values, unit = throughput(df)
    turned = df["steady_turned_over"].fillna(False).astype(bool).all() if "steady_turned_over" in df else True
    steady = bool(unit == "tokens/s" and "steady_output_tokens_per_s" in df
                  and df["steady_output_tokens_per_s"].notna().all() and turned)
    return (df["steady_output_tokens_per_s"].astype(float) if steady else values), unit, steady


SERIES = ["hardware", "benchmark", "scenario", "deployment.mode"]
"""What makes one scaling curve: a system, a benchmark, a scenario and the deployment's layout (replicas of an
aggregated deployment against disaggregated pools that may cross racks)."""


def scaling_efficiency(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Each curve of `SERIES` (a column missing is one value) with, per size, its best run: `num_gpus`, the
    rate (`output_tokens_per_s`), `ideal` (linear from the curve's smallest size) and `efficiency` =
    rate(N) / (N/N0 · rate(N0)), N systems. The label names the layout only where the curves differ in it."""
    keys = [k for k in SERIES if k in df]
    shown = [i for i, k in enumerate(keys) if k != "deployment.mode" or df[k].nunique(dropna=False) > 1]
    out = []
    for key, g in df.groupby(keys, sort=True, dropna=False):
        best = g.sort_values("output_tokens_per_s").groupby("systems").last().sort_index()
        n0, tps0 = best.index[0], best["output_tokens_per_s"].iloc[0]
        best = best.assign(ideal=tps0 * best.index.to_numpy() / n0)
        best = best.assign(efficiency=best["output_tokens_per_s"] / best["ideal"])
        out.append((" ".join(str(key[i]) for i in shown), best))
    return out


def scaling(df: pd.DataFrame, _: Path) -> Figure:
    """Tokens/s and scaling efficiency vs GPUs per curve of `scaling_efficiency`, of the rate `plotted_rate`
    picks."""
    df = ok_rows(df)
    values, unit, steady = plotted_rate(df)
    df = df.assign(output_tokens_per_s=values)
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    effs = [1.0]
    for i, (label, best) in enumerate(scaling_efficiency(df)):
        gpus, tps, eff = best["num_gpus"].to_numpy(), best["output_tokens_per_s"].to_numpy(), best["efficiency"]
        effs.extend(eff)
        (line,) = left.plot(gpus, tps, "o-", label=label)
        left.plot(gpus, best["ideal"], ":", color=line.get_color(), alpha=0.7)
        right.plot(gpus, eff, "o-", color=line.get_color(), label=label)
        for x, e in zip(gpus, eff, strict=True):  # alternate above and below so groups do not collide
            right.annotate(f"{e:.3f}", (x, e), textcoords="offset points", xytext=(0, 7 if i % 2 == 0 else -13),
                           ha="center", fontsize=8, color=line.get_color())
    left.plot([], [], "k:", label="ideal (linear from the smallest size)")
    right.axhline(1.0, color="k", ls=":", label="ideal")
    left.set(xlabel="GPUs", ylabel="steady output tokens/s" if steady else ("output " if unit == "tokens/s" else "")
             + unit, title="Throughput")
    left.yaxis.set_major_formatter(TOKENS)
    right.set(xlabel="GPUs", ylabel="throughput(N) / (N · throughput(1))", title="Scaling efficiency",
              ylim=(min(0.9, min(effs) - 0.03), max(1.03, max(effs) + 0.03)))
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def generations(df: pd.DataFrame, _: Path) -> Figure:
    """Bars per hardware in generation order: tokens/s per GPU and per system, one row per benchmark."""
    known = [h for h in GENERATIONS if h in set(df["hardware"])]
    order = known + sorted(set(df["hardware"]) - set(known))
    benches, scens = sorted(df["benchmark"].unique()), sorted(df["scenario"].unique())
    fig = Figure(figsize=(13, 3.4 * len(benches) + 0.6), layout="constrained")
    axes = fig.subplots(len(benches), 2, squeeze=False)
    width = 0.8 / len(scens)
    for row, bench in zip(axes, benches, strict=True):
        mine = df[df["benchmark"] == bench]  # failed points too: their bars say n/a
        rate, unit, steady = plotted_rate(ok_rows(mine))
        mine = mine.assign(plotted=rate.reindex(mine.index))
        for ax, per_system in zip(row, (False, True), strict=True):
            for j, scen in enumerate(scens):
                sel = mine[mine["scenario"] == scen]
                _bars(ax, sel, order, per_system, np.arange(len(order)) + (j - (len(scens) - 1) / 2) * width,
                      width, f"C{j}", scen)
            ax.set_xticks(range(len(order)), [_graded(h) for h in order], rotation=20, fontsize=8)
            ax.yaxis.set_major_formatter(TOKENS)
            ax.grid(axis="y", alpha=0.3)
            what = ("steady output tokens/s" if steady else "output tokens/s") if unit == "tokens/s" else unit
            ax.set_title(f"{bench}: {what} {'per system (rack or 8-GPU node)' if per_system else 'per GPU'}",
                         fontsize=10)
            ax.margins(y=0.15)
            ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=8)
    if any(_graded(h) != h for h in order):
        fig.suptitle("Each bar names its deployment. * key numbers (dense FLOPS, exponential rate, HBM, tensor "
                     "energy) of grade C/D: derived, fitted or assumed, not a datasheet", fontsize=9)
    return fig


def key_grade(hardware: str) -> str:
    """The weakest evidence grade among a system's key numbers (`GpuSpec.key_grade`)."""
    from gpusim.specs.hardware import load_hardware

    return load_hardware(hardware).gpu.key_grade()


def _graded(hardware: str) -> str:
    try:
        return f"{hardware} *" if key_grade(hardware) in ("C", "D") else hardware
    except InputError:  # a system this installation has no profile of
        return hardware


def _bars(ax, sel: pd.DataFrame, order: list[str], per_system: bool, xs: np.ndarray, width: float,
          color: str, label: str) -> None:
    ok = ok_rows(sel)
    values = ok["plotted"] / (ok["systems"] if per_system else ok["num_gpus"])
    top = ok.loc[values.groupby(ok["hardware"]).idxmax()] if len(ok) else ok
    best = values.groupby(ok["hardware"]).max()
    names = dict(zip(top["hardware"], top["deployment.name"], strict=True)) if "deployment.name" in top else {}
    heights = [best.get(h, np.nan) for h in order]
    ax.bar(xs, np.nan_to_num(heights), width, color=color, label=label)
    tried = set(sel["hardware"])
    for x, h, hw in zip(xs, heights, order, strict=True):
        if not np.isnan(h):
            ax.annotate(LABEL(h), (x, h), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
            if hw in names:
                ax.annotate(str(names[hw]), (x, 0), textcoords="offset points", xytext=(0, 3), ha="center",
                            va="bottom", rotation=90, fontsize=6, color="white")
        elif hw in tried:
            ax.annotate("n/a", (x, 0), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7,
                        color="0.4")


def pareto(df: pd.DataFrame, _: Path) -> Figure:
    """Steady tokens/s/GPU vs tokens/s/user (1 / median TPOT); each hardware and benchmark's front joins only the
    points that are steady and meet their scenario's limits (`gpusim.analysis.frontier`), the rest hollow."""
    df = ok_rows(df)
    rows = df.to_dict("records")
    points = pd.DataFrame({
        "tokens_per_s_per_user": 1.0 / df["tpot_p50_s"].astype(float).to_numpy(),
        "tokens_per_s_per_gpu": df["steady_output_tokens_per_s_per_gpu"].astype(float).to_numpy(),
        "meets_limits": [bool(r.get("latency_met", False)) and is_steady(r) for r in rows],
        "deployment": df["deployment.name"] if "deployment.name" in df.columns else df.get("hardware", "-"),
        **{c: df[c].to_numpy() for c in ("hardware", "benchmark") if c in df.columns},
    })
    groups = [c for c in ("hardware", "benchmark") if c in points.columns]
    points["on_front"] = fronts(points, groups)
    return draw_fronts(points, "Throughput vs interactivity (steady rates)", groups)


def latency_cdf(df: pd.DataFrame, results: Path) -> Figure:
    """CDFs of TTFT and TPOT per point, from DIR/requests/<point_id>.parquet."""
    df = ok_rows(df)
    if len(df) > MAX_CDF_LINES:
        raise InputError(str(results), "-", f"{len(df)} points are too many for one CDF plot (at most "
                         f"{MAX_CDF_LINES}); narrow them with --where COLUMN=VALUE")
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    axes = fig.subplots(1, 2)
    for (_, row), label in zip(df.iterrows(), point_labels(df), strict=True):
        path = Path(row["requests_file"])
        if not path.exists():
            raise InputError(str(path), "-", "request records missing (sweep with `requests: true`)")
        lat = add_latency_columns(pd.read_parquet(path))
        for ax, col in zip(axes, ("ttft_s", "tpot_s"), strict=True):
            v = np.sort(lat[col].dropna().to_numpy() * 1e3)
            ax.plot(v, np.arange(1, len(v) + 1) / max(len(v), 1), label=label)
    for ax, name in zip(axes, ("TTFT", "TPOT"), strict=True):
        ax.set(xlabel=f"{name} (ms)", ylabel="fraction of requests", title=f"{name} CDF", xscale="log", ylim=(0, 1.01))
        ax.axhline(0.99, color="0.5", ls=":", lw=1)
        ax.xaxis.set_major_formatter(LogFormatter())
        ax.xaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=8)
    return fig


def point_labels(df: pd.DataFrame) -> list[str]:
    """A label per row from the sweep parameters that differ between the rows (else the point id)."""
    if "params" not in df.columns:
        return [str(p) for p in df.get("point_id", df.index)]
    params = [json.loads(p) for p in df["params"]]
    keys = [k for k in dict.fromkeys(k for p in params for k in p) if len({str(p.get(k)) for p in params}) > 1]
    return [", ".join(f"{k}={p.get(k)}" for k in keys) or str(pid) for p, pid in zip(params, df["point_id"],
                                                                                      strict=True)]


KINDS: dict[str, tuple[Callable[[pd.DataFrame, Path], Figure], list[str]]] = {
    "scaling": (scaling, ["hardware", "benchmark", "scenario", "systems", "num_gpus", "output_tokens_per_s"]),
    "generations": (generations, ["hardware", "benchmark", "scenario", "systems", "num_gpus", "output_tokens_per_s",
                                  "output_tokens_per_s_per_gpu"]),
    "pareto": (pareto, ["steady_output_tokens_per_s_per_gpu", "tpot_p50_s"]),
    "latency-cdf": (latency_cdf, ["point_id", "requests_file"]),
}
"""Each kind: its drawing function and the result columns it needs."""

def plan_levels(levels: list[dict]) -> Figure:
    """A plan's cost per month against the service level (`gpusim plan --levels`): one line per candidate over
    the tokens/s each user sees, only at the levels where it meets both limits; each point labelled with its
    systems."""
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    names = sorted({p["hardware"] for level in levels for p in level["plans"]})
    for name in names:
        pts = [(level["tokens_per_s_per_user"], p["usd_per_month"], p["systems"]) for level in levels
               for p in level["plans"] if p["hardware"] == name and p["meets_sla"] and p["usd_per_month"]]
        if not pts:
            continue
        xs, ys, systems = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, marker="o", label=name)
        for x, y, n in zip(xs, ys, systems, strict=True):
            ax.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("tokens/s per user (1 / p99 TPOT limit)")
    ax.set_ylabel("$ per month (systems to buy, labelled)")
    ax.yaxis.set_major_formatter(EngFormatter(unit="$", sep=""))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Cost of the fleet that meets the level", fontsize=10)
    return fig

