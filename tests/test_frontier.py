"""The throughput–interactivity frontier: which points may stand on it, and `gpusim frontier` end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpusim.analysis.frontier import Limits, meets_limits, on_front
from gpusim.build import prepare
from gpusim.cli import main
from gpusim.frontier import PointJob, analytic_points, first_duration, screen, steady_run, with_workload
from gpusim.validate.fronts import front_distances, front_points, front_summary

STEADY = {"steady_turned_over": True, "overloaded": False, "ttft_p99_s": 1.0, "tpot_p99_s": 0.05}


def test_a_point_meets_its_limits_only_when_steady_and_within_both():
    limits = Limits(ttft_p99_s=2.0, tpot_p99_s=0.08)
    assert meets_limits(STEADY, limits)
    assert not meets_limits({**STEADY, "steady_turned_over": False}, limits)  # batch still filling
    assert not meets_limits({**STEADY, "overloaded": True}, limits)  # queue growing
    assert not meets_limits({**STEADY, "ttft_p99_s": 2.5}, limits)
    assert not meets_limits({**STEADY, "tpot_p99_s": 0.081}, limits)
    assert meets_limits({**STEADY, "tpot_p99_s": 9.0}, Limits())  # unbounded


def test_the_front_skips_points_that_miss_however_high():
    # per user, per GPU: the second point dominates every other but misses its limits
    x = np.array([10.0, 20.0, 20.0, 40.0, 5.0])
    y = np.array([900.0, 2000.0, 700.0, 300.0, 800.0])
    eligible = np.array([True, False, True, True, True])
    assert on_front(x, y, eligible).tolist() == [True, False, True, True, False]
    assert not on_front(x, y, np.zeros(5, bool)).any()


def test_the_analytic_screen_keeps_the_limit_and_names_the_starting_deployment():
    base = prepare("b200-hgx", "llama2-70b", scenario="server")
    limits = Limits(2.0, 0.05)
    pts = analytic_points(base, limits)
    assert len(pts) and (1 / pts["tokens_per_s_per_user"] <= 0.8 * 0.05 + 1e-12).all()
    assert pts["qps"].is_monotonic_increasing  # a bigger batch serves more
    chosen = screen(base, "server", limits, keep=2)
    assert len(chosen) <= 3 and base.deployment.name in {s.deployment.name for s in chosen}


def test_a_run_too_short_to_turn_over_is_lengthened(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path))
    base = prepare("b200-hgx", "llama2-70b", scenario="server")
    qps = 0.5 * float(analytic_points(base, Limits(2.0, 0.2))["qps"].max())
    assert first_duration(base, qps, 0) >= 120.0
    run = steady_run(PointJob(base, "server", qps, 4.0, 0))  # 4 s: shorter than a request lives
    assert run["duration_s"] > 4.0 and run["steady_turned_over"]
    assert steady_run(PointJob(base, "server", qps, 4.0, 0)) == run  # cached by what decides it
    assert list(tmp_path.glob("frontier/*.json"))


def test_fixed_lengths_and_limits_replace_the_benchmarks():
    base = with_workload(prepare("b200-hgx", "llama2-70b"), "server", Limits(2.0, 0.2), 1024, 256)
    assert base.bench.input_tokens.value == 1024 and base.bench.output_tokens.value == 256
    assert base.deployment.name == prepare("b200-hgx", "llama2-70b").deployment.name
    assert base.bench.server == prepare("b200-hgx", "llama2-70b").bench.server  # the same limits: its own kept
    # a benchmark without Server limits is judged by the ones given
    none = with_workload(prepare("b300-hgx", "qwen3.6-27b"), "server", Limits(1.0, 0.05))
    assert (none.bench.server.ttft_s, none.bench.server.tpot_s) == (1.0, 0.05)


@pytest.fixture(scope="module")
def small_front(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("front")
    import os
    os.environ["GPUSIM_CACHE"] = str(out / "cache")
    try:
        assert main(["frontier", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--deployments", "2",
                     "--workers", "1", "--out", str(out / "f"), "--quiet"]) == 0
    finally:
        del os.environ["GPUSIM_CACHE"]
    return {"doc": json.loads((out / "f" / "frontier.json").read_text()), "dir": out / "f"}


def test_frontier_points_carry_their_deployment_and_the_front_meets_the_limits(small_front):
    doc = small_front["doc"]
    pts = doc["points"]
    assert doc["limits"] == {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2}  # Llama 2 70B's Server limits
    assert len(pts) == 10 and len({p["deployment"] for p in pts}) == 2
    for p in pts:
        assert set(p) >= {"deployment", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_p99_s", "tpot_p99_s",
                          "meets_limits", "on_front"}
        assert math.isclose(p["tokens_per_s_per_user"], 1 / p["tpot_p50_s"], rel_tol=1e-6)
        assert not p["exceeds_offline"] and p["tokens_per_s_per_gpu"] <= p["offline_tokens_per_s_per_gpu"]
    front = [p for p in pts if p["on_front"]]
    assert front and all(p["meets_limits"] for p in front)
    # no point that meets the limits beats a front point on both axes
    for p in (p for p in pts if p["meets_limits"] and not p["on_front"]):
        assert any(f["tokens_per_s_per_user"] >= p["tokens_per_s_per_user"]
                   and f["tokens_per_s_per_gpu"] >= p["tokens_per_s_per_gpu"] for f in front)
    assert (small_front["dir"] / "frontier.png").stat().st_size > 5_000
    assert (small_front["dir"] / "points.csv").read_text().count("\n") == 11


@pytest.mark.parametrize("argv, field", [
    (["--tpot-limit", "-1"], "tpot-limit"),
    (["--hardware", "nosuch"], "hardware"),
    (["--benchmark", "qwen3.6-27b"], "scenario"),
])
def test_bad_frontier_input_is_one_line_and_exit_2(argv, field, capsys, tmp_path):
    base = {"--hardware": "b200-hgx", "--benchmark": "llama2-70b"}
    args = ["frontier", *[a for k, v in base.items() if k not in argv for a in (k, v)], *argv,
            "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err
    assert not (tmp_path / "o").exists()


# ---- the silicon sample's measured fronts ---------------------------------------------------------
def _front_rows(predicted_tpot_b: float) -> pd.DataFrame:
    """Two concurrencies of one setup (OSL 101, 2 GPUs); the second's predicted TPOT is `predicted_tpot_b`."""
    return pd.DataFrame({
        "front_setup": ["s", "s"], "system": "b200_sxm", "model_path": "m", "backend": "vllm", "mode": "agg",
        "concurrency": [1, 4], "osl": 101, "gpus": 2, "predicted": True, "status": "ok",
        "measured_ttft": [100.0, 200.0], "measured_tpot": [10.0, 20.0],
        "predicted_ttft": [100.0, 200.0], "predicted_tpot": [10.0, predicted_tpot_b]})


def test_a_measured_front_point_is_compared_at_the_same_tokens_per_user():
    # measured: c=1 at 100 tok/s/user serves 1 × 101 / (0.1 + 100 × 0.01) / 2 = 45.909 tok/s/GPU,
    # c=4 at 50 tok/s/user 4 × 101 / (0.2 + 100 × 0.02) / 2 = 91.818; predicted c=4: 40 tok/s/user, 74.815
    d = front_distances(front_points(_front_rows(25.0))).sort_values("concurrency")
    assert d["measured_per_gpu"].round(3).tolist() == [45.909, 91.818]
    # at 50 tok/s/user the predicted front lies (ln 50 - ln 40) / (ln 100 - ln 40) = 0.2435 of the way from
    # 74.815 to 45.909: 67.775, so the distance is 67.775 / 91.818 - 1
    assert d["distance"].round(4).tolist() == [0.0, round(67.775 / 91.818 - 1, 4)]
    assert front_distances(front_points(_front_rows(20.0)))["distance"].abs().max() < 1e-12


def test_a_front_needs_two_concurrencies_and_stated_workers():
    one = _front_rows(20.0).iloc[:1]
    assert front_points(one).empty
    unstated = _front_rows(20.0).assign(status="ok (decode workers unstated: 2 assumed)")
    assert front_points(unstated).empty
    summary = front_summary(_front_rows(25.0))
    assert summary[0]["system"] == "all" and summary[0]["setups"] == 1 and summary[0]["compared"] == 2


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

POINT = st.tuples(st.floats(0.1, 500.0), st.floats(0.0, 20_000.0), st.booleans())


@given(st.lists(POINT, min_size=1, max_size=40))
def test_the_front_is_exactly_the_undominated_eligible_points(points):
    """On any set of points: no eligible point beats a front point on both axes, every eligible point off the front
    is beaten or matched by one on it, and no ineligible point is on it."""
    x, y, ok = (np.array(v) for v in zip(*points, strict=True))
    front = on_front(x, y, ok)
    assert not (front & ~ok).any()
    for i in np.flatnonzero(front):
        assert not (ok & (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))).any()
    for i in np.flatnonzero(ok & ~front):
        assert (front & (x >= x[i]) & (y >= y[i])).any()
