"""`gpusim report DIR`: one self-contained HTML page of a run, a sweep or an mlperf output folder.

Figures are PNGs inlined as data URIs and the styles are inline, so the file opens without network access.
A run's folder (`gpusim run --out`) gives the summary and deployment, the engine's activity over time
(timeline.csv), the TTFT/TPOT distributions against the scenario's limits (requests.parquet) and where a
typical step's time goes (steps.json); a sweep's folder gives its results table and the `gpusim plot`
figures; a folder of mlperf outputs gives one section per experiment.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from gpusim.analysis import plots
from gpusim.analysis.outputs import RESULTS
from gpusim.errors import InputError
from gpusim.loadgen.metrics import add_latency_columns

SUMMARY_ROWS = [
    ("hardware", "hardware", "{}"), ("systems", "systems", "{}"), ("num_gpus", "GPUs used", "{:,}"),
    ("hardware_gpus", "GPUs in the hardware", "{:,}"), ("benchmark", "benchmark", "{}"), ("model", "model", "{}"),
    ("scenario", "scenario", "{}"), ("target_qps", "target QPS", "{:,.3g}"),
    ("completed_requests", "completed requests", "{:,}"), ("output_tokens", "output tokens", "{:,}"),
    ("simulated_s", "simulated seconds", "{:,.2f}"), ("output_tokens_per_s", "output tokens/s", "{:,.1f}"),
    ("output_tokens_per_s_per_gpu", "output tokens/s/GPU", "{:,.2f}"),
    ("steady_output_tokens_per_s_per_gpu", "steady output tokens/s/GPU", "{:,.2f}"),
    ("steady_turned_over", "steady window after the batch turned over", "{}"),
    ("preemptions_per_request", "preemptions per request", "{:.3f}"), ("samples_per_s", "samples/s", "{:,.3f}"),
    ("peak_qps", "peak QPS", "{:,.3f}"), ("result_tokens_per_s", "result tokens/s", "{:,.1f}"),
    ("ttft_p50_s", "TTFT p50 (s)", "{:.4g}"), ("ttft_p99_s", "TTFT p99 (s)", "{:.4g}"),
    ("tpot_p50_s", "TPOT p50 (s)", "{:.4g}"), ("tpot_p99_s", "TPOT p99 (s)", "{:.4g}"),
    ("valid", "valid", "{}"), ("invalid_reason", "why invalid", "{}"),
    ("energy_j_per_token", "energy (J/token)", "{:.4g}"), ("usd_per_million_tokens", "$ per million tokens", "{:.4g}"),
]
"""Summary keys shown, with their label and format (keys a summary lacks are left out)."""

SWEEP_COLUMNS = ["point_id", "status", "hardware", "systems", "benchmark", "scenario", "target_qps",
                 "deployment.name", "num_gpus", "output_tokens_per_s_per_gpu", "steady_output_tokens_per_s_per_gpu",
                 "steady_turned_over", "preemptions_per_request", "ttft_p99_s", "tpot_p99_s", "valid"]

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%}p.note{color:#666}"""

CHECK = """<script>
addEventListener('load', () => {
  const imgs = [...document.querySelectorAll('img.figure')];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const s = document.getElementById('render-status');
  s.dataset.figures = imgs.length; s.dataset.rendered = ok;
  s.textContent = ok + ' of ' + imgs.length + ' figures rendered';
});
</script>"""
"""Counts the figures the browser decoded (what the headless-browser test reads back)."""


def write_report(folder: Path, out: Path | None = None) -> Path:
    """Write the report of `folder` to `out` (default folder/report.html), atomically; return its path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("command line", "dir", f"{folder} is not a folder; valid: the --out folder of gpusim run, "
                         "sweep or mlperf")
    title, body = _sections(folder)
    out = Path(out) if out is not None else folder / "report.html"
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"<p id='render-status' class='note'>figures not checked (scripts off)</p>{body}{CHECK}</body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page)
    tmp.replace(out)
    return out


def _sections(folder: Path) -> tuple[str, str]:
    if (folder / "summary.json").exists():
        summary = _read_summary(folder / "summary.json")
        return _title(summary), run_section(folder, summary)
    if (folder / RESULTS).exists():
        return f"gpusim sweep {folder.name}", sweep_section(folder)
    runs = sorted(p.parent for p in folder.glob("*/summary.json"))
    if not runs:
        raise InputError(str(folder), "-", "nothing to report; valid: a folder with summary.json (gpusim run or "
                         "mlperf --out), results.parquet (gpusim sweep) or subfolders with summary.json")
    body = "".join(f"<h2>{html.escape(p.name)}</h2>{run_section(p, _read_summary(p / 'summary.json'))}" for p in runs)
    return f"gpusim results in {folder.name}", body


def _read_summary(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise InputError(str(path), "-", f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "-", "expected a JSON object (a run summary)")
    return data


def _title(s: dict) -> str:
    return f"{s.get('benchmark', '?')} on {s.get('systems', 1)}× {s.get('hardware', '?')}, {s.get('scenario', '?')}"


def run_section(folder: Path, summary: dict) -> str:
    """Summary, deployment and every figure the folder's files allow."""
    parts = [summary_table(summary), deployment_table(summary.get("deployment"))]
    if (folder / "mlperf_log_summary.txt").exists():
        text = html.escape((folder / "mlperf_log_summary.txt").read_text())
        parts.append(f"<h2>LoadGen summary</h2><pre id='loadgen'>{text}</pre>")
    if (folder / "timeline.csv").exists():
        parts.append("<h2>Over time</h2>" + _img(timeline_figure(pd.read_csv(folder / "timeline.csv")),
                                                 "throughput, batch size, KV use and queue over time"))
    if (folder / "requests.parquet").exists():
        limits = _limits(summary)
        parts.append("<h2>Latency distributions</h2>" + _img(
            latency_figure(pd.read_parquet(folder / "requests.parquet"), limits), "TTFT and TPOT distributions"))
    if (folder / "steps.json").exists():
        steps = json.loads((folder / "steps.json").read_text())
        if steps:
            parts.append("<h2>Where a step's time goes</h2>" + steps_table(steps)
                         + _img(steps_figure(steps), "step time by op and by bound"))
    return "".join(parts)


def summary_table(s: dict) -> str:
    rows = []
    for key, label, fmt in SUMMARY_ROWS:
        if s.get(key) is None:
            continue
        cls = " class='num'" if isinstance(s[key], int | float) and not isinstance(s[key], bool) else ""
        rows.append(f"<tr><th>{label}</th><td data-key='{key}'{cls}>{html.escape(fmt.format(s[key]))}</td></tr>")
    return "<h2>Summary</h2><table id='summary'>" + "".join(rows) + "</table>"


def deployment_table(dep: dict | None) -> str:
    if not isinstance(dep, dict):
        return ""
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in dep.items() if v is not None)
    return "<h2>Deployment</h2><table id='deployment'>" + cells + "</table>"


def _limits(summary: dict) -> tuple[float | None, float | None]:
    """(TTFT, TPOT) limits of the run's scenario, when its benchmark is known here."""
    from gpusim.specs.benchmark import load_benchmark

    try:
        lim = load_benchmark(str(summary.get("benchmark"))).limits(str(summary.get("scenario")))
    except InputError:
        return None, None
    return (lim.ttft_s, lim.tpot_s) if lim is not None else (None, None)


def timeline_figure(tl: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(11, 7), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True).ravel()
    t = tl["t_s"]
    axes[0].plot(t, tl["output_tokens_per_s"], label="output")
    axes[0].plot(t, tl["prefill_tokens_per_s"], label="prompt (prefill)", alpha=0.7)
    axes[0].set(ylabel="tokens/s", title="Throughput")
    axes[0].yaxis.set_major_formatter(plots.TOKENS)
    axes[0].legend(fontsize=8)
    axes[1].plot(t, tl["batch_size"])
    axes[1].set(ylabel="sequences", title="Batch size (mean of a busy instance)")
    axes[2].plot(t, 100 * tl["kv_used_fraction"])
    axes[2].set(ylabel="% of capacity", title="KV cache in use (busy instance)", xlabel="simulated time (s)")
    axes[3].plot(t, tl["queued_requests"])
    axes[3].set(ylabel="requests", title="Queue waiting for prefill (per instance)", xlabel="simulated time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig


def latency_figure(requests: pd.DataFrame, limits: tuple[float | None, float | None]) -> Figure:
    lat = add_latency_columns(requests)
    fig = Figure(figsize=(11, 4), layout="constrained")
    for ax, col, name, limit in zip(fig.subplots(1, 2), ("ttft_s", "tpot_s"), ("TTFT", "TPOT"), limits,
                                    strict=True):
        v = lat[col].dropna().to_numpy() * 1e3
        if len(v):
            ax.hist(v, bins=np.geomspace(max(v.min(), 1e-3), max(v.max(), 2e-3), 50), color="tab:blue", alpha=0.8)
            ax.axvline(np.percentile(v, 99), color="k", ls="--", lw=1, label=f"p99 {np.percentile(v, 99):,.1f} ms")
        if limit is not None:
            ax.axvline(limit * 1e3, color="tab:red", lw=2, label=f"limit {limit * 1e3:,.0f} ms")
        ax.set(xscale="log", xlabel=f"{name} (ms)", ylabel="requests", title=f"{name} per request")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return fig


def steps_table(steps: dict) -> str:
    head = "<tr><th>step</th><th>batch</th><th>total (ms)</th><th>compute</th><th>memory</th>" \
           "<th>communication</th><th>overhead</th></tr>"
    rows = []
    for name, s in steps.items():
        shape = s["shape"]
        batch = f"{shape['decode_seqs']} decoding" if name == "decode" else f"{shape['prefill_tokens']:,} prompt tokens"
        cells = "".join(f"<td class='num'>{s[k] * 1e3:,.3f}</td>"
                        for k in ("total_s", "compute_s", "memory_s", "communication_s", "overhead_s"))
        rows.append(f"<tr><td>{name}</td><td>{batch}</td>{cells}</tr>")
    return ("<p class='note'>The step cost model's split of a decode step at the run's mean batch and context "
            "and of a prefill chunk of one mean prompt (milliseconds).</p><table id='steps'>" + head
            + "".join(rows) + "</table>")


def steps_figure(steps: dict) -> Figure:
    fig = Figure(figsize=(11, 1.2 + 1.1 * len(steps)), layout="constrained")
    ax = fig.subplots()
    ops = list(dict.fromkeys(op for s in steps.values() for op in s["by_op"]))
    names = list(steps)
    left = np.zeros(len(names))
    for op in ops:
        ms = np.array([steps[n]["by_op"].get(op, 0.0) * 1e3 for n in names])
        share = ms / np.array([max(steps[n]["total_s"] * 1e3, 1e-12) for n in names])
        ax.barh(names, share * 100, left=left, label=op)
        left += share * 100
    ax.set(xlabel="% of the step", title="Step time by op", xlim=(0, max(100.0, left.max())))
    ax.legend(fontsize=7, ncol=min(len(ops), 6), loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return fig


def sweep_section(folder: Path) -> str:
    df = plots.read_results(folder / RESULTS)
    cols = [c for c in SWEEP_COLUMNS if c in df.columns]
    table = df[cols].to_html(index=False, float_format=lambda v: f"{v:,.4g}", na_rep="", table_id="results")
    parts = [f"<h2>Results ({len(df)} points, also in results.csv)</h2>{table}"]
    for kind, (draw, needs) in plots.KINDS.items():
        if not all(c in df.columns for c in needs):
            continue
        try:
            parts.append(f"<h2>{kind}</h2>" + _img(draw(df, folder / RESULTS), kind))
        except (InputError, ValueError, KeyError, IndexError) as exc:
            parts.append(f"<h2>{kind}</h2><p class='note'>not drawn: {html.escape(str(exc))}</p>")
    return "".join(parts)


def _img(fig: Figure, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode()
    return f"<img class='figure' alt='{html.escape(alt)}' src='data:image/png;base64,{data}'>"
