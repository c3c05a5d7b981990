"""`gpusim report`: the engine's timeline, the HTML page, and what headless Chromium shows of it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

import gpusim
from gpusim.analysis.report import write_report
from gpusim.cli import main
from gpusim.sim.timeline import Timeline

RUN = ["run", "--hardware", "h100-hgx", "--benchmark", "llama2-70b", "--scenario", "server", "--qps", "5",
       "--duration", "30"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    assert main([*RUN, "--out", str(out)]) == 0
    return out


def test_the_timeline_accounts_for_every_token_and_busy_second():
    r = gpusim.run("h100-hgx", "llama2-70b", "server", qps=5, duration_s=30)
    sums = r.stats.timeline.sums
    assert sum(sums["output_tokens"]) == (r.requests["output_tokens"] - 1).sum()  # the first comes from prefill
    assert sum(sums["prefill_tokens"]) == r.requests["input_tokens"].sum()
    assert sum(sums["busy_s"]) == pytest.approx(sum(r.stats.busy_s))
    assert r.timeline["batch_size"].max() <= r.summary["deployment"]["max_batch_size"]
    assert 0 < r.timeline["kv_used_fraction"].max() <= 1


def test_timeline_bins_merge_when_the_run_outgrows_them():
    tl = Timeline(bins=4, width_s=1.0)
    for t in range(10):
        tl.add(t + 0.5, 0.5, batch=2, kv_tokens=10, queue=1, output_tokens=2, prefill_tokens=0)
    assert tl.width_s == 4.0
    assert tl.sums["output_tokens"] == [8.0, 8.0, 4.0, 0.0]
    frame = tl.frame(instances=1, kv_capacity_tokens=100, end_s=10)
    assert list(frame["t_s"]) == [0.0, 4.0, 8.0] and list(frame["batch_size"]) == [2.0, 2.0, 2.0]
    assert list(frame["kv_used_fraction"]) == [0.1, 0.1, 0.1]


def test_a_run_folder_has_the_files_the_report_draws(run_dir):
    assert {"summary.json", "requests.parquet", "timeline.csv", "steps.json"} <= {p.name for p in run_dir.iterdir()}
    steps = json.loads((run_dir / "steps.json").read_text())
    for s in steps.values():
        assert s["total_s"] == pytest.approx(s["compute_s"] + s["memory_s"] + s["communication_s"] + s["overhead_s"])
        assert s["total_s"] == pytest.approx(sum(s["by_op"].values()))
    assert steps["decode"]["memory_s"] > steps["decode"]["compute_s"]  # a small decode batch reads weights
    assert steps["prefill"]["compute_s"] > steps["prefill"]["memory_s"]


def test_the_report_is_one_self_contained_file(run_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(run_dir), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count("<img class='figure'") == 3
    assert re.findall(r"""(?:src|href)=['"](?!data:)""", page) == []  # nothing fetched from anywhere
    assert "http://" not in page and "https://" not in page
    assert main(["report", str(run_dir)]) == 0 and (run_dir / "report.html").exists()


@pytest.mark.parametrize("target", ["", "requests.parquet", "summary.json"])
def test_plot_draws_a_single_runs_output(run_dir, tmp_path, target):
    for kind in ("latency-cdf", "pareto"):
        out = tmp_path / f"{kind}.png"
        assert main(["plot", kind, str(run_dir / target), "-o", str(out)]) == 0
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_reporting_a_folder_with_nothing_in_it_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to report" in err


def test_a_sweep_report_has_its_table_and_figures(tmp_path):
    exp = tmp_path / "s.yaml"
    exp.write_text("hardware: b200-hgx\nbenchmark: llama2-70b\nscenario: server\nduration_s: 5\nrequests: true\n"
                   "grid:\n  qps: [2, 4]\n")
    assert main(["sweep", str(exp), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    csv = pd.read_csv(tmp_path / "o" / "results.csv")
    assert list(csv["point_id"]) == list(pd.read_parquet(tmp_path / "o" / "results.parquet")["point_id"])
    assert main(["report", str(tmp_path / "o")]) == 0
    page = (tmp_path / "o" / "report.html").read_text()
    assert "id=\"results\"" in page and page.count("<img class='figure'") >= 2  # pareto and latency-cdf at least


def test_an_mlperf_folder_and_a_folder_of_them(tmp_path):
    out = tmp_path / "suite" / "b200-offline"
    assert main(["mlperf", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--scenario", "offline",
                 "--duration", "30", "--quiet", "--out", str(out)]) == 0
    page = Path(write_report(out)).read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert "id='loadgen'" in page and "Result is" in page
    assert f"<td data-key='num_gpus' class='num'>{summary['num_gpus']}</td>" in page
    shutil.copytree(out, tmp_path / "suite" / "again")
    (out / "report.html").unlink()
    page = Path(write_report(tmp_path / "suite")).read_text()
    assert page.count("<h2>b200-offline</h2>") == 1 and page.count("<h2>again</h2>") == 1


class _Cells(HTMLParser):
    """The summary table's cells by data-key, and the render-status attributes, from a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, str] = {}
        self.status: dict[str, str] = {}
        self._key: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "td" and a.get("data-key"):
            self._key = a["data-key"]
        if a.get("id") == "render-status":
            self.status = {k: v or "" for k, v in a.items()}

    def handle_data(self, data: str) -> None:
        if self._key is not None:
            self.cells[self._key] = data.strip()
            self._key = None


def test_headless_chromium_shows_the_figures_and_the_summarys_numbers(run_dir, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    report = write_report(run_dir)
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=5000", "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    page = _Cells()
    page.feed(dom)
    assert page.status.get("data-figures") == "3" and page.status.get("data-rendered") == "3"
    summary = json.loads((run_dir / "summary.json").read_text())
    shown = page.cells
    for key in ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_p99_s", "tpot_p99_s", "simulated_s"):
        assert float(shown[key].replace(",", "")) == pytest.approx(summary[key], rel=2e-3), key
    for key in ("completed_requests", "output_tokens", "num_gpus"):
        assert int(shown[key].replace(",", "")) == summary[key], key
    assert shown["hardware"] == summary["hardware"] and shown["valid"] == str(summary["valid"])
