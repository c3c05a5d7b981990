"""`gpusim plan`: the inverse search, the verification's refits, cost arithmetic by hand, trace replay, bad input."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import gpusim.plan as plan_mod
from gpusim.analysis.frontier import Limits
from gpusim.build import prepare
from gpusim.cli import main
from gpusim.loadgen.workload import Workload
from gpusim.plan import FleetRun, Growth, Traffic, fleet_cost, highest_meeting_qps, horizon, verify

LIMITS = Limits(2.0, 0.2)
B200 = prepare("b200-hgx", "llama2-70b", scenario="server")


def _run(n: int, meets: bool) -> FleetRun:
    return FleetRun(n, meets, 1.0, 0.1, 1000.0, 0.5, 120.0)


@pytest.mark.parametrize("start, calls", [(3, [3, 4, 5]), (7, [7, 6, 5, 4]), (5, [5, 4])])
def test_the_verification_settles_on_the_smallest_fleet_that_meets(monkeypatch, start, calls):
    tried = []

    def fake(setup, traffic, limits, seed=0):
        tried.append(setup.hardware.systems)
        return _run(setup.hardware.systems, setup.hardware.systems >= 5)

    monkeypatch.setattr(plan_mod, "fleet_run", fake)
    n, fleet, fewer, verified = verify(B200, start, Traffic(100.0), LIMITS)
    assert (n, fleet.systems, fewer.systems, verified) == (5, 5, 4, True)
    assert tried == calls  # each fleet size simulated once


def test_the_capacity_bisection_ends_within_its_ratio_under_the_true_limit(monkeypatch):
    monkeypatch.setattr(plan_mod, "steady_run", lambda job: {"qps": job.qps})
    monkeypatch.setattr(plan_mod, "meets_limits", lambda run, limits: run["qps"] <= 123.0)
    q = highest_meeting_qps(B200, LIMITS)
    assert 123.0 / plan_mod.BISECT_RATIO <= q <= 123.0


def test_fleet_cost_by_hand():
    costs = {"capex_usd": 360_000, "amortisation_years": 3, "usd_per_kwh": 0.1, "pue": 1.5,
             "gpu_idle_fraction": 0.2, "gpu_busy_fraction": 1.0}
    fleet = plan_mod.fleet_setup(B200, 2)
    run = FleetRun(2, True, 1.0, 0.1, 10_000.0, 0.5, 120.0)
    got = fleet_cost(fleet, serving=2, spare=1, run=run, costs=costs)
    hw = B200.hardware
    tdp, other = hw.gpu.tdp_w.value, hw.system.power_kw.value * 1e3 - 8 * hw.gpu.tdp_w.value
    # by hand: a serving node's 8 GPUs at (0.2 + 0.8 · 0.5) of TDP, the spare's at 0.2, plus each node's other power
    watts = 1.5 * (2 * (8 * tdp * 0.6 + other) + (8 * tdp * 0.2 + other))
    month_h = 365.25 * 24 / 12
    usd = 3 * 360_000 / 36 + watts / 1e3 * month_h * 0.1
    assert got["power_kw"] == pytest.approx(watts / 1e3)
    assert got["usd_per_month"] == pytest.approx(usd)
    assert got["usd_per_million_tokens"] == pytest.approx(usd / (10_000 * month_h * 3600) * 1e6)
    assert got["tokens_per_s_per_mw"] == pytest.approx(10_000 / (watts / 1e6))
    assert got["energy_j_per_token"] == pytest.approx(watts / 10_000)


def test_the_horizon_scales_the_verified_fleet_with_the_peak():
    fleet = plan_mod.fleet_setup(B200, 3)
    run = FleetRun(3, True, 1.0, 0.1, 9_000.0, 0.6, 120.0)
    costs = {"capex_usd": 300_000}
    years = horizon(fleet, 1, run, 100.0, Growth(1.5, 3), costs)
    # by hand: peaks 100, 150, 225 QPS; serving ceil(3 x 1, 1.5, 2.25) = 3, 5, 7 systems, each spare-padded by one
    assert [(y.year, y.qps, y.systems) for y in years] == [(1, 100.0, 4), (2, 150.0, 6), (3, 225.0, 8)]
    # year 3: 7 systems carry 2.25 x the tokens, each at 0.6 x 2.25 x 3 / 7 of the busy time
    by_hand = FleetRun(7, True, 1.0, 0.1, 9_000.0 * 2.25, 0.6 * 2.25 * 3 / 7, 120.0)
    assert years[2].usd_per_month == pytest.approx(fleet_cost(fleet, 7, 1, by_hand, costs)["usd_per_month"])
    assert years[0].usd_per_month == pytest.approx(fleet_cost(fleet, 3, 1, run, costs)["usd_per_month"])


def test_a_trace_replays_at_a_rate_with_its_shape():
    trace = Workload.create([0.0, 1.0, 3.0], [10, 20, 30], [1, 2, 3], name="t")
    got = trace.at_rate(1.5, 4.0)
    # by hand: one pass lasts 3 / 1.5 = 2 s, its arrivals scaled onto [0, 2 - 1/1.5]; a second pass follows at 2 s
    assert np.allclose(got.arrival_s, [0, 4 / 9, 4 / 3, 2, 2 + 4 / 9, 2 + 4 / 3])
    assert list(got.input_tokens) == [10, 20, 30, 10, 20, 30]


def test_a_plan_screens_by_capacity_at_the_level_not_by_the_front():
    """The Azure conversation trace on one GB200 NVL72 (prompt-heavy: about 1k prompt tokens for 200 out) at p99
    TTFT 2 s and TPOT 20 ms: the plan keeps the disaggregated layout with the highest analytic capacity among all
    candidates (found here over every candidate, as the screen's own ranking is not consulted), where the
    front's share keeps another one."""
    from gpusim.frontier import analytic_points, screen
    from gpusim.loadgen.traces import read_trace
    from gpusim.search import candidate_deployments
    from gpusim.specs.deployment import Deployment

    limits = Limits(2.0, 0.02)
    trace = read_trace(Path(__file__).resolve().parents[1] / "reference" / "traces" / "AzureLLMInferenceTrace_conv.csv")
    base = plan_mod.traffic_setup(prepare("gb200-nvl72", "deepseek-r1", scenario="server"),
                                  Traffic(2000.0, trace, "azure"), limits)

    def capacity(dep) -> float:
        pts = analytic_points(base.with_deployment(dep, dep.name), limits)
        return float(pts["qps"].max()) if len(pts) else 0.0

    disagg = [d for d in candidate_deployments(base.hardware, base.model, base.bench, "server",
                                               software=base.deployment.software) if not isinstance(d, Deployment)]
    top = max(disagg, key=capacity)
    planned = [s.deployment.name for s in screen(base, "server", limits, keep=3, rank="capacity")]
    front = [s.deployment.name for s in screen(base, "server", limits, keep=3)]
    assert top.name in planned and top.name not in front


def test_a_plan_is_verified_by_simulation_and_names_each_sides_deployment(capsys):
    assert main(["plan", "--hardware", "b200-hgx,b300-hgx", "--benchmark", "llama2-70b", "--qps", "600",
                 "--deployments", "1", "--spare", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["plans"]) == 2
    costs = [p["usd_per_month"] for p in doc["plans"]]
    assert costs == sorted(costs)  # cheapest first
    for p in doc["plans"]:
        assert p["verified"] and p["meets_sla"] and p["fleet"]["meets_limits"]
        assert p["one_fewer"] is None or not p["one_fewer"]["meets_limits"]
        assert p["systems"] == p["fleet"]["systems"] + 1  # the spare
        assert p["system_qps"] * p["fleet"]["systems"] >= 600 * 0.9  # the fleet's capacity covers the peak
        assert p["deployment"]


@pytest.mark.parametrize("args, words", [
    (["--qps", "600", "--tpot-limit", "0.000001"], "limits: no candidate meets"),
    (["--qps", "-5"], "qps: must be > 0"),
    (["--qps", "5", "--spare", "-1"], "spare: must be >= 0"),
    (["--qps", "5", "--trace", "no/such.csv"], "cannot read trace"),
    (["--qps", "5", "--growth", "fast"], "growth: got 'fast'; valid: a number > 0 such as 2x/year"),
    (["--qps", "5", "--horizon", "2.5y"], "horizon: got '2.5y'; valid"),
    (["--qps", "5", "--tokens-per-user", "50", "--tpot-limit", "0.02"], "give --tokens-per-user or --tpot-limit"),
    (["--qps", "5", "--tokens-per-user", "0"], "tokens-per-user: must be > 0"),
])
def test_bad_plans_are_one_line_and_exit_2(capsys, args, words):
    assert main(["plan", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--deployments", "1", "--quiet",
                 *args]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_the_planning_example_runs_as_shown_and_matches_its_page(monkeypatch, capsys):
    """docs/planning.md's command, run from the repository root: every plan that meets the level is verified (the
    fleet meets, one system fewer misses), the years double, and the page shows what the command prints."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "planning.md").read_text()
    (line,) = [c for block in re.findall(r"```bash\n(.*?)```", page, re.S) for c in block.splitlines()
               if c.startswith("gpusim plan ")]
    monkeypatch.chdir(root)
    assert main([*shlex.split(line)[1:], "--json", "--workers", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    meeting = [p for p in doc["plans"] if p["meets_sla"]]
    assert meeting and [p["usd_per_month"] for p in meeting] == sorted(p["usd_per_month"] for p in meeting)
    for p in meeting:
        assert p["verified"] and p["fleet"]["meets_limits"]
        assert p["one_fewer"] is None or not p["one_fewer"]["meets_limits"]
        assert [y["qps"] for y in p["years"]] == [2000.0, 4000.0, 8000.0]
        assert [y["systems"] for y in p["years"]] == sorted(y["systems"] for y in p["years"])
        row = next(r for r in page.splitlines() if r.startswith(p["hardware"] + " "))
        assert row.split()[1:3] == [str(p["systems"]), str(p["gpus"])]  # the page's table is this output


def test_a_plan_on_a_dask_cluster_gives_the_local_answer(capsys, monkeypatch, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    args = ["plan", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--qps", "300", "--deployments", "1",
            "--json", "--seed", "3"]
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path / "local"))
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)["plans"]
    monkeypatch.setenv("GPUSIM_CACHE", str(tmp_path / "dask"))  # nothing cached: the cluster runs the bisection
    with distributed.LocalCluster(n_workers=1, processes=False, host="127.0.0.1", protocol="tcp",
                                  dashboard_address=None) as cluster:
        assert main([*args, "--scheduler", cluster.scheduler_address]) == 0
    remote = json.loads(capsys.readouterr().out)["plans"]
    assert any((tmp_path / "dask").rglob("*.json"))
    assert [(p["systems"], p["deployment"], p["system_qps"]) for p in remote] == \
        [(p["systems"], p["deployment"], p["system_qps"]) for p in local]


def test_an_unreachable_scheduler_is_one_line_and_exit_2(capsys):
    pytest.importorskip("dask.distributed")
    assert main(["plan", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--qps", "300", "--deployments", "1",
                 "--quiet", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip()
    assert "scheduler: cannot reach tcp://127.0.0.1:9" in err and len(err.splitlines()) == 1


def test_plans_at_several_levels_draw_cost_against_the_level(capsys, tmp_path):
    fig = tmp_path / "cost.png"
    assert main(["plan", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--qps", "300", "--deployments", "1",
                 "--levels", "10,5", "--figure", str(fig), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [lv["tokens_per_s_per_user"] for lv in doc["levels"]] == [5.0, 10.0]
    assert [lv["tpot_p99_s"] for lv in doc["levels"]] == [0.2, 0.1]
    loose, tight = (lv["plans"][0] for lv in doc["levels"])
    assert loose["meets_sla"] and tight["meets_sla"] and tight["systems"] >= loose["systems"]  # a tighter level
    assert fig.stat().st_size > 10_000 and not list(tmp_path.glob(".*"))  # drawn, no temporary file left


@pytest.mark.parametrize("args, words", [
    (["--figure", "cost.png"], "figure: needs --levels"),
    (["--levels", "fast"], "levels: got 'fast'"),
    (["--levels", "10", "--figure", "cost.pdf"], "figure: needs --levels and a .png or .svg path"),
])
def test_bad_levels_are_one_line_and_exit_2(capsys, args, words):
    assert main(["plan", "--hardware", "b200-hgx", "--benchmark", "llama2-70b", "--qps", "5", "--quiet", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
