"""Peak-QPS bisection (LoadGen's FindPeakPerformance) and the deployment search."""

from __future__ import annotations

import math
import sys

import pytest

from gpusim.build import prepare
from gpusim.deploy import rule_deployment
from gpusim.search import (
    SCREEN_KEEP,
    FullRuns,
    balanced,
    candidate_deployments,
    expected_qps,
    latency_bound_qps,
    layout_key,
    peak_qps,
    probe_capacity,
    search_deployments,
    shortlist,
    trial,
    walk_to_flip,
)
from gpusim.specs.model import load_model


def grid_flip(threshold: float, grid: float = 1.01) -> tuple[float, float]:
    """The adjacent rates of the grid `grid`^k between which a verdict `q <= threshold` flips."""
    k = math.floor(math.log(threshold) / math.log(grid))
    return math.exp(k * math.log(grid)), math.exp((k + 1) * math.log(grid))


SMALL = prepare("b200-hgx", "llama2-70b")


ONE = SMALL.with_deployment(SMALL.deployment.model_copy(update={"instances": 1}))


@pytest.fixture(scope="module")
def flip_one() -> tuple[float, float]:
    """The full-length (400 s) flip of one B200 Llama 2 instance on the 1% grid, found by trying every grid
    rate down from well above its capacity: no search involved."""
    ratio = math.log(1.01)
    k = math.ceil(math.log(1.3 * expected_qps(ONE, "server")) / ratio)
    while not trial(ONE, "server", math.exp(k * ratio), 400.0, stop_when_invalid=True).valid:
        k -= 1
    return math.exp(k * ratio), math.exp((k + 1) * ratio)


def test_an_overloaded_server_run_is_invalid_for_ttft():
    t = trial(SMALL, "server", qps=2000.0, duration_s=10.0)
    assert not t.valid
    assert not t.checks.ttft_met  # the queue grows: first tokens wait
    assert t.checks.reason.startswith("TTFT constrain not met")
    assert t.checks.min_duration_met  # the short duration is the run's own min duration


def test_peak_search_on_the_engine_brackets_a_valid_and_an_invalid_rate():
    p = peak_qps(SMALL, "server", duration_s=10.0, rel_tol=0.05)
    assert p.confirmed and p.trial.valid and p.search.peak > 0
    assert p.search.lowest_invalid > p.search.peak
    above = trial(SMALL, "server", qps=p.search.lowest_invalid, duration_s=10.0)
    assert not above.valid


@pytest.mark.parametrize("start", [None, 3.0, 60.0])
def test_a_peak_is_found_at_full_length_from_any_estimate(start, flip_one):
    """A capacity probe from the analytic, a low or a high estimate says where to look; the walk ends on the
    rate every grid point tried one by one finds, in a handful of full-length runs, one of them VALID from a
    probe that overloads (here the TTFT limit binds four 1% steps under the capacity the overloaded probe
    served, and the walk steps down through them on INVALID runs stopped once doomed, the cheap ones)."""
    p = peak_qps(ONE, "server", duration_s=400.0, start=start)
    assert p.confirmed and p.trial.valid and p.trial.qps == p.search.peak
    assert (p.search.peak, p.search.lowest_invalid) == pytest.approx(flip_one, rel=1e-12)
    assert p.runs <= (6 if start is None else 10)
    if start != 3.0:  # from below, the probe doubles through VALID runs, as LoadGen does
        assert sum(ok for _, ok in p.search.tried) == 1


def test_an_overloaded_probe_run_says_where_the_peak_is(flip_one):
    """The probe's first run is above the estimate on purpose: what that overloaded run served lands within a
    few percent of the full-length peak, where the walk starts."""
    runs = FullRuns(ONE, "server", 400.0)
    expected = probe_capacity(expected_qps(ONE, "server"), runs, 1.01)
    assert len(runs.trials) == 1 and not next(iter(runs.trials.values())).valid
    assert expected == pytest.approx(flip_one[0], rel=0.05)  # RANK_BAND: a probe places a peak within -8% to +5%


def test_latency_bound_estimate_is_tighter_for_interactive():
    big = SMALL.with_deployment(SMALL.deployment.model_copy(update={"max_batch_size": 4096}))
    server, interactive = latency_bound_qps(big, "server"), latency_bound_qps(big, "interactive")
    assert 0 < interactive < server  # TPOT 40 ms instead of 200 ms caps the batch


def test_candidates_fit_and_vary_the_layout():
    cands = list(candidate_deployments(SMALL.hardware, SMALL.model, SMALL.bench, "server"))
    assert {d.tp for d in cands} == {1, 2, 4, 8}
    assert {d.weights for d in cands} == {"fp4", "fp8"}
    assert {d.pp for d in cands} == {1, 2, 4}
    assert all(d.ep == 1 and not d.attention_dp for d in cands)  # dense model


def test_pipeline_stages_span_systems_but_not_one_system():
    two = prepare("h100-hgx", "llama2-70b", systems=2)
    cands = list(candidate_deployments(two.hardware, load_model("deepseek-r1"), two.bench, "offline"))
    assert any(d.tp == 8 and d.pp == 2 for d in cands)  # stages on both systems
    one = prepare("h100-hgx", "llama2-70b")
    assert all(d.tp * d.pp <= 8 for d in candidate_deployments(one.hardware, one.model, one.bench, "offline"))


def test_moe_candidates_include_attention_dp_and_expert_parallelism():
    setup = prepare("b200-hgx", "deepseek-r1")
    cands = list(candidate_deployments(setup.hardware, setup.model, setup.bench, "server"))
    assert cands and any(d.attention_dp for d in cands) and any(d.ep > 1 for d in cands)
    assert min(d.tp * d.pp for d in cands) >= 2  # 671B parameters do not fit on one B200


def test_search_returns_a_valid_best_among_the_ranked():
    sr = search_deployments(SMALL, "server", duration_s=10.0, screen=2, finalists=1, rel_tol=0.05)
    short, _ = shortlist(SMALL, "server", screen=2)
    assert sr.best.trial.valid
    assert sorted(r.setup.deployment.name for r in sr.ranked) == sorted(r.setup.deployment.name for r in short)
    assert any(r.setup.deployment == SMALL.deployment for r in sr.ranked)
    assert sr.best.setup.deployment.name == sr.ranked[0].setup.deployment.name


def test_server_finalists_near_the_best_probe_are_walked_and_ranked_on_their_full_length_peaks(monkeypatch):
    """Probes place a peak to within several percent, so every finalist whose probe expects a peak near the
    best expectation is walked to its flip; the search returns the one serving the most there. It starts from
    the best layout's other token budget, whose probe expects 11% less (the engine's own count of what an
    overloaded 60 s run served), and widens the band to take both in."""
    monkeypatch.setattr(sys.modules["gpusim.search"], "RANK_BAND", 0.85)  # gpusim.search is also a function
    start = SMALL.with_deployment(SMALL.deployment.model_copy(update={"max_num_tokens": 8192, "name": "b1024-t8192"}))
    sr = search_deployments(start, "server", duration_s=60.0, screen=3, finalists=2)
    by_expected = sorted(sr.ranked, key=lambda r: -r.expected_peak)
    near = [r for r in by_expected[:2] if r.expected_peak >= 0.85 * by_expected[0].expected_peak]
    walked = [r for r in sr.ranked if r.peak.confirmed]
    assert len(sr.ranked) >= 2 and len(near) == 2 and {id(r) for r in walked} == {id(r) for r in near}
    assert sr.best is walked[0].peak and all(r.peak.trial.valid for r in walked)
    assert all(r.peak.trial.qps == r.peak.search.peak for r in walked)
    rates = [r.peak.trial.tokens_per_s for r in walked]
    assert rates == sorted(rates, reverse=True)


def test_the_screen_simulates_only_layouts_near_the_best_estimate():
    """Layouts the analytic screen puts more than `SCREEN_KEEP` under the best are not simulated (the starting
    deployment always is)."""
    short, _ = shortlist(SMALL, "server", screen=5)
    top = max(r.estimate_qps for r in short)
    screened = [r for r in short if r.setup.deployment != SMALL.deployment]
    assert short and all(r.estimate_qps >= SCREEN_KEEP * top for r in screened)
    kept = {r.setup.deployment.name for r in short}
    below = [d for d in candidate_deployments(SMALL.hardware, SMALL.model, SMALL.bench, "server")
             if d.name not in kept]
    assert any(expected_qps(SMALL.with_deployment(d, d.name), "server") < SCREEN_KEEP * top for d in below)


def test_disaggregated_and_mtp_candidates_where_the_rules_allow():
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model

    hw, model = load_hardware("gb300-nvl72"), load_model("deepseek-r1")
    bench = prepare("gb300-nvl72", "deepseek-r1").bench
    interactive = list(candidate_deployments(hw, model, bench, "interactive"))
    server = list(candidate_deployments(hw, model, bench, "server"))
    assert any(d.mode == "disaggregated" for d in server)
    assert all(d.mtp is None for d in server)  # MLPerf allows MTP for DeepSeek-R1 in Interactive only
    with_mtp = [d for d in interactive if d.mtp is not None]
    assert with_mtp and list(with_mtp[0].mtp.acceptance) == model.mtp_acceptance
    assert len({layout_key(d) for d in interactive}) > 1  # layouts (MTP, pools included) are hashable
    assert any(d.mode == "disaggregated" and d.mtp is not None for d in interactive)


def test_a_gpu_budget_keeps_candidates_inside_the_slice():
    setup = prepare("gb300-nvl72", "deepseek-r1")
    cands = list(candidate_deployments(setup.hardware, setup.model, setup.bench, "offline", gpus=4))
    assert cands
    assert all(d.mode == "aggregated" and d.instances * d.gpus_per_instance <= 4 for d in cands)
    assert all(d.instances * d.gpus_per_instance > 2 for d in cands)  # as many instances as fit


def test_search_candidates_run_with_the_starting_software_profile():
    base = SMALL.with_deployment(SMALL.deployment.model_copy(update={"software": "vllm"}))
    sr = search_deployments(base, "offline", duration_s=10.0, screen=1)
    assert {r.setup.deployment.software for r in sr.ranked} == {"vllm"}


def test_attention_dp_candidates_are_also_tried_with_the_balance_their_software_offers():
    """trtllm (the v6 generation) offers attention-DP balancing, for any pool that runs attention DP; the v5.1
    generation its own (NVIDIA's v5.1 configs: 2 batching-wait, 6 timeout iterations); vLLM none; a deployment's
    own setting is kept."""
    from gpusim.specs.deployment import AdpBalance, Deployment, DisaggregatedDeployment, Parallelism

    adp = Deployment(tp=8, ep=8, attention_dp=True, name="dep8")
    offer = balanced(adp)
    assert offer is not None and offer.name == "dep8-balance"
    assert (offer.adp_balance.timeout_iters, offer.adp_balance.batching_wait_iters) == (60, 0)
    assert balanced(Deployment(tp=8, ep=8)) is None
    v51 = balanced(adp.model_copy(update={"software": "trtllm-v5.1"}))
    assert (v51.adp_balance.timeout_iters, v51.adp_balance.batching_wait_iters) == (6, 2)
    assert balanced(adp.model_copy(update={"software": "vllm"})) is None
    assert balanced(adp.model_copy(update={"adp_balance": AdpBalance(timeout_iters=5)})) is None
    disagg = DisaggregatedDeployment(mode="disaggregated", prefill=Parallelism(tp=4, ep=4, attention_dp=True),
                                     decode=Parallelism(tp=8, ep=8, attention_dp=True))
    assert balanced(disagg) is not None


def test_the_offline_search_runs_attention_dp_contenders_with_and_without_the_balance():
    setup = prepare("b200-hgx", "deepseek-r1")
    sr = search_deployments(setup, "offline", duration_s=60.0, screen=1)
    names = [r.setup.deployment.name for r in sr.ranked]
    assert any(n.endswith("-balance") for n in names)
    assert {n.removesuffix("-balance") for n in names if n.endswith("-balance")} <= set(names)
    server = search_deployments(setup.with_deployment(rule_deployment(setup.hardware, setup.model)), "server",
                                duration_s=60.0, screen=1, rel_tol=0.2)
    assert not any(r.setup.deployment.name.endswith("-balance") for r in server.ranked)


def test_offline_contenders_are_ranked_by_the_full_run_they_report():
    start = SMALL.with_deployment(rule_deployment(SMALL.hardware, SMALL.model))  # competes beside the screened
    sr = search_deployments(start, "offline", duration_s=240.0, screen=2)  # longer than the old 120 s ranking runs
    rates = [r.peak.trial.tokens_per_s for r in sr.ranked]
    assert len(rates) >= 2 and rates == sorted(rates, reverse=True)
    assert sr.best is sr.ranked[0].peak and sr.best.confirmed
    assert all(r.peak.trial.checks.min_duration_s == 240.0 for r in sr.ranked)  # the reported run, not a shorter one


def test_a_reasoning_offline_run_of_loadgens_minimum_length_is_set_by_its_drain():
    """DeepSeek-R1's 20k-token outputs: LoadGen's minimum count holds about one batch of them, so the run's
    tail, not the engine's rate, sets its tokens/s; a run as long as submitters' reports more."""
    from gpusim.loadgen.rules import SUBMISSION_DURATION_S
    from gpusim.specs.deployment import Deployment

    dep = Deployment(tp=8, ep=8, attention_dp=True, weights="fp4", activations="fp4", max_batch_size=8192,
                     max_num_tokens=65536, frontend="http")  # 1,024 sequences per rank
    setup = prepare("b300-hgx", "deepseek-r1", deployment=dep)
    short = trial(setup, "offline", duration_s=600.0)
    long = trial(setup, "offline", duration_s=SUBMISSION_DURATION_S)
    assert long.result.summary["completed_requests"] > 3 * short.result.summary["completed_requests"]
    assert long.tokens_per_s > 1.1 * short.tokens_per_s


def test_the_analytic_screen_agrees_with_the_simulated_steady_rate_on_small_cases():
    from gpusim.loadgen.datasets import dataset_lengths
    from gpusim.specs.deployment import Deployment

    base = prepare("h100-hgx", "llama2-70b", scenario="offline")
    osl = float(dataset_lengths(base.bench, 0)[1].mean())
    est, sim = {}, {}
    for tp in (1, 2, 8):
        s = base.with_deployment(Deployment(tp=tp, weights="fp8", activations="fp8", max_batch_size=256))
        est[tp] = expected_qps(s, "offline") * osl
        sim[tp] = trial(s, "offline", None, 60.0).result.summary["steady_output_tokens_per_s"]
        assert sim[tp] == pytest.approx(est[tp], rel=0.15), tp
    assert max(est, key=est.get) == max(sim, key=sim.get)  # the screen ranks the best first


@pytest.mark.parametrize("hint", [37.0, 37.3 / 1.01 ** 3, 37.3 * 1.12, 30.0, 60.0])
def test_a_walk_from_any_start_ends_where_a_fresh_search_does(hint):
    calls = []
    peak, above = grid_flip(37.3)
    s = walk_to_flip(hint, lambda q: calls.append(q) or q <= 37.3, 1.01)
    assert (s.peak, s.lowest_invalid) == pytest.approx((peak, above), rel=1e-12)
    assert len(calls) == len(set(calls))  # each rate judged once
    if abs(hint / peak - 1) < 0.005:
        assert len(calls) == 2  # the start and its neighbour up


def test_a_walk_over_cheap_invalid_runs_meets_one_valid_rate_only():
    """Where INVALID runs are cheap (stopped once doomed) and say what they served, the walk comes down from the
    INVALID side to just above it: of the rates it judges, only the peak is VALID."""
    peak, above = grid_flip(37.3)
    calls: list[float] = []
    s = walk_to_flip(41.0, lambda q: calls.append(q) or q <= 37.3, 1.01, seen={41.0: False},
                     below=lambda q: 37.9, cheap=lambda q: True)
    assert (s.peak, s.lowest_invalid) == pytest.approx((peak, above), rel=1e-12)
    assert [q for q in calls if q <= 37.3] == [s.peak] and len(calls) <= 4


def test_a_walk_over_invalid_runs_that_kept_up_steps_down_and_halves():
    """INVALID runs that kept up with their arrivals (a latency limit binding, no served rate) say nothing of
    how far down the flip is: the walk steps down 10% and halves, rather than one grid step per run (Qwen3-VL
    Interactive on B300 took 77 runs from 26% above its flip)."""
    calls: list[float] = []
    s = walk_to_flip(80.0, lambda q: calls.append(q) or q <= 63.5, 1.01, seen={80.0: False},
                     below=lambda q: None, cheap=lambda q: True)
    assert (s.peak, s.lowest_invalid) == pytest.approx(grid_flip(63.5), rel=1e-12)
    assert len(calls) <= 8


def test_a_walk_below_a_capacity_that_reads_low_still_finds_the_flip():
    """`below` only says where to look: a capacity that reads under the peak costs runs, not the answer."""
    s = walk_to_flip(41.0, lambda q: q <= 37.3, 1.01, below=lambda q: 30.0, cheap=lambda q: True)
    assert (s.peak, s.lowest_invalid) == pytest.approx(grid_flip(37.3), rel=1e-12)


def test_a_near_bracket_whose_served_rate_is_spent_is_halved_not_climbed():
    """VALID at 14.25, a stopped INVALID 6 grid steps up whose served rate lies under 14.25, the flip one step under
    it: halving finds the flip in three VALID runs where climbing took five."""
    lo, hi = 1.01 ** 267, 1.01 ** 273
    threshold = 1.01 ** 272 * 1.001
    calls: list[float] = []
    s = walk_to_flip(lo, lambda q: calls.append(q) or q <= threshold, 1.01, seen={lo: True, hi: False},
                     below=lambda q: 0.9 * lo, cheap=lambda q: True)
    assert (s.peak, s.lowest_invalid) == pytest.approx(grid_flip(threshold), rel=1e-12)
    assert len(calls) <= 3


@pytest.mark.parametrize("steps_below", [3, 6, 12])
def test_a_climb_out_of_a_far_bracket_jumps_where_the_valid_margins_meet_the_limit(steps_below):
    """A VALID start some grid steps under the flip, the INVALID end a stopped probe far above (no margin, its
    served rate spent): after one step up the walk follows the secant of the two VALID runs' latency margins
    instead of climbing one VALID run per step (GB300 NVL72 DeepSeek-R1 Server TP8/EP8 climbed 146.22, 147.68,
    149.16, 150.65 to its flip under 152.16). The margin curve, a x + b x² in x = log(rate / limit rate), is
    fitted to B200 DeepSeek-R1 Server TP8/EP8's (-0.19, -0.10, -0.02 at 14.25, 14.68, 14.98 QPS): convex, as a
    p99 is near the flip, so the secant lands on the flip or a step past it."""
    threshold = 150.65 * 1.001
    lo, hi = grid_flip(threshold)[0] / 1.01 ** steps_below, 220.0
    calls: list[float] = []

    def margin(q: float) -> float | None:  # log(p99 / limit): negative while VALID
        x = math.log(q / threshold)
        return 4.15 * x + 12.5 * x * x if q <= threshold else None  # INVALID runs near the flip were stopped

    s = walk_to_flip(lo, lambda q: calls.append(q) or q <= threshold, 1.01, seen={lo: True, hi: False},
                     below=lambda q: lo, cheap=lambda q: True, margin=margin)
    assert (s.peak, s.lowest_invalid) == pytest.approx(grid_flip(threshold), rel=1e-12)
    assert len(calls) <= 5 and len(calls) <= steps_below  # climbing takes steps_below + 1


def test_a_secant_that_passes_the_invalid_end_is_not_followed():
    """Two VALID margins that barely rise put the limit far past a stopped INVALID end ten steps up: the walk
    halves that bracket rather than stepping down from just under its INVALID end one run at a time."""
    lo, hi, threshold = 1.01 ** 500, 1.01 ** 510, 1.01 ** 502 * 1.001
    known = {lo / 1.01: -0.50, lo: -0.49}
    calls: list[float] = []
    s = walk_to_flip(lo, lambda q: calls.append(q) or q <= threshold, 1.01, seen={**dict.fromkeys(known, True),
                     hi: False}, below=lambda q: lo, cheap=lambda q: True,
                     margin=lambda q: next((m for k, m in known.items() if k == pytest.approx(q)), None))
    assert (s.peak, s.lowest_invalid) == pytest.approx(grid_flip(threshold), rel=1e-12)
    assert len(calls) <= 5  # following the secant from under the INVALID end down takes 8


def test_a_search_run_stops_once_it_can_only_be_invalid_and_keeps_the_verdict():
    """An overloaded Server run judged for its verdict alone ends when more requests are past the TTFT limit than
    early stopping allows, once it has run long enough to say what it served; the full run is INVALID too, and
    the rate the engine served by then is what the full run sustains, whatever the overload. A VALID run is never
    stopped."""
    one = SMALL.with_deployment(SMALL.deployment.model_copy(update={"instances": 1}))
    over = 1.1 * expected_qps(one, "server")  # over the analytic capacity (conservative under the power limit)
    doomed = trial(one, "server", over, 900.0, stop_when_invalid=True)
    whole = trial(one, "server", over, 900.0)
    assert not doomed.valid and not whole.valid
    stop = doomed.result.summary["stopped"]
    assert stop is not None and stop["at_s"] < 900.0 and doomed.checks.stopped_s == stop["at_s"]
    assert "early stopping not met" in doomed.checks.reason and "run stopped" in doomed.checks.reason
    assert doomed.result.summary["wall_s"] < whole.result.summary["wall_s"]
    assert stop["served_tokens_per_s"] == pytest.approx(whole.result.summary["steady_output_tokens_per_s"], rel=0.05)
    early = trial(one, "server", 3 * over, 900.0, stop_when_invalid=True).result.summary["stopped"]
    warm = SMALL.bench.server.ttft_s + doomed.result.requests["output_tokens"].mean() * SMALL.bench.server.tpot_s
    assert 2 * warm <= early["at_s"] <= stop["at_s"]  # not before it can say what it served
    assert early["served_tokens_per_s"] == pytest.approx(stop["served_tokens_per_s"], rel=0.05)
    ok = trial(SMALL, "server", qps=50.0, duration_s=60.0, stop_when_invalid=True)
    plain = trial(SMALL, "server", qps=50.0, duration_s=60.0)
    assert ok.valid and ok.result.summary["stopped"] is None
    assert ok.result.summary["output_tokens_per_s"] == plain.result.summary["output_tokens_per_s"]


def test_a_software_generation_runs_only_the_features_it_has():
    """A round's software is its kernels and its features: trtllm-v5.1 runs no expert parallelism beyond 8 GPUs
    (NVIDIA's v5.1 DeepSeek-R1 configs), so the search never proposes wide EP or the wide-EP decode pools of a
    disaggregated layout with it, and a deployment that needs one is refused, naming the field."""
    from gpusim.deploy import check_deployment
    from gpusim.errors import InputError
    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.deployment import MTP, Deployment
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.software import ServingFeatures

    hw, model = load_hardware("gb300-nvl72"), load_model("deepseek-r1")
    bench = load_benchmark("deepseek-r1")

    def widest(d):
        return max(d.role(r).ep for r in ("prefill", "decode"))

    v6 = list(candidate_deployments(hw, model, bench, "server"))
    v51 = list(candidate_deployments(hw, model, bench, "server", software="trtllm-v5.1"))
    assert max(map(widest, v6)) > 8 and any(d.mode == "disaggregated" for d in v6)
    assert v51 and max(map(widest, v51)) == 8 and {d.software for d in v51} == {"trtllm-v5.1"}
    dep16 = Deployment(tp=16, ep=16, attention_dp=True, software="trtllm-v5.1")
    with pytest.raises(InputError) as err:
        check_deployment(hw, model, dep16, "my.yaml")
    assert err.value.field == "ep" and "beyond 8" in err.value.message
    check_deployment(hw, model, dep16.model_copy(update={"software": "trtllm"}), "my.yaml")
    none = ServingFeatures(mtp=False, disaggregated=False)
    assert none.lacks(Deployment(mtp=MTP(depth=1, acceptance=[0.8]))) == ("mtp", "MTP speculative decoding "
                                                                        "(features.mtp: false)")
    assert none.lacks(next(d for d in v6 if d.mode == "disaggregated"))[0] == "mode"
    assert none.lacks(Deployment(tp=8, ep=8)) is None
