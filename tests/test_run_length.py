"""Offline runs simulated until their steady rate is known (gpusim/run_length.py): the arithmetic by hand, and the
answer held to a full simulation's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpusim.run_length as rl
from gpusim.analysis.steady import SteadyWindow
from gpusim.api import run_spec
from gpusim.cli import main
from gpusim.sim.timeline import Timeline
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.experiment import RunSpec

H200_LLAMA = {"hardware": "h200-hgx", "benchmark": "llama2-70b", "scenario": "offline"}


def test_the_timeline_counts_the_tokens_of_an_interval_by_hand():
    t = Timeline(bins=4, width_s=1.0)
    t.add(0.5, 0.1, 1, 0, 0, 10.0, 0)  # bin 0
    t.add(2.2, 0.1, 1, 0, 0, 20.0, 0)  # bin 2
    # by hand: half of bin 0 (10 tokens) and half of bin 2 (20 tokens)
    assert t.output_tokens_between(0.5, 2.5) == pytest.approx(15.0)
    assert t.output_tokens_between(0.0, 4.0) == pytest.approx(30.0)


def test_a_skip_by_hand(monkeypatch):
    monkeypatch.setattr(rl, "mean_output_tokens", lambda bench, seed: 300.0)
    # a prefix of 4 requests on two instances whose queues empty at 100 s and 110 s; the last completes at 120 s
    records = pd.DataFrame({"instance": [0, 0, 1, 1], "first_token_s": [10.0, 100.0, 20.0, 110.0],
                            "completion_s": [50.0, 115.0, 60.0, 120.0], "output_tokens": [5, 5, 5, 5]})
    window = SteadyWindow(10.0, 100.0, 90_000.0, 1.0)  # 1,000 tokens/s
    how = rl.skip(load_benchmark("llama2-70b"), 0, 1004, records, window, rel=0.02)
    # by hand: 1,000 skipped samples x 300 tokens at 1,000 tokens/s = 300 s; the slowest of two instances,
    # Blom's Phi^-1(1.625 / 2.25) = 0.5895 standard deviations (7.071 s) above the mean, wanders
    # sqrt(420 / 120) - 1 = 0.8708 times further
    extra = 0.5895 * math.sqrt(50.0) * (math.sqrt(420.0 / 120.0) - 1)
    assert how.skipped_requests == 1000 and how.skipped_tokens == pytest.approx(300_000.0)
    assert how.skipped_s == pytest.approx(300.0 + extra, rel=1e-3)
    assert how.uncertainty == pytest.approx(0.02 * how.skipped_s / (120.0 + how.skipped_s))


def test_the_skipped_middle_extends_the_summary_by_hand():
    how = rl.RunLength("test", 1000, 400, 600, 60_000.0, 30.0, 0.004)
    summary = {"simulated_s": 20.0, "output_tokens": 40_000, "output_tokens_per_s": 2_000.0,
               "completed_requests": 400, "num_gpus": 8, "steady_busy_fraction": 0.5}
    busy = [10.0, 20.0]
    how.extend(summary, busy)
    assert summary["simulated_s"] == 50.0 and summary["output_tokens"] == 100_000
    assert summary["output_tokens_per_s"] == pytest.approx(2_000.0)
    assert summary["output_tokens_per_s_per_gpu"] == pytest.approx(250.0)
    assert summary["samples_per_s"] == pytest.approx(20.0)
    assert busy == [25.0, 35.0]  # 30 s more at the window's busy fraction


def test_a_server_skip_extends_loadgens_figure_time_not_the_drain():
    # LoadGen's Server figure: tokens over the time to the last-scheduled query's completion (16 s here, the
    # drain runs to 20 s); 30 s of skipped arrivals add to the 16 s, not to the 20 s
    how = rl.RunLength("test", 1000, 400, 600, 60_000.0, 30.0, 0.004)
    summary = {"simulated_s": 20.0, "output_tokens": 40_000, "output_tokens_per_s": 2_500.0,
               "completed_requests": 400, "num_gpus": 8}
    how.extend(summary, [])
    assert summary["simulated_s"] == 50.0
    assert summary["output_tokens_per_s"] == pytest.approx(100_000 / 46)


def test_the_interval_of_a_constant_rate_is_zero_and_grows_with_its_spread():
    window = SteadyWindow(0.0, 10.0, 10_000.0, 1.0)
    assert rl.rate_interval(window, lambda a, b: 1000.0 * (b - a)) == pytest.approx(0.0, abs=1e-12)
    wobbly = rl.rate_interval(window, lambda a, b: (1000.0 + 100.0 * (int(a) % 2)) * (b - a))
    # by hand: rates 1000 and 1100 alternating, sd 52.70, mean 1050: 2.262 x 52.70 / sqrt(10) / 1050
    assert wobbly == pytest.approx(2.262 * 52.705 / math.sqrt(10) / 1050, rel=1e-3)


@pytest.fixture(scope="module")
def full_and_converged():
    full = run_spec(RunSpec(**H200_LLAMA, run_length="full")).summary
    converged = run_spec(RunSpec(**H200_LLAMA)).summary
    return full, converged


def test_a_converged_run_gives_the_full_runs_answer_from_a_part_of_it(full_and_converged):
    full, converged = full_and_converged
    how = converged["run_length"]
    assert how["simulated_requests"] < how["issued_requests"] / 2
    assert converged["issued_requests"] == full["issued_requests"] == how["issued_requests"]
    # within the stated uncertainty plus a full run's own spread from seed to seed (±0.7%)
    ratio = converged["output_tokens_per_s"] / full["output_tokens_per_s"]
    assert abs(ratio - 1) <= how["uncertainty"] + 0.01
    assert converged["conformant"] and abs(converged["simulated_s"] / full["simulated_s"] - 1) < 0.02
    assert converged["energy_j_per_token"] == pytest.approx(full["energy_j_per_token"], rel=0.02)


def test_the_steady_rate_does_not_move_with_the_run_length(full_and_converged):
    full, _ = full_and_converged
    short = run_spec(RunSpec(**H200_LLAMA, run_length="full", samples=full["issued_requests"] // 8)).summary
    # a request's tokens spread evenly to its completion carried the drain's faster tokens into a short run's window
    # (+9.6% at an eighth of the run); the engine's own count per interval does not
    assert short["steady_output_tokens_per_s"] == pytest.approx(full["steady_output_tokens_per_s"], rel=0.01)


def test_a_run_too_short_to_skip_simulates_every_sample():
    s = run_spec(RunSpec(**H200_LLAMA, samples=5000)).summary
    assert s["run_length"]["skipped_requests"] == 0 and s["completed_requests"] == 5000


def test_the_run_command_says_what_it_simulated(capsys):
    assert main(["run", "--hardware", "h200-hgx", "--benchmark", "llama2-70b"]) == 0
    out = capsys.readouterr().out
    assert "run length  simulated" in out and "--full simulates every request" in out
    assert main(["run", "--hardware", "h200-hgx", "--benchmark", "llama2-70b", "--full"]) == 0
    assert "run length" not in capsys.readouterr().out


def test_the_queue_instances_of_an_offline_run():
    from gpusim.analysis.steady import queue_empty_times

    done = pd.DataFrame({"instance": [0, 0, 1], "first_token_s": [1.0, 5.0, 3.0], "prefill_instance": [-1, -1, -1]})
    assert sorted(queue_empty_times(done)) == [3.0, 5.0]
    split = done.assign(instance=[2, 2, 2], prefill_instance=[0, 1, 1])  # disaggregated: the prefill instances queue
    assert sorted(queue_empty_times(split)) == [1.0, 5.0]
    assert np.isclose(queue_empty_times(split.drop(columns=["instance", "prefill_instance"])), 5.0).all()


H200_SERVER = {"hardware": "h200-hgx", "benchmark": "llama2-70b", "scenario": "server", "duration_s": 1200.0}
SERVER_QPS = (45.0, 60.0, 35.0, 50.0)
"""Loads below the deployment's capacity (about 86 QPS); whether p99s settle within the first 10,000 arrivals
depends on the arrival stream, so the fixture takes the first that does."""


@pytest.fixture(scope="module")
def server_full_and_converged():
    with pytest.MonkeyPatch.context() as mp:  # a small run made long: 40-70,000 arrivals against a 20,000 ceiling
        mp.setattr(rl, "MAX_SIMULATED", 20_000)
        mp.setattr(rl, "FIRST_SERVER_MOST", 10_000)
        for qps in SERVER_QPS:
            converged = run_spec(RunSpec(**H200_SERVER, qps=qps)).summary
            if converged["run_length"]["skipped_requests"]:
                break
    full = run_spec(RunSpec(**H200_SERVER, qps=qps, run_length="full")).summary
    return full, converged, qps


def test_a_converged_server_run_gives_the_full_runs_answer_from_a_part_of_it(server_full_and_converged):
    full, converged, _ = server_full_and_converged
    how = converged["run_length"]
    # the skipped arrivals are their expected count (QPS x seconds), the full run's its Poisson draw
    assert how["simulated_requests"] <= 20_000 < how["issued_requests"]
    issued = full["issued_requests"]
    assert converged["issued_requests"] == pytest.approx(issued, rel=3 / math.sqrt(issued))
    assert converged["valid"] == full["valid"]
    # each figure near the full run's (a part of the same arrival stream): within twice its stated 95% half-width,
    # which one draw in twenty exceeds at once (45 QPS: tokens/s 1.09% off against a stated 1.02%)
    for key in ("ttft_p99_s", "tpot_p99_s"):
        assert converged[key] == pytest.approx(full[key], rel=max(2 * how["latency_uncertainty"], 0.01))
    assert converged["output_tokens_per_s"] == pytest.approx(full["output_tokens_per_s"],
                                                             rel=max(2 * how["uncertainty"], 0.005))
    assert converged["simulated_s"] == pytest.approx(full["simulated_s"], rel=0.02)


def test_a_server_run_within_the_ceiling_is_simulated_whole(server_full_and_converged):
    full, _, qps = server_full_and_converged
    whole = run_spec(RunSpec(**H200_SERVER, qps=qps)).summary
    assert whole["run_length"]["skipped_requests"] == 0
    assert whole["ttft_p99_s"] == full["ttft_p99_s"] and whole["output_tokens"] == full["output_tokens"]


def test_a_converged_server_run_may_stand_for_more_arrivals_than_a_whole_run_may_hold():
    spec = {"hardware": "vr-nvl72", "benchmark": "llama2-70b", "scenario": "server", "qps": 10_000.0,
            "duration_s": 2400.0}
    assert RunSpec(**spec).run_length == "converged"
    with pytest.raises(ValueError, match="arrivals"):
        RunSpec(**spec, run_length="full")


def _slow_prefix(n: int, qps: float = 10.0) -> pd.DataFrame:
    """n arrivals at `qps`, each in the system for as long as the whole prefix lasts: never stationary."""
    scheduled = np.arange(n) / qps
    return pd.DataFrame({"scheduled_s": scheduled, "first_token_s": scheduled + 1.0,
                         "completion_s": scheduled + n / qps, "output_tokens": 100})


@pytest.mark.parametrize("whole_most, expected", [(20_000, "whole"), (5_000, "prefix")])
def test_a_server_prefix_that_cannot_turn_stationary_gives_way_to_the_whole_run(monkeypatch, whole_most, expected):
    for name, value in {"MAX_SIMULATED": 2_000, "FIRST_SERVER_MOST": 1_000, "MIN_GROUP_REQUESTS": 50,
                        "WHOLE_MOST": whole_most}.items():
        monkeypatch.setattr(rl, name, value)
    asked: list[int] = []

    def simulate(n: int):
        asked.append(n)
        return _slow_prefix(n), None, False, n

    found = rl.converged_server(load_benchmark("llama2-70b"), 10.0, 1_000.0, 0, simulate)
    if expected == "whole":  # 10,001 arrivals fit: the first prefix says a prefix would not skip enough
        assert found is None and asked == [1_000]
    else:  # too many to simulate whole: the longest prefix, saying what it lacked
        n, how = found
        assert n == asked[-1] == 2_000 and how.issued_requests == 2_000 and "stationary" in how.decided_by


def test_a_climbing_p99_counts_as_unknown_and_a_level_one_does_not():
    level = np.array([1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.1, 0.9, 1.05, 0.95])
    assert rl.group_drift(level) == 0.0
    climbing = 1.0 + 0.1 * np.arange(10) + 0.01 * np.array([1, -1] * 5)
    # by hand: least squares slope of 0.1 + 0.01 x (the alternating residue's covariance with k) over 9 steps
    k = np.arange(10)
    slope = 0.1 + 0.01 * float(((k - k.mean()) * np.array([1, -1] * 5)).sum() / ((k - k.mean()) ** 2).sum())
    assert rl.group_drift(climbing) == pytest.approx(9 * slope)


@pytest.mark.skipif(not __import__("gpusim.parallel").parallel.CAN_FORK, reason="forks only on Linux")
@pytest.mark.parametrize("qps, duration, decided", [(44.0, 3000.0, "converged"), (73.0, 1500.0, "every request")])
def test_prefixes_judged_from_the_whole_run_give_the_same_run_as_prefixes_simulated_alone(monkeypatch, qps, duration,
                                                                                          decided):
    """Where a prefix may give way to the whole run, the whole run is built first and each prefix judged from a
    forked copy of it (`simulation._prefix_from_whole`): a converged prefix and a whole run come out as before,
    request for request."""
    import gpusim.simulation as sim

    monkeypatch.setattr(rl, "MAX_SIMULATED", 40_000)
    monkeypatch.setattr(rl, "WHOLE_MOST", 200_000)
    spec = RunSpec(hardware="h100-hgx", benchmark="llama2-70b", scenario="server", qps=qps, duration_s=duration)
    runs = []
    for fork in (True, False):
        monkeypatch.setattr(sim, "CAN_FORK", fork)
        runs.append(run_spec(spec))
    assert decided in runs[0].summary["run_length"]["decided_by"]
    assert runs[0].requests.equals(runs[1].requests)
    same = ("output_tokens_per_s", "ttft_p99_s", "tpot_p99_s", "completed_requests", "run_length")
    assert {k: runs[0].summary[k] for k in same} == {k: runs[1].summary[k] for k in same}
