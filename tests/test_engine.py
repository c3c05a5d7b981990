"""The serving engine on a linear fake cost model, where every time can be computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.loadgen.workload import Workload
from gpusim.perf.step import BatchShape
from gpusim.sim.cluster import Cluster, Pool
from gpusim.sim.instance import Instance
from gpusim.sim.kvcache import KVCache
from gpusim.specs.deployment import AdpBalance, BatchWait, Deployment

BASE, PER_TOKEN, PER_CTX = 0.010, 1e-5, 1e-7


class LinearCost:
    """step = BASE + PER_TOKEN·(prefill + decode tokens) + PER_CTX·(decode context) — linear by design."""

    def __init__(self) -> None:
        self.calls = 0

    def step_time(self, b: BatchShape) -> float:
        self.calls += 1
        return BASE + PER_TOKEN * (b.prefill_tokens + b.decode_seqs) + PER_CTX * b.decode_context


def simulate(workload: Workload, kv_tokens: int = 10**7, instances: int = 1, **dep) -> Cluster:
    d = Deployment(**dep)
    cluster = Cluster([Pool("aggregated", LinearCost(), kv_tokens, d, instances)], workload, router=d.router)
    cluster.run()
    return cluster


def poisson(n: int, qps: float, seed: int = 1, isl=(50, 400), osl=(2, 300)) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload.create(np.cumsum(rng.exponential(1 / qps, n)), rng.integers(*isl, n), rng.integers(*osl, n))


def test_single_request_times_by_hand():
    prompt, out = 100, 5
    c = simulate(Workload.create([0.0], [prompt], [out]))
    prefill = BASE + PER_TOKEN * prompt
    # decode steps i=0..3 read contexts prompt+1 .. prompt+4 (the prompt plus the tokens generated so far)
    decode = sum(BASE + PER_TOKEN + PER_CTX * (prompt + 1 + i) for i in range(out - 1))
    r = c.records
    assert r.first_token_s[0] == pytest.approx(prefill, rel=1e-12)
    assert r.completion_s[0] == pytest.approx(prefill + decode, rel=1e-12)


def test_chunked_prefill_splits_long_prompt_by_token_budget():
    c = simulate(Workload.create([0.0], [2500], [2]), max_num_tokens=1000)
    chunks = [1000, 1000, 500]
    assert c.records.first_token_s[0] == pytest.approx(sum(BASE + PER_TOKEN * t for t in chunks), rel=1e-12)


def test_every_request_completes_once_and_tokens_are_conserved():
    wl = poisson(600, qps=40)
    c = simulate(wl, instances=3)
    df = c.records.frame()
    assert len(df) == len(wl) == c.records.completed
    assert df["request_id"].is_unique
    assert c.records.generated_tokens == int(wl.output_tokens.sum())
    assert (df["first_token_s"] >= df["scheduled_s"]).all()
    assert (df["completion_s"] >= df["first_token_s"]).all()
    assert all(i.outstanding_tokens == 0 and not i.decoding for i in c.instances)
    assert all(i.kv.tokens == pytest.approx(0, abs=1e-6) and i.kv.sequences == 0 for i in c.instances)


def test_fast_forward_gives_the_same_times_as_stepping(monkeypatch):
    wl = poisson(300, qps=30, seed=7)
    fast = simulate(wl, instances=2).records
    monkeypatch.setattr(Instance, "fast_forward", False)
    slow = simulate(wl, instances=2).records
    np.testing.assert_allclose(fast.completion_s, slow.completion_s, rtol=1e-9)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)


def test_scheduler_recv_interval_holds_an_arrival_until_the_next_read():
    prompt, first_out, n = 100, 200, 10
    prefill = BASE + PER_TOKEN * prompt
    decode = [BASE + PER_TOKEN + PER_CTX * (prompt + 1 + i) for i in range(first_out)]
    arrive = prefill + decode[0] / 2  # during the first decode step of request 0
    wl = Workload.create([0.0, arrive], [prompt, prompt], [first_out, 2])
    every_step = simulate(wl).records.first_token_s[1]
    held = simulate(wl, scheduler_recv_interval=n).records.first_token_s[1]
    joint = BASE + PER_TOKEN * (prompt + 1)  # request 1's prefill beside one decode step of request 0
    # read before every step: it joins after the step it arrived in
    assert every_step == pytest.approx(prefill + decode[0] + joint + PER_CTX * (prompt + 2), rel=1e-12)
    # read every n decode steps (the read after request 0's prefill restarts the count): after n of them
    assert held == pytest.approx(prefill + sum(decode[:n]) + joint + PER_CTX * (prompt + 1 + n), rel=1e-12)
    # a step that ran prefill is followed by a read: an arrival during request 0's prefill joins at once
    wl = Workload.create([0.0, prefill / 2], [prompt, prompt], [first_out, 2])
    held = simulate(wl, scheduler_recv_interval=n).records.first_token_s[1]
    assert held == pytest.approx(prefill + joint + PER_CTX * (prompt + 1), rel=1e-12)


def test_scheduler_recv_interval_fast_forward_matches_stepping(monkeypatch):
    wl = poisson(300, qps=30, seed=5)
    fast = simulate(wl, instances=2, scheduler_recv_interval=30).records
    monkeypatch.setattr(Instance, "fast_forward", False)
    slow = simulate(wl, instances=2, scheduler_recv_interval=30).records
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)
    np.testing.assert_allclose(fast.completion_s, slow.completion_s, rtol=1e-9)
    assert fast.first_token_s.mean() > simulate(wl, instances=2).records.first_token_s.mean()


def test_batch_wait_holds_a_context_request_until_the_timeout_or_the_token_ratio():
    prompt, first_out, wait = 100, 200, 7
    prefill = BASE + PER_TOKEN * prompt
    decode = [BASE + PER_TOKEN + PER_CTX * (prompt + 1 + i) for i in range(first_out)]
    wl = Workload.create([0.0, prefill + decode[0] / 2], [prompt, prompt], [first_out, 2])
    joint = BASE + PER_TOKEN * (prompt + 1)
    # 101 tokens never reach 0.9 × 8192: the request sits out `wait` iterations, then runs in the next one
    held = simulate(wl, batch_wait=BatchWait(timeout_iters=wait, max_tokens_ratio=0.9)).records.first_token_s[1]
    assert held == pytest.approx(prefill + sum(decode[:wait + 1]) + joint + PER_CTX * (prompt + 2 + wait), rel=1e-12)
    # its 100 prompt tokens and 1 generating token fill 1% of the budget: no wait
    at_once = simulate(wl, batch_wait=BatchWait(timeout_iters=wait, max_tokens_ratio=0.01)).records.first_token_s[1]
    assert at_once == pytest.approx(prefill + decode[0] + joint + PER_CTX * (prompt + 2), rel=1e-12)
    # nothing generating, nothing held: with attention DP the setting does not apply either
    alone = Workload.create([0.0], [prompt], [2])
    assert simulate(alone, batch_wait=BatchWait(timeout_iters=wait, max_tokens_ratio=0.9)).records.first_token_s[0] \
        == pytest.approx(prefill, rel=1e-12)


def test_attention_dp_balance_waits_for_every_rank_or_the_timeout():
    prompt, out, timeout = 100, 300, 10
    prefill = BASE + PER_TOKEN * 2 * prompt  # requests 0 and 1 together, one per rank afterwards
    decode = [BASE + PER_TOKEN * 2 + PER_CTX * 2 * (prompt + 1 + i) for i in range(out)]
    arrive = prefill + decode[0] / 2
    adp = {"tp": 2, "attention_dp": True}
    balance = AdpBalance(timeout_iters=timeout, batching_wait_iters=0)

    def first_token(arrivals: list[float], **dep) -> float:
        n = len(arrivals)
        wl = Workload.create([0.0, 0.0, *arrivals], [prompt] * (n + 2), [out, out] + [2] * n)
        return simulate(wl, **adp, **dep).records.first_token_s[2]

    def joint(steps: int, new: int = 1) -> float:  # the new prefills beside decode step `steps`
        return BASE + PER_TOKEN * (new * prompt + 2) + PER_CTX * 2 * (prompt + 1 + steps)

    # without balance the request runs in the iteration after it arrived
    assert first_token([arrive]) == pytest.approx(prefill + decode[0] + joint(1), rel=1e-12)
    # one request cannot reach both ranks: the counter (running since decoding began) reaches the timeout
    # at the 10th iteration after the prefill: nine decode steps first
    held = first_token([arrive], adp_balance=balance)
    assert held == pytest.approx(prefill + sum(decode[:timeout - 1]) + joint(timeout - 1), rel=1e-12)
    # two requests reach both ranks: they run at once
    both = first_token([arrive, arrive], adp_balance=balance)
    assert both == pytest.approx(prefill + decode[0] + joint(1, new=2), rel=1e-12)


def test_every_rank_needs_a_request_counting_the_less_loaded_ranks_filling_first():
    from gpusim.sim.gate import _to_reach_every_rank

    assert _to_reach_every_rank([3, 1, 2]) == (0 + 2 + 1) + 1
    assert _to_reach_every_rank([2, 2]) == 2
    assert _to_reach_every_rank([0, 0, 0, 0]) == 4


@pytest.mark.parametrize("gate", [{"batch_wait": BatchWait(timeout_iters=20, max_tokens_ratio=0.5)},
                                  {"adp_balance": AdpBalance(timeout_iters=30), "tp": 4, "attention_dp": True}])
def test_context_gates_fast_forward_matches_stepping(monkeypatch, gate):
    wl = poisson(300, qps=30, seed=5)
    fast = simulate(wl, instances=2, **gate).records
    monkeypatch.setattr(Instance, "fast_forward", False)
    slow = simulate(wl, instances=2, **gate).records
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)
    np.testing.assert_allclose(fast.completion_s, slow.completion_s, rtol=1e-9)
    ungated = {k: v for k, v in gate.items() if k in ("tp", "attention_dp")}
    assert fast.first_token_s.mean() > simulate(wl, instances=2, **ungated).records.first_token_s.mean()


def test_gates_do_not_sum_a_long_queue():
    """Batch waiting reads queued prompts only until they fill its share of the budget; the attention-DP
    balance never reads them (an Offline queue holds thousands of requests, read every iteration)."""
    import itertools

    from gpusim.sim.gate import AdpBalanceGate, BatchWaitGate

    def unreadable():
        raise AssertionError("read")
        yield 0

    wait = BatchWaitGate(BatchWait(timeout_iters=20, max_tokens_ratio=0.5), max_num_tokens=1000)
    assert wait.release(10**9, itertools.repeat(100), [1, 1])  # endless queue: 500 tokens reached after 5
    assert not wait.release(2, iter([100, 100]), [1, 1])
    balance = AdpBalanceGate(AdpBalance(timeout_iters=30), rank_cap=8)
    assert not balance.release(1, unreadable(), [2, 2])


def test_held_iterations_run_as_spans_and_count_towards_the_timeout():
    from gpusim.sim.gate import AdpBalanceGate

    gate = AdpBalanceGate(AdpBalance(timeout_iters=10, batching_wait_iters=3), rank_cap=8)
    assert not gate.release(1, iter(()), [2, 2]) and gate.holds_left() == 8  # 1 of 10 counted
    gate.hold(8)
    assert gate.release(1, iter(()), [2, 2])  # the tenth iteration releases
    assert not gate.release(2, iter(()), [2, 2]) and gate.holds_left() == 2  # every rank has one: 3 to batch
    gate.hold(2)
    assert gate.release(2, iter(()), [2, 2])


def test_fast_forward_saves_cost_model_calls():
    wl = poisson(200, qps=5, seed=3, osl=(200, 400))
    c = simulate(wl)
    decode_steps = c.stats().steps
    assert c.instances[0].cost.calls < decode_steps / 5


def test_kv_never_exceeds_capacity_and_preemption_recomputes(monkeypatch):
    peak = {"used": 0}
    grow = KVCache.grow

    def watched(self, tokens):
        grow(self, tokens)
        peak["used"] = max(peak["used"], self.used)
        assert self.used <= self.capacity

    monkeypatch.setattr(KVCache, "grow", watched)
    wl = Workload.create(np.zeros(40), np.full(40, 200), np.full(40, 400))
    c = simulate(wl, kv_tokens=4000, kv_block_tokens=16)
    df = c.records.frame()
    assert len(df) == 40 and c.records.generated_tokens == 40 * 400
    assert df["preemptions"].sum() > 0
    assert peak["used"] <= 4000


def test_preempted_request_restarts_its_prefill_with_generated_tokens():
    wl = Workload.create(np.zeros(6), np.full(6, 500), np.full(6, 600))
    c = simulate(wl, kv_tokens=3000, kv_block_tokens=1)
    assert c.records.frame()["preemptions"].sum() > 0
    assert c.records.generated_tokens == 6 * 600
    assert all(not i.prefilling and not i.decoding for i in c.instances)


def test_littles_law_on_a_steady_server_run():
    qps = 20.0
    wl = poisson(4000, qps=qps, seed=11)
    df = simulate(wl, instances=2).records.frame()
    latency = df["completion_s"] - df["scheduled_s"]
    horizon = df["completion_s"].max()
    t = np.linspace(0, horizon, 20001)
    in_system = (np.searchsorted(np.sort(df["scheduled_s"]), t, side="right")
                 - np.searchsorted(np.sort(df["completion_s"]), t, side="right"))
    window = (t > 0.1 * horizon) & (t < 0.9 * horizon)
    lam = len(df) / df["scheduled_s"].max()
    assert in_system[window].mean() == pytest.approx(lam * latency.mean(), rel=0.1)


def test_closed_loop_keeps_concurrency_and_issues_on_completion():
    wl = Workload.create(np.zeros(12), np.full(12, 64), np.full(12, 8), concurrency=3)
    df = simulate(wl).records.frame().sort_values("scheduled_s")
    assert (df["scheduled_s"].iloc[:3] == 0).all()
    completions = np.sort(df["completion_s"].to_numpy())
    # every later request is scheduled exactly when an earlier one completed
    assert all(np.isclose(completions, s).any() for s in df["scheduled_s"].iloc[3:])


def test_round_robin_spreads_requests_evenly():
    wl = poisson(90, qps=10)
    df = simulate(wl, instances=3, router="round_robin").records.frame()
    assert df["instance"].value_counts().tolist() == [30, 30, 30]


def test_request_larger_than_kv_cache_is_an_input_error():
    from gpusim.errors import InputError

    with pytest.raises(InputError, match="cannot fit in the KV cache"):
        simulate(Workload.create([0.0], [5000], [2]), kv_tokens=1000)


def test_requests_dispatched_together_reach_their_instance_together_in_order():
    """Requests issued at the same time take the front end's dispatch time, then queue in issue order; one
    engine event carries them all (an Offline run issues every request at t = 0)."""
    delay, n = 0.25, 50
    wl = Workload.create(np.zeros(n), np.full(n, 100), np.full(n, 3))
    d = Deployment(max_batch_size=4)
    cluster = Cluster([Pool("aggregated", LinearCost(), 10**7, d, 1)], wl, dispatch_overhead_s=delay)
    cluster.env.process(cluster._source())
    cluster.env.run(until=delay / 2)
    inst = cluster.instances[0]
    assert not inst.waiting and len(inst._incoming) == n
    assert sum(1 for when, *_ in cluster.env._queue if when == delay) == 1  # the one onboarding event
    cluster.env.run(until=delay * 1.001)  # onboarded, and the first step admitted what fits
    assert [r.id for r in [*inst.prefilling, *inst.waiting]] == list(range(n))
    cluster.env.run()
    first = cluster.records.first_token_s
    assert first[0] == pytest.approx(delay + BASE + PER_TOKEN * 100 * 4, rel=1e-12)  # the first four prefill together
    assert np.all(np.diff(first) >= 0)


def test_a_run_paused_at_its_nth_arrival_drains_as_the_run_of_its_first_n_and_goes_on_as_the_whole():
    wl = poisson(400, qps=40.0, seed=3)
    first = Workload.create(wl.arrival_s[:150], wl.input_tokens[:150], wl.output_tokens[:150])
    alone = simulate(first, instances=2).records.frame()
    whole = simulate(wl, instances=2).records.frame()

    def paused() -> Cluster:
        cluster = Cluster([Pool("aggregated", LinearCost(), 10**7, Deployment(), 2)], wl)
        cluster.run_until_issued(150)
        assert cluster.issued == 150 and cluster.env.now == wl.arrival_s[149]
        return cluster

    drained = paused().drain().frame()
    assert len(drained) == 150 and drained.equals(alone)
    carried_on = paused().run().frame()
    assert len(carried_on) == 400 and carried_on.equals(whole)


@pytest.mark.parametrize(("router", "decode_instances"), [("round_robin", [1, 2, 1]), ("least_loaded", [1, 2, 2]),
                                                         ("kv_aware", [1, 2, 2])])
def test_the_decode_instance_is_picked_by_the_deployments_router(router, decode_instances):
    # one prefill instance hands three requests to two decode instances: the first decodes 1,000 tokens, the
    # other two 50; each is handed off as its prefill ends, in order. Round-robin (Dynamo's frontend) sends the
    # third to the first decode instance, busy with its long request; least-loaded to the second, which holds
    # 50 tokens against 1,000 (and the KV-aware router, whose cache cannot help a decode pool, does the same).
    wl = Workload.create([0.0, 0.0, 0.0], [100, 100, 100], [1000, 50, 50])
    d = Deployment(router=router, max_num_tokens=100)
    pools = [Pool("prefill", LinearCost(), 10**7, d, 1), Pool("decode", LinearCost(), 10**7, d, 2)]
    c = Cluster(pools, wl, router=d.router)
    c.run()
    assert c.records.instance.tolist() == decode_instances


def test_least_loaded_router_sends_each_request_to_the_instance_with_least_work_first_on_a_tie():
    # three requests at t=0 onto 2 idle instances, with prompt+output work 1,200, 100 and 150 tokens: the first
    # goes to instance 0 (a tie: the first), the second to 1 (0 < 1,200), the third to 1 (100 < 1,200). The first
    # decodes 1,000 steps of >= 10 ms, so at t=5 instance 0 still holds its 1,200 tokens and instance 1 none.
    wl = Workload.create([0.0, 0.0, 0.0, 5.0], [200, 50, 100, 100], [1000, 50, 50, 10])
    c = simulate(wl, instances=2, router="least_loaded")
    r = c.records
    assert r.completion_s[0] > 10.0 and max(r.completion_s[1], r.completion_s[2]) < 5.0
    assert r.instance.tolist() == [0, 1, 1, 1]
    assert [i.outstanding_tokens for i in c.instances] == [0, 0]


def test_front_ends_route_on_their_own_turns():
    """Ten front ends over four instances (Dynamo frontends behind nginx): each request reaches the one
    `front_end_of` names, and each front end sends its k-th request to the k-th instance of its own order (a
    permutation, fixed per front end). One front end alternates; ten send requests in a row to one instance."""
    import itertools
    from collections import Counter

    from gpusim.sim.request import Request
    from gpusim.sim.router import RoundRobin, front_end_of

    instances = list(range(4))  # the router only indexes its instances
    ten = RoundRobin(instances, front_ends=10)
    assert all(sorted(order) == instances for order in ten.orders) and len({tuple(o) for o in ten.orders}) > 1
    picks, per_front = [], {f: [] for f in range(10)}
    for i in range(400):
        pick = ten.pick(Request(i, 10, 10))
        picks.append(pick)
        per_front[front_end_of(i, 10)].append(pick)
    for f, got in per_front.items():
        assert got == [ten.orders[f][k % 4] for k in range(len(got))]
    assert any(a == b for a, b in itertools.pairwise(picks))
    reached = Counter(front_end_of(i, 10) for i in range(20_000))
    assert len(reached) == 10 and max(reached.values()) < 1.1 * min(reached.values())
    one = RoundRobin(instances)
    assert [one.pick(Request(i, 10, 10)) for i in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
