"""Sweeps: grid expansion, stable point ids, resume after interruption, recorded failures, Dask."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpusim import sweep
from gpusim.cli import main
from gpusim.errors import InputError

TINY = """\
hardware: b200-hgx
benchmark: llama2-70b
samples: 20
grid:
  deployment.tp: [1, 2]
  load:
    - {scenario: offline}
    - {scenario: server, qps_per_gpu: 0.5, duration_s: 5}
"""


def write(tmp_path: Path, text: str = TINY, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def table(out: Path) -> pd.DataFrame:
    """results.parquet without the one column that depends on the machine (wall time)."""
    return pd.read_parquet(out / "results.parquet").drop(columns=["wall_s"]).reset_index(drop=True)


def test_grid_expands_with_groups_and_stable_ids(tmp_path):
    points = sweep.load_sweep(write(tmp_path)).points()
    assert len(points) == 4 and len({p.id for p in points}) == 4
    assert [p.id for p in sweep.load_sweep(write(tmp_path, name="again.yaml")).points()] == [p.id for p in points]
    server = [p for p in points if p.spec.scenario == "server"]
    assert all(p.spec.qps == pytest.approx(0.5 * 8) for p in server)  # qps_per_gpu x 8 GPUs
    assert {p.deployment["tp"] for p in points} == {1, 2}
    priced = sweep.load_sweep(write(tmp_path, "costs: {pue: 1.0}\n" + TINY, "priced.yaml")).points()
    assert priced[0].costs == {"pue": 1.0} and not {p.id for p in priced} & {p.id for p in points}


@pytest.mark.parametrize("text, field", [
    ("grid: {sistems: [1, 2]}", "grid.sistems"),
    ("grid: {systems: 2}", "grid.systems"),
    ("grid: {deployment.tq: [1]}", "grid.deployment.tq"),
    ("grid: {load: [offline]}", "grid.load"),
    ("grid: {scenario: [ofline]}", "scenario"),
    ("costs: {usd_per_kwh: -1}", "usd_per_kwh"),
    ("grid: {load: [{samples_per_gpu: 0}]}", "samples_per_gpu"),
])
def test_bad_sweep_is_one_input_error(tmp_path, text, field):
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        sweep.load_sweep(write(tmp_path, "hardware: b200-hgx\n" + text)).points()


def test_interrupted_sweep_resumes_and_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    path = write(tmp_path)
    whole = sweep.run_sweep(path, tmp_path / "whole", workers=1, progress=False)
    assert (whole.ran, whole.failed) == (4, 0)

    real_add, calls = sweep.ResultStore.add, []

    def add_then_stop(self, point, res):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(point.id)
        real_add(self, point, res)

    monkeypatch.setattr(sweep.ResultStore, "add", add_then_stop)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(path, tmp_path / "cut", workers=1, progress=False)
    assert len(pd.read_parquet(tmp_path / "cut" / "results.parquet")) == 2  # what finished is kept
    monkeypatch.setattr(sweep.ResultStore, "add", real_add)

    resumed = sweep.run_sweep(path, tmp_path / "cut", workers=1, progress=False)
    assert (resumed.skipped, resumed.ran) == (2, 2)
    pd.testing.assert_frame_equal(table(tmp_path / "cut"), table(tmp_path / "whole"))
    assert sorted(p.name for p in (tmp_path / "cut" / "requests").iterdir()) == \
        sorted(p.name for p in (tmp_path / "whole" / "requests").iterdir())
    again = sweep.run_sweep(path, tmp_path / "cut", workers=1, progress=False)
    assert (again.skipped, again.ran) == (4, 0)


def test_failing_point_is_recorded_on_a_process_pool(tmp_path):
    path = write(tmp_path, "hardware: b200-hgx\nbenchmark: llama2-70b\nsamples: 20\ngrid:\n  deployment.tp: [1, 16]\n")
    report = sweep.run_sweep(path, tmp_path / "out", workers=2, progress=False)
    assert (report.ran, report.failed) == (2, 1)
    df = pd.read_parquet(tmp_path / "out" / "results.parquet").set_index("deployment.tp", drop=False)
    bad = df[df["status"] == "error"].iloc[0]
    assert "exceeds the NVLink domain" in bad["error"] and bad["hardware"] == "b200-hgx"
    assert df[df["status"] == "ok"]["output_tokens_per_s"].iloc[0] > 0
    assert len(list((tmp_path / "out" / "requests").iterdir())) == 1
    retried = sweep.run_sweep(path, tmp_path / "out", workers=1, retry_failed=True, progress=False)
    assert (retried.ran, retried.skipped, retried.failed) == (1, 1, 1)
    assert len(pd.read_parquet(tmp_path / "out" / "results.parquet")) == 2


def test_cost_overrides_in_the_grid_change_only_the_cost(tmp_path):
    path = write(tmp_path, "hardware: b200-hgx\nbenchmark: llama2-70b\nsamples: 20\n"
                 "grid:\n  costs.usd_per_kwh: [0.0, 1.0]\n")
    sweep.run_sweep(path, tmp_path / "out", workers=1, progress=False)
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    free, dear = df["usd_per_million_tokens"]
    energy_usd = df["power_kw"].iloc[1] * 1.0 / 3600 * 1e6 / df["output_tokens_per_s"].iloc[1]
    assert dear - free == pytest.approx(energy_usd)


def test_cli_sweep(tmp_path, capsys):
    assert main(["sweep", str(write(tmp_path)), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    assert "4 points: 4 run (0 failed)" in capsys.readouterr().out
    assert main(["sweep", str(write(tmp_path, "grid: {bogus: [1]}", "bad.yaml")), "--out", str(tmp_path / "b")]) == 2
    assert "grid.bogus" in capsys.readouterr().err


def test_dask_cluster_gives_the_same_results(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    path = write(tmp_path)
    sweep.run_sweep(path, tmp_path / "local", workers=1, progress=False)
    with distributed.LocalCluster(n_workers=1, processes=False, host="127.0.0.1", protocol="tcp",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        report = sweep.run_sweep(path, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False)
    assert (report.ran, report.failed) == (4, 0)
    pd.testing.assert_frame_equal(table(tmp_path / "dask"), table(tmp_path / "local"))


def test_the_fleet_example_scales_its_load_with_the_racks():
    """experiments/fleet-gb300-deepseek-r1.yaml (the Dask recipe's sweep in docs/sweeps.md): 4, 8 and 16 racks at
    2 QPS per GPU."""
    path = Path(__file__).resolve().parents[1] / "experiments" / "fleet-gb300-deepseek-r1.yaml"
    points = sweep.load_sweep(path).points()
    assert [(p.spec.systems, p.spec.qps) for p in points] == [(4, 576.0), (8, 1152.0), (16, 2304.0)]
