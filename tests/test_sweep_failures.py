"""Sweeps under failure: a killed sweep resumes to every point exactly once, equal to an uninterrupted sweep;
so does a sweep on a real dask.distributed cluster that loses a worker; a point that raises or takes its
worker process down is recorded as failed and the others run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from gpusim import api, sweep

SWEEP = """\
hardware: b200-hgx
benchmark: llama2-70b
samples: 1000
grid:
  deployment.tp: [1, 2, 4, 8]
  load:
    - {scenario: offline}
    - {scenario: server, qps_per_gpu: 0.5, duration_s: 20}
"""
POINTS = 8


def table(out: Path) -> pd.DataFrame:
    """results.parquet without the wall time, in point order."""
    df = pd.read_parquet(out / "results.parquet").drop(columns=["wall_s"])
    return df.sort_values("point_index").reset_index(drop=True)


def tp(df: pd.DataFrame) -> pd.Series:
    """Each row's grid value of deployment.tp (a failed point has no summary to read it from)."""
    return df["params"].map(lambda p: json.loads(p)["deployment.tp"])


def rows(out: Path) -> int:
    try:
        return len(pd.read_parquet(out / "results.parquet"))
    except (FileNotFoundError, OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """The sweep file and the results of an uninterrupted run of it."""
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "sweep.yaml"
    path.write_text(SWEEP)
    report = sweep.run_sweep(path, folder / "whole", workers=1, progress=False)
    assert (report.ran, report.failed) == (POINTS, 0)
    return path, table(folder / "whole")


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal values, whatever the columns' types (beside a failed row, an int column holds floats, None NaN)."""
    def plain(df: pd.DataFrame) -> pd.DataFrame:
        df = df.drop(columns="error").reset_index(drop=True).astype(object)
        df = df[sorted(df.columns)]  # column order follows which point finished first
        return df.where(df.notna(), None)

    pd.testing.assert_frame_equal(plain(got), plain(want), check_dtype=False)


def assert_every_point_once(out: Path, expected: pd.DataFrame) -> None:
    got = table(out)
    assert got["point_id"].is_unique and set(got["point_id"]) == set(expected["point_id"])
    pd.testing.assert_frame_equal(got, expected)
    assert sorted(p.stem for p in (out / "requests").glob("*.parquet")) == sorted(expected["point_id"])


def test_a_sigkilled_sweep_resumes_to_every_point_once(whole, tmp_path) -> None:
    path, expected = whole
    out = tmp_path / "cut"
    cmd = [sys.executable, "-c", "from gpusim.cli import main; raise SystemExit(main())", "sweep", str(path),
           "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while rows(out) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker processes, mid-sweep
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    kept = rows(out)
    assert 3 <= kept < POINTS
    report = sweep.run_sweep(path, out, workers=2, progress=False)
    assert (report.skipped, report.ran, report.failed) == (kept, POINTS - kept, 0)
    assert_every_point_once(out, expected)


def test_a_dask_cluster_that_loses_a_worker_mid_sweep_gives_every_point_once(whole, tmp_path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    path, expected = whole
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        pids = client.run(os.getpid)
        assert len(set(pids.values()) - {os.getpid()}) == 2  # workers in processes of their own
        reports = []
        runner = threading.Thread(target=lambda: reports.append(
            sweep.run_sweep(path, out, scheduler=cluster.scheduler_address, progress=False)))
        runner.start()
        deadline = time.monotonic() + 120
        while rows(out) < 1 and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rows(out) < POINTS, "the sweep finished before a worker could be killed"
        os.kill(next(iter(pids.values())), signal.SIGKILL)  # the nanny starts a new one; its task runs again
        runner.join(timeout=300)
        assert not runner.is_alive()
    report = reports[0]
    print(f"dask sweep with a worker killed: {report.ran} ran, {report.failed} failed")
    if report.failed:  # a point the scheduler gave up on is recorded as failed, and runs again on request
        assert "KilledWorker" in " ".join(pd.read_parquet(out / "results.parquet")["error"].dropna())
        report = sweep.run_sweep(path, out, workers=1, retry_failed=True, progress=False)
    assert report.failed == 0
    assert_every_point_once(out, expected)


def _raise_or_die(point: sweep.Point) -> sweep.PointResult:
    """`sweep.run_point`, but the tp-4 Offline point kills its worker process."""
    tp = point.deployment.get("tp")
    if tp == 4 and point.spec.scenario == "offline":
        os._exit(3)
    return _real_run_point(point)


_real_run_point = sweep.run_point


def _flaky_run_spec(spec, source="command line"):
    """`gpusim.api.run_spec`, but a tp-2 deployment raises inside the run."""
    if spec.deployment is not None and spec.deployment.tp == 2:
        raise RuntimeError("injected failure")
    return _real_run_spec(spec, source)


_real_run_spec = api.run_spec


@pytest.mark.parametrize("workers", [1, 2])
def test_a_point_that_raises_is_recorded_and_the_sweep_goes_on(whole, tmp_path, monkeypatch, workers) -> None:
    path, expected = whole
    monkeypatch.setattr(api, "run_spec", _flaky_run_spec)  # forked workers see it too
    out = tmp_path / "out"
    report = sweep.run_sweep(path, out, workers=workers, progress=False)
    df = table(out)
    bad = df[df["status"] == "error"]
    assert set(tp(bad)) == {2} and len(bad) == 2 and report.failed == 2
    assert (bad["error"] == "RuntimeError: injected failure").all()
    ok = df[df["status"] == "ok"]
    assert len(ok) == POINTS - 2
    assert_same_rows(ok, expected[expected["point_id"].isin(ok["point_id"])])


def test_a_point_that_kills_its_worker_process_fails_alone(whole, tmp_path, monkeypatch) -> None:
    """With fork, the pool's workers run the patched point function: the tp-4 Offline point exits its
    process. Only that point is recorded as failed; the points that shared the broken pool run again."""
    path, expected = whole
    monkeypatch.setattr(sweep, "run_point", _raise_or_die)
    monkeypatch.setattr(api, "run_spec", _flaky_run_spec)
    out = tmp_path / "out"
    sweep.run_sweep(path, out, workers=2, progress=False)
    df = table(out)
    assert df["point_id"].is_unique and len(df) == POINTS
    bad = df[df["status"] == "error"]
    died = bad[tp(bad) == 4]
    assert len(died) == 1 and died["scenario"].iloc[0] == "offline"
    assert "process" in died["error"].iloc[0]
    assert set(tp(bad)) == {2, 4} and len(bad) == 3
    ok = df[df["status"] == "ok"]
    assert_same_rows(ok, expected[expected["point_id"].isin(ok["point_id"])])
