"""A validation report: markdown summary and predicted-vs-measured scatter plots per partition."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from gpusim.validate.errors import worst
from gpusim.validate.generations import WITHIN
from gpusim.validate.runner import WAVES

_KINDS_PLOTTED = ("system", "model", "backend", "mode", "isl/osl")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def partition_table(partitions: list[dict], kinds: tuple[str, ...] | None = None) -> str:
    """Markdown rows: kind, value, predicted/rows, TTFT and TPOT MAPE, median APE and bias."""
    lines = ["| partition | value | predicted / rows | TTFT MAPE | TTFT median | TTFT bias | TPOT MAPE | "
             "TPOT median | TPOT bias |", "|---|---|---|---|---|---|---|---|---|"]
    for p in partitions:
        if kinds is not None and p["kind"] not in kinds:
            continue
        lines.append(f"| {p['kind']} | {p['value']} | {p['rows_predicted']} / {p['rows']} | {_pct(p['mape_ttft'])} | "
                     f"{_pct(p['median_ape_ttft'])} | {_pct(p['bias_ttft'])} | {_pct(p['mape_tpot'])} | "
                     f"{_pct(p['median_ape_tpot'])} | {_pct(p['bias_tpot'])} |")
    return "\n".join(lines)


def scatter_table(stats: list[dict]) -> str:
    """Markdown rows of `scatter_stats`: partition, repeated measurements, TTFT and TPOT scatter."""
    lines = ["| partition | value | repeated measurements | TTFT scatter | TPOT scatter |", "|---|---|---|---|---|"]
    lines += [f"| {p['kind']} | {p['value']} | {p['rows_repeated']} | {_pct(p['scatter_ttft'])} | "
              f"{_pct(p['scatter_tpot'])} |" for p in stats if p["rows_repeated"]]
    return "\n".join(lines)


def first_wave_table(weights: list[dict]) -> str:
    """Markdown rows of `first_wave_weights`: group, rows used, implied first-wave weight (quartiles)."""
    lines = ["| backend | rows | first-wave weight implied by the measurements: median | quartiles |",
             "|---|---|---|---|"]
    lines += [f"| {w['value']} | {w['rows']} | {w['weight_median']:.2f} | {w['weight_q25']:.2f}–{w['weight_q75']:.2f} |"
              for w in weights if w["rows"]]
    return "\n".join(lines)


def slot_table(bands: list[dict]) -> str:
    """Markdown rows of `slot_queueing`: one per band of concurrency over decode slots."""
    lines = ["| c / slots | rows | TTFT predicted / measured | TPOT predicted / measured | TTFT ratio / TPOT ratio "
             "| measured TTFT / (OSL · TPOT) | Little's bound, c / S − 1 |", "|---|---|---|---|---|---|---|"]
    for b in bands:
        if not b["rows"]:
            continue
        lo, hi = b["low"], b["high"]
        label = f"< {hi:g}" if lo == -math.inf else f"≥ {lo:g}" if hi == math.inf else f"{lo:g}–{hi:g}"
        cells = [_num(b[k]) for k in ("ttft_ratio", "tpot_ratio", "ttft_over_tpot", "measured_wait", "little")]
        lines.append(f"| {label} | {b['rows']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def target_table(targets: dict) -> str:
    """Markdown: how many partitions meet every MAPE target, per kind, then each partition against them
    with the measurement scatter of its repeated setups beside it."""
    rows, goal = targets["partitions"], targets["mape"]
    limits = " and ".join(f"{m.upper()} ≤ {_pct(v)}" for m, v in goal.items())
    met = sum(p["meets"] for p in rows)
    kinds = dict.fromkeys(p["kind"] for p in rows)
    per_kind = ", ".join(f"{k} {sum(p['meets'] for p in rows if p['kind'] == k)} of "
                         f"{sum(p['kind'] == k for p in rows)}" for k in kinds)
    heads = " | ".join(f"{m.upper()} MAPE" for m in goal) + " | meets | repeated measurements | " + " | ".join(
        f"{m.upper()} scatter" for m in goal)
    lines = [f"{met} of {len(rows)} partitions with at least {targets['min_rows']} predicted rows meet {limits} "
             f"({per_kind}).", "", f"| partition | value | predicted | {heads} |",
             "|---|---|---|" + "---|" * (2 * len(goal) + 2)]
    for p in rows:
        mapes = " | ".join(_pct(p[f"mape_{m}"]) for m in goal)
        floors = " | ".join(_pct(p[f"scatter_{m}"]) for m in goal)
        lines.append(f"| {p['kind']} | {p['value']} | {p['rows_predicted']} | {mapes} | "
                     f"{'yes' if p['meets'] else 'no'} | {p['rows_repeated']} | {floors} |")
    return "\n".join(lines)


def generation_table(ratios: list[dict]) -> str:
    """Markdown rows of `generations.generation_ratios`: pair, group, setups, then per metric the median
    measured and predicted speed-ups, their median agreement and the share of setups within `WITHIN`."""
    heads = " | ".join(f"{m} measured | {m} predicted | {m} agreement | {m} within {WITHIN:.0%}"
                       for m in ("TTFT", "TPOT"))
    lines = [f"| pair | setups | {heads} |", "|---|---|" + "---|" * 8]
    for r in ratios:
        cells = " | ".join(f"{r[f'measured_{m}']:.2f} | {r[f'predicted_{m}']:.2f} | {r[f'agreement_{m}']:.2f} | "
                           f"{r[f'within_{m}']:.0%}" for m in ("ttft", "tpot"))
        name = f"**{r['pair']}**" if r["group"] == "all" else f"{r['pair']}: {r['group']}"
        lines.append(f"| {name} | {r['setups']} | {cells} |")
    return "\n".join(lines)


def front_table(fronts: list[dict]) -> str:
    """Markdown rows of `fronts.front_summary`: per system × model, setups, points, points compared and the median
    distance of the predicted front from the measured one (absolute and signed)."""
    lines = ["| system | model | setups | points | compared | median abs distance | median distance |",
             "|---|---|---|---|---|---|---|"]
    for f in fronts:
        name = "**all** | all" if f["system"] == "all" else f"{f['system']} | {f['model']}"
        lines.append(f"| {name} | {f['setups']} | {f['points']} | "
                     f"{f['compared']} | {_pct(f['median_abs_distance'])} | {_pct(f['median_distance'])} |")
    return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def scatter(table: pd.DataFrame, kind: str, column: str, path: Path) -> None:
    """One figure for a partition kind: TTFT and TPOT predicted vs measured, coloured by its values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[table["predicted"]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, metric in zip(axes, ("ttft", "tpot"), strict=True):
        for value, g in ok.groupby(column, sort=True):
            ax.scatter(g[f"measured_{metric}"], g[f"predicted_{metric}"], s=8, alpha=0.6, label=str(value))
        lo = max(1e-3, float(ok[[f"measured_{metric}", f"predicted_{metric}"]].min().min())) if len(ok) else 1e-3
        hi = float(ok[[f"measured_{metric}", f"predicted_{metric}"]].max().max()) if len(ok) else 1.0
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        for f in (0.5, 2.0):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
        ax.set(xscale="log", yscale="log", xlabel=f"measured {metric.upper()} (ms)",
               ylabel=f"predicted {metric.upper()} (ms)", title=f"{metric.upper()} by {kind} (dotted: 2x)")
    axes[1].legend(fontsize=6, loc="upper left", markerscale=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


_PAIRED_SECTIONS = (
    ("generations", "Generation ratios on matched setups",
     "Setups the sample measured on both GPUs of a pair (every column equal but the system, the engine's version and "
     "the concurrency too): the newer GPU's speed-up, older / newer, measured and predicted (medians over the "
     "setups), and their agreement, predicted / measured speed-up (median; below 1 the model puts the generations "
     "closer than the silicon does).", generation_table),
    ("fronts", "Throughput–interactivity fronts",
     "Setups measured at several concurrencies (`gpusim/validate/fronts.py`): each measured point's tokens/s/GPU, "
     "c × OSL / (TTFT + (OSL − 1) × TPOT) / GPUs, against the predicted front at the same tokens/s/user (1 / TPOT); "
     "distance = predicted / measured − 1 (+: gpusim's front is higher). 'compared' counts the points inside the "
     "predicted front's range.", front_table),
)
"""Report sections that set measured beside predicted on matched setups: summary key, heading, text, table."""


def write_report(out: Path, table: pd.DataFrame, summary: dict, title: str, command: str) -> Path:
    """Write `out/README.md` and one scatter PNG per partition kind; returns the markdown path."""
    from gpusim.validate.silicon import PARTITIONS

    out.mkdir(parents=True, exist_ok=True)
    parts = summary["partitions"]
    lines = [f"# {title}", "", f"Regenerate: `{command}`", "",
             f"Rows: {summary['rows_total']}, predicted {summary['rows_predicted']} "
             f"({100 * summary['rows_predicted'] / max(summary['rows_total'], 1):.1f}%). "
             f"Overall TTFT MAPE {_pct(summary['mape_ttft'])} (median APE {_pct(summary.get('median_ape_ttft'))}), "
             f"TPOT MAPE {_pct(summary['mape_tpot'])} (median APE {_pct(summary.get('median_ape_tpot'))}). "
             "APE = |predicted − measured| / measured; MAPE = mean APE over predicted rows; bias = mean signed "
             "relative error (+: gpusim predicts slower).", ""]
    if summary.get("wall_s") is not None:
        lines += [f"Wall time: {summary['wall_s']:.0f} s.", ""]
    for key, title, text, rows_of in _PAIRED_SECTIONS:
        if summary.get(key):
            lines += [f"## {title}", "", text, "", rows_of(summary[key]), ""]
    lines += ["## Rows not predicted", "", "| reason | rows |", "|---|---|"]
    lines += [f"| {reason} | {n} |" for reason, n in summary.get("not_predicted", {}).items()] or ["| - | 0 |"]
    lines += ["", "## Worst partitions (exact configuration, at least 5 predicted rows)", ""]
    configs = [p for p in parts if p["kind"] == "config"]
    for metric in ("ttft", "tpot"):
        lines += [f"### by {metric.upper()} MAPE", "", partition_table(worst(configs, metric, 10, 5)), ""]
    if any(p["kind"] == "reading" for p in parts):
        lines += ["## By reading rule", "", "Rows grouped by the documented rules they were read by (the notes of "
                  "their status in rows.csv; 'as stated': none).", "", partition_table(parts, ("reading",)), ""]
    if summary.get("targets"):
        lines += ["## Against the targets", "",
                  "Each partition's MAPE against the targets, and the scatter of the measurements the sample "
                  "repeats within it (a deterministic prediction of a setup measured twice with different "
                  "results cannot get much below that scatter).", "", target_table(summary["targets"]), ""]
    lines += ["## All partitions", "", partition_table(parts), ""]
    if summary.get("measurement_scatter"):
        lines += ["## Measurement scatter: the floor under any model's error", "",
                  "Setups the sample measured more than once (every column but the id, the source and the "
                  "results equal) with different results: the mean |measurement / the setup's median − 1| "
                  "over their distinct measurements. A deterministic prediction of such a setup cannot get "
                  "much below it.", "", scatter_table(summary["measurement_scatter"]), ""]
    if summary.get("first_wave") and summary["first_wave"][0]["rows"]:
        waves = summary.get("waves", WAVES)
        lines += ["## TTFT: how much the first wave weighs", "",
                  "A closed-loop run sends its first `concurrency` requests together; its mean TTFT is "
                  "w × the first wave's + (1 − w) × the steady state's. The simulation sends "
                  f"{waves} × concurrency requests, so w = {1 / waves:.2f} in it. On aggregated rows whose "
                  "predicted first wave is distinguishable from the steady state (≥ 25% above it), the "
                  "measured mean implies w = (measured − steady) / (first − steady), both predicted:", "",
                  first_wave_table(summary["first_wave"]), ""]
    if any(b["rows"] for b in summary.get("slot_queueing") or ()):
        lines += ["## Disaggregated TTFT: waiting for a decode slot", "",
                  "Disaggregated rows by c / S, the concurrency over the decode slots the case runs (decode "
                  "instances × their batch). With more requests than slots a closed loop keeps c − S waiting, "
                  "each (Little's law) for c / S − 1 of a request's decode time, and the decode worker streams "
                  "the first token once it takes the request; there TTFT is set by the decode step, and a TTFT "
                  "ratio near the TPOT ratio says the TTFT error is the TPOT error carried over. Medians:", "",
                  slot_table(summary["slot_queueing"]), ""]
    lines += ["## Scatter plots", ""]
    for kind in _KINDS_PLOTTED:
        column = PARTITIONS[kind][0]
        name = f"scatter-{_slug(kind)}.png"
        scatter(table, kind, column, out / name)
        lines += [f"![{kind}]({name})", ""]
    path = out / "README.md"
    path.write_text("\n".join(lines))
    return path


__all__ = ["first_wave_table", "front_table", "generation_table", "partition_table", "scatter", "scatter_table",
           "slot_table", "target_table", "write_report"]
