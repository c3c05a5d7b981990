"""The steady window of a run, and what `gpusim run` may claim about a run (conformance, overload)."""

import numpy as np
import pandas as pd
import pytest

import gpusim
from gpusim.analysis.steady import steady_window, window_tokens


def _records(scheduled, first, last, tokens, instance=None) -> pd.DataFrame:
    n = len(scheduled)
    return pd.DataFrame({"request_id": np.arange(n), "instance": np.zeros(n, int) if instance is None else instance,
                         "scheduled_s": scheduled, "first_token_s": first, "completion_s": last,
                         "input_tokens": np.full(n, 100), "output_tokens": tokens, "preemptions": np.zeros(n, int)})


def test_window_tokens_spreads_a_requests_tokens_evenly_from_first_token_to_completion():
    # 11 tokens: one at t=0, ten spread over (0, 10]; the window [5, 10] holds half of the ten
    assert window_tokens(np.array([0.0]), np.array([10.0]), np.array([11.0]), 5.0, 10.0) == pytest.approx(5.0)
    # the first token counts where it falls
    assert window_tokens(np.array([6.0]), np.array([8.0]), np.array([3.0]), 5.0, 10.0) == pytest.approx(3.0)


def test_a_stationary_server_run_has_its_arrival_rate_times_tokens_as_steady_rate():
    # 10 requests/s for 100 s, each 0.5 s to its first token then 2 s for 20 more tokens: 210 tokens/s in steady state
    t = np.arange(0, 100, 0.1)
    rec = _records(t, t + 0.5, t + 2.5, np.full(len(t), 21))
    w = steady_window(rec, "server")
    assert w.end_s == pytest.approx(t.max())
    assert w.start_s == pytest.approx(2.0)  # p90 of the 2 s each request spends in the engine
    assert w.tokens_per_s == pytest.approx(210.0, rel=0.01)
    assert w.busy_fraction == pytest.approx(1.0)


def test_disaggregated_busy_time_is_split_at_the_first_token_and_weighted_by_gpus():
    # one request a second for 100 s; each on an 8-GPU prefill instance (1) for its 0.5 s to the first token, then
    # on a 64-GPU decode instance (0) for 2 s. By hand: the decode instance always holds a request (2 s each, 1 s
    # apart), the prefill instance half the time: (64 · 1 + 8 · 0.5) / 72.
    t = np.arange(0, 100, 1.0)
    rec = _records(t, t + 0.5, t + 2.5, np.full(len(t), 21)).assign(prefill_instance=1)
    w = steady_window(rec, "server", instances=2, instance_gpus=[64, 8])
    assert w.busy_fraction == pytest.approx((64 * 1.0 + 8 * 0.5) / 72, rel=0.02)


def test_a_run_shorter_than_twice_its_p90_request_says_its_batch_had_not_turned_over():
    # 10 requests/s for 100 s; 20% of them spend 80 s in the engine, so the p90 outlives half the run
    t = np.arange(0, 100, 0.1)
    life = np.where(np.arange(len(t)) % 5 == 0, 80.0, 2.0)
    short = steady_window(_records(t, t + 0.5, t + 0.5 + life, np.full(len(t), 21)), "server")
    assert short.start_s == pytest.approx(t.max() / 2) and not short.turned_over
    long = steady_window(_records(t, t + 0.5, t + 2.5, np.full(len(t), 21)), "server")
    assert long.turned_over


def test_an_offline_window_ends_when_the_queue_empties():
    # two waves on one instance: the second starts at 10 s and the drain runs to 110 s
    rec = _records(np.zeros(4), np.array([0.0, 0.0, 10.0, 10.0]), np.array([10.0, 10.0, 20.0, 110.0]),
                   np.full(4, 11))
    w = steady_window(rec, "offline")
    assert w.end_s == 10.0


def test_seeds_agree_on_the_steady_rate_at_a_fixed_load():
    rates = [gpusim.run("h100-hgx", "llama2-70b", "server", qps=30, duration_s=120, seed=s).summary
             for s in range(4)]
    steady = [r["steady_output_tokens_per_s"] for r in rates]
    assert max(steady) / min(steady) < 1.05


def test_a_short_server_run_is_not_conformant_and_never_valid():
    s = gpusim.run("h100-hgx", "llama2-70b", "server", qps=5, duration_s=60).summary
    assert s["latency_met"] is True
    assert s["conformant"] is False and s["valid"] is False
    assert any("min duration" in r for r in s["conformance_reasons"])


def test_an_offered_load_beyond_the_deployment_is_reported_as_overloaded():
    light = gpusim.run("h100-hgx", "llama2-70b", "server", qps=5, duration_s=60).summary
    heavy = gpusim.run("h100-hgx", "llama2-70b", "server", qps=200, duration_s=60).summary
    assert light["overloaded"] is False
    assert heavy["overloaded"] is True and heavy["capacity_qps_estimate"] < 200


def test_a_valid_run_above_the_capacity_estimate_kept_up_and_is_not_overloaded(monkeypatch):
    """The analytic capacity only stands in for a queue a run is too short to show: a VALID (conformant) run
    served its arrivals, a 60 s one above the estimate is still called overloaded."""
    from gpusim.build import Setup

    monkeypatch.setattr(Setup, "expected_qps", lambda self, seed=0: 1.0)
    full = gpusim.run("h100-hgx", "llama2-70b", "server", qps=5, duration_s=600).summary
    short = gpusim.run("h100-hgx", "llama2-70b", "server", qps=5, duration_s=60).summary
    assert full["valid"] is True and full["capacity_qps_estimate"] == 1.0 and full["overloaded"] is False
    assert short["valid"] is False and short["overloaded"] is True


def test_steady_energy_per_token_uses_the_steady_rate():
    s = gpusim.run("h100-hgx", "llama2-70b", "server", qps=30, duration_s=120).summary
    ratio = s["steady_energy_j_per_token"] * s["steady_output_tokens_per_s"]
    assert ratio == pytest.approx(s["power_kw"] * 1e3, rel=0.2)  # about the run's power, at the window's load


def test_a_run_at_its_peak_rate_meets_the_limits_that_the_next_rate_up_misses():
    from gpusim.search import trial

    s = gpusim.run("h100-hgx", "llama2-70b", "server", qps="peak", duration_s=60).summary
    assert s["peak_qps"] > 0 and s["target_qps"] == s["peak_qps"] and s["latency_met"]
    from gpusim.build import prepare

    above = trial(prepare("h100-hgx", "llama2-70b", scenario="server"), "server", s["peak_qps"] * 1.02, 60.0)
    assert not above.valid


def test_the_peak_rate_is_searched_as_long_as_submitters_run_unless_the_run_says(monkeypatch):
    import importlib

    from gpusim.loadgen.rules import SUBMISSION_DURATION_S

    asked = []

    def peak_qps(setup, scenario, duration_s=None, seed=0, hint=None):
        asked.append(duration_s)
        raise RuntimeError("stop here")

    monkeypatch.setattr(importlib.import_module("gpusim.search"), "peak_qps", peak_qps)
    for duration in (None, 60.0):
        with pytest.raises(RuntimeError, match="stop here"):
            gpusim.run("h100-hgx", "llama2-70b", "server", qps="peak", duration_s=duration)
    assert asked == [SUBMISSION_DURATION_S, 60.0]


def test_a_peak_searched_over_a_short_run_is_never_printed_plainly_valid(capsys):
    """A 60 s `--qps peak` run finds a rate that passes over 60 s; the full-length search may not pass it, so the
    verdict says over what it holds and what `gpusim mlperf` reports instead."""
    from gpusim.cli import main

    assert main(["run", "--hardware", "h100-hgx", "--benchmark", "llama2-70b", "--scenario", "server",
                 "--qps", "peak", "--duration", "60"]) == 0
    out = capsys.readouterr().out
    assert "(its peak valid rate over 60 s of arrivals)" in out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert verdict.startswith("verdict     VALID over 60 s only: `gpusim mlperf` searches the peak over 2,400 s")
