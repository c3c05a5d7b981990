"""Plots: every kind writes a PNG and an SVG from a small synthetic results table; bad input is an InputError."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpusim.analysis.frontier import pareto_front
from gpusim.analysis.plots import GENERATIONS, KINDS, plot
from gpusim.cli import main
from gpusim.errors import InputError


def synthetic(folder: Path) -> Path:
    """A results table with scaling, generation and pareto rows, one failed point, and request records."""
    rows = []

    def add(hardware: str, benchmark: str, scenario: str, systems: int, tps: float, tpot: float, **extra):
        pid = f"p{len(rows):02d}"
        params = {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, "systems": systems, **extra}
        rows.append({"point_id": pid, "point_index": len(rows), "status": "ok", "error": None,
                     "params": json.dumps(params), "hardware": hardware, "benchmark": benchmark,
                     "scenario": scenario, "systems": systems, "num_gpus": 72 * systems,
                     "output_tokens_per_s": tps, "output_tokens_per_s_per_gpu": tps / (72 * systems),
                     "tpot_p50_s": tpot, "valid": None if scenario == "offline" else tpot < 0.03,
                     "steady_output_tokens_per_s_per_gpu": 0.95 * tps / (72 * systems), "steady_turned_over": True,
                     "overloaded": False, "latency_met": tpot < 0.03,
                     "deployment.name": extra.get("deployment", "default"), "qps": extra.get("qps")})
        rng = np.random.default_rng(len(rows))
        start = rng.uniform(0, 10, 50)
        (folder / "requests").mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"scheduled_s": start, "first_token_s": start + rng.uniform(0.1, 2, 50),
                      "completion_s": start + 5 + rng.uniform(0, 5, 50), "output_tokens": 200}
                     ).to_parquet(folder / "requests" / f"{pid}.parquet")

    for n, eff in ((1, 1.0), (2, 0.98), (4, 0.95)):
        add("gb300-nvl72", "deepseek-r1", "offline", n, 470_000 * n * eff, 0.028)
    for i, hw in enumerate(GENERATIONS):
        for bench in ("deepseek-r1", "llama2-70b"):
            add(hw, bench, "offline", 1, 2_000 * 1.6**i * 72, 0.02)
    for qps in (20, 60, 120):
        for dep, speed in (("tp4", 1.0), ("tp8", 0.8)):
            add("gb300-nvl72", "deepseek-r1", "server", 1, 3_000 * qps * speed, 0.004 * qps**0.5 / speed,
                qps=qps, deployment=dep)
    rows.append({**rows[0], "point_id": "bad", "point_index": len(rows), "status": "error",
                 "error": "does not fit", "hardware": "h100-hgx", "benchmark": "gpt-oss-120b",
                 "output_tokens_per_s": None, "output_tokens_per_s_per_gpu": None})
    path = folder / "results.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


WHERE = {  # the rows each figure is meant for, which also keeps the test fast
    "scaling": {"hardware": "gb300-nvl72", "benchmark": "deepseek-r1", "scenario": "offline"},
    "generations": {"benchmark": "llama2-70b"},
    "pareto": {"scenario": "server"},
    "latency-cdf": {"scenario": "server", "qps": "20.0"},
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return synthetic(tmp_path_factory.mktemp("sweep"))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_each_kind_writes_an_image(results, tmp_path, kind, suffix):
    out = plot(kind, results, tmp_path / f"fig{suffix}", WHERE[kind])
    data = out.read_bytes()
    assert len(data) > 5_000
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]


def test_bad_kind_format_columns_and_filters_are_input_errors(results, tmp_path):
    with pytest.raises(InputError, match="kind"):
        plot("histogram", results, tmp_path / "f.png")
    with pytest.raises(InputError, match=r"valid: \.png, \.svg"):
        plot("scaling", results, tmp_path / "f.jpg")
    thin = tmp_path / "thin.parquet"
    pd.read_parquet(results).drop(columns=["num_gpus"]).to_parquet(thin)
    with pytest.raises(InputError, match="num_gpus"):
        plot("scaling", thin, tmp_path / "f.png")
    with pytest.raises(InputError, match="no rows"):
        plot("scaling", results, tmp_path / "f.png", {"hardware": "tpu"})
    with pytest.raises(InputError, match="too many"):
        plot("latency-cdf", results, tmp_path / "f.png")
    with pytest.raises(InputError, match="file not found"):
        plot("scaling", tmp_path / "nothing.parquet", tmp_path / "f.png")


def test_pareto_front_keeps_only_undominated_points():
    x = np.array([1.0, 2.0, 3.0, 2.0, 0.5])
    y = np.array([5.0, 4.0, 1.0, 3.0, 5.0])
    assert sorted(pareto_front(x, y)) == [0, 1, 2]


def test_cli_plot(results, tmp_path, capsys):
    assert main(["plot", "pareto", str(results), "-o", str(tmp_path / "p.png"), "--where", "scenario=server"]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0
    assert main(["plot", "scaling", str(results), "-o", str(tmp_path / "s.png"), "--where", "nocolumn"]) == 2
    assert "COLUMN=VALUE" in capsys.readouterr().err


def test_generation_bars_mark_systems_whose_key_numbers_are_derived_or_assumed():
    from gpusim.analysis.plots import key_grade

    assert key_grade("vr-nvl72") in ("C", "D")  # Rubin's figures are pre-release copies
    assert key_grade("h100-hgx") in ("A", "B")


def test_figures_draw_steady_rates_only_where_every_run_turned_over():
    from gpusim.analysis.plots import plotted_rate

    runs = pd.DataFrame({"output_tokens_per_s": [100.0, 200.0], "steady_output_tokens_per_s": [90.0, 210.0],
                         "steady_turned_over": [True, True]})
    rate, unit, steady = plotted_rate(runs)
    assert steady and unit == "tokens/s" and rate.tolist() == [90.0, 210.0]
    # a window that opened while one run's batch was still filling: LoadGen's figure for all, so that scaling and
    # generations figures of the same runs draw the same numbers
    short = runs.assign(steady_turned_over=[True, False])
    rate, _, steady = plotted_rate(short)
    assert not steady and rate.tolist() == [100.0, 200.0]


def test_scaling_draws_each_layout_against_its_own_smallest_size():
    """Replicas of an aggregated deployment and disaggregated pools on the same racks are two curves: the
    layout that is slower per rack but pools better across racks keeps its own efficiency (worked by hand)."""
    from gpusim.analysis.plots import scaling_efficiency

    runs = pd.DataFrame({"hardware": "gb300-nvl72", "benchmark": "deepseek-r1", "scenario": "server",
                         "systems": [1, 2, 4, 1, 2, 4], "num_gpus": [72, 144, 288] * 2,
                         "output_tokens_per_s": [100.0, 200.0, 400.0, 80.0, 168.0, 320.0],
                         "deployment.mode": ["aggregated"] * 3 + ["disaggregated"] * 3})
    curves = dict(scaling_efficiency(runs))
    assert set(curves) == {"gb300-nvl72 deepseek-r1 server aggregated",
                           "gb300-nvl72 deepseek-r1 server disaggregated"}
    assert curves["gb300-nvl72 deepseek-r1 server aggregated"]["efficiency"].tolist() == [1.0, 1.0, 1.0]
    disagg = curves["gb300-nvl72 deepseek-r1 server disaggregated"]
    assert disagg["ideal"].tolist() == [80.0, 160.0, 320.0]
    assert disagg["efficiency"].tolist() == pytest.approx([1.0, 1.05, 1.0])
    # one layout only: the label is the system, benchmark and scenario, as before
    (label, _), = scaling_efficiency(runs.iloc[:3])
    assert label == "gb300-nvl72 deepseek-r1 server"
