"""Property-based tests (Hypothesis) of the engine and its metrics on generated workloads and deployments.

The engine runs on a linear fake cost model (every property holds whatever the step times are), small
enough that a dozen examples per property take seconds; `HYPOTHESIS_PROFILE=slow` runs hundreds
(tests/conftest.py). Invariants inside the engine (KV in use within capacity, a preempted request's state
reset) are checked after every step by wrapping `Instance` methods.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpusim.errors import InputError  # noqa: E402
from gpusim.loadgen.metrics import add_latency_columns, summarize  # noqa: E402
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS, Workload  # noqa: E402
from gpusim.perf.step import BatchShape  # noqa: E402
from gpusim.sim.cluster import Cluster, Pool  # noqa: E402
from gpusim.sim.instance import Instance  # noqa: E402
from gpusim.specs.deployment import (  # noqa: E402
    MTP,
    AdpBalance,
    BatchWait,
    Deployment,
    DisaggregatedDeployment,
    Parallelism,
)

CONTEXT_LIMIT = 2048
"""Longest prompt generated: the model's context limit in these small systems."""


class LinearCost:
    """step = 2 ms + 10 µs per prefill token or decode sequence + 0.1 µs per context token read."""

    def step_time(self, b: BatchShape) -> float:
        return 2e-3 + 1e-5 * (b.prefill_tokens + b.decode_seqs) + 1e-7 * (b.decode_context + b.attn_rank_context)


# ---- strategies -----------------------------------------------------------------------------------------------
@st.composite
def workloads(draw: st.DrawFn, max_requests: int = 24, prefix: bool = False) -> Workload:
    """Arrivals all at once, Poisson, in bursts or closed loop; prompts 1..CONTEXT_LIMIT (the limit itself
    often), outputs from 1 token; with `prefix`, prompts that share 512-token blocks."""
    n = draw(st.integers(1, max_requests))
    isl = draw(st.lists(st.one_of(st.integers(1, CONTEXT_LIMIT), st.just(CONTEXT_LIMIT), st.just(1)),
                        min_size=n, max_size=n))
    osl = draw(st.lists(st.one_of(st.just(1), st.integers(1, 64)), min_size=n, max_size=n))
    pattern = draw(st.sampled_from(["offline", "poisson", "bursts", "closed"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrival = {"offline": np.zeros(n), "closed": np.zeros(n),
               "poisson": np.cumsum(rng.exponential(1 / draw(st.floats(1.0, 500.0)), n)),
               "bursts": np.repeat(np.arange(n) // 4 * draw(st.floats(0.001, 0.5)), 1)[:n]}[pattern]
    hashes = None
    if prefix:
        roots = draw(st.integers(1, 3))
        hashes = [tuple(1000 * (i % roots) + b for b in range(k // PREFIX_BLOCK_TOKENS)) for i, k in enumerate(isl)]
    return Workload.create(arrival, isl, osl, prefix_hashes=hashes,
                           concurrency=draw(st.integers(1, 6)) if pattern == "closed" else None)


@st.composite
def deployments(draw: st.DrawFn) -> Deployment:
    """Batch and token limits, chunked or not, KV blocks, SGLang's polling, MTP, attention DP with its
    balance, batch wait, prefix cache, routers, aggregated or disaggregated."""
    tp = draw(st.sampled_from([1, 2, 4]))
    adp = tp > 1 and draw(st.booleans())
    mtp = draw(st.one_of(st.none(), st.lists(st.floats(0, 1), min_size=1, max_size=3).map(
        lambda a: MTP(depth=len(a), acceptance=tuple(a)))))
    pool = Parallelism(tp=tp, attention_dp=adp, max_batch_size=draw(st.integers(1, 32)),
                       max_num_tokens=draw(st.sampled_from([64, 512, 2048, 8192])))
    disagg = draw(st.booleans())
    layout = {"mode": "disaggregated", "prefill": pool, "decode": pool} if disagg else pool.model_dump()
    return (DisaggregatedDeployment if disagg else Deployment)(
        **layout, chunked_prefill=draw(st.booleans()), kv_block_tokens=draw(st.sampled_from([1, 16, 32])),
        scheduler_recv_interval=draw(st.sampled_from([1, 1, 3])), mtp=mtp,
        adp_balance=AdpBalance() if adp and draw(st.booleans()) else None,
        batch_wait=BatchWait(timeout_iters=draw(st.integers(1, 5)), max_tokens_ratio=draw(st.floats(0, 1)))
        if draw(st.booleans()) else None,
        prefix_cache=draw(st.booleans()), router=draw(st.sampled_from(["round_robin", "least_loaded", "kv_aware"])))


def fits(wl: Workload, dep: Deployment) -> int:
    """KV tokens per instance that any request of `wl` fits in alone (prompt, its whole output, blocks)."""
    rate = dep.mtp.expected_tokens_per_step if dep.mtp else 1.0
    return int((wl.input_tokens + wl.output_tokens).max()) + 2 * dep.kv_block_tokens + math.ceil(2 * rate) + 2


# ---- the engine, audited ------------------------------------------------------------------------------------------
@dataclass
class Audit:
    """What the engine did, as the wrapped `Instance` methods saw it."""

    steps: int = 0
    preempted: int = 0
    peak_over_capacity: float = -math.inf


@contextmanager
def audited():
    """Check after every loop iteration that no instance holds more KV than its capacity, that counts are
    whole, and after every preemption that the preempted requests start over."""
    audit = Audit()
    complete_due, make_room = Instance._complete_due, Instance._make_room

    def check(inst: Instance) -> None:
        kv = inst.kv
        audit.steps += 1
        audit.peak_over_capacity = max(audit.peak_over_capacity, kv.used - kv.capacity)
        assert kv.used <= kv.capacity + 1e-6, f"KV in use {kv.used} > capacity {kv.capacity}"
        assert kv.tokens >= -1e-6 and kv.sequences >= 0
        assert kv.sequences == len(inst.decoding) + len(inst.prefilling), "a sequence counted twice or lost"
        assert inst.outstanding_tokens >= 0

    def step_checked(inst: Instance) -> None:
        complete_due(inst)
        check(inst)

    def room_checked(inst: Instance) -> None:
        before = set(inst.decoding)
        make_room(inst)
        for req in inst.waiting:
            if req.id in before:  # preempted now: its KV dropped, prefill from scratch with what it emitted
                audit.preempted += 1
                assert req.id not in inst.decoding and req not in inst.prefilling
                assert req.computed == 0 and req.pinned == 0 and req.shared == 0
                assert 1 <= req.generated < req.output
        check(inst)

    Instance._complete_due, Instance._make_room = step_checked, room_checked
    try:
        yield audit
    finally:
        Instance._complete_due, Instance._make_room = complete_due, make_room


def simulate(wl: Workload, dep: Deployment, kv_tokens: int, instances: int = 2) -> Cluster:
    cost = LinearCost()
    if dep.mode == "disaggregated":
        pools = [Pool("prefill", cost, kv_tokens, dep.role("prefill"), instances),
                 Pool("decode", cost, kv_tokens, dep.role("decode"), instances)]
    else:
        pools = [Pool("aggregated", cost, kv_tokens, dep, instances)]
    cluster = Cluster(pools, wl, router=dep.router, kv_bytes=lambda t: 1e3 * t, handoff_overhead_s=1e-4)
    cluster.run()
    return cluster


def check_records(cluster: Cluster, wl: Workload) -> None:
    """Every issued request completed once, tokens conserved, TTFT <= latency, timestamps in order."""
    rec = cluster.records
    df = rec.frame()
    assert rec.completed == len(df) == len(wl) == cluster.issued
    assert df["request_id"].is_unique
    assert rec.generated_tokens == int(wl.output_tokens.sum()) == int(df["output_tokens"].sum())
    if not wl.closed_loop:
        np.testing.assert_array_equal(df["scheduled_s"].to_numpy(), wl.arrival_s)
    np.testing.assert_array_equal(df["input_tokens"], wl.input_tokens)
    lat = add_latency_columns(df)
    assert (lat["ttft_s"] >= 0).all() and (lat["ttft_s"] <= lat["latency_s"] + 1e-12).all()
    assert (df["scheduled_s"] <= df["first_token_s"]).all() and (df["first_token_s"] <= df["completion_s"]).all()
    one = df["output_tokens"] == 1
    assert (df.loc[one, "first_token_s"] == df.loc[one, "completion_s"]).all()
    assert lat["tpot_s"][~one].notna().all() and lat["tpot_s"][one].isna().all()
    for inst in cluster.instances:  # drained: nothing queued or running, KV back to the idle prefix blocks
        assert not (inst.waiting or inst.arrived or inst.prefilling or inst.decoding)
        assert inst.outstanding_tokens == 0 and inst.kv.sequences == 0
        idle = len(inst.prefix.idle) * PREFIX_BLOCK_TOKENS if inst.prefix is not None else 0
        assert inst.kv.tokens == pytest.approx(idle, abs=1e-6)
        if inst.prefix is not None:
            assert all(r == 0 for r in inst.prefix.refs.values())
    if cluster.decode_router is not None:
        handed = df["output_tokens"] > 1
        assert (df.loc[handed, "handoffs"] == 1).all() and (df.loc[~handed, "handoffs"] == 0).all()


# ---- properties -------------------------------------------------------------------------------------------------
@given(data=st.data(), dep=deployments())
def test_every_request_completes_once_and_kv_stays_within_capacity(data: st.DataObject, dep: Deployment) -> None:
    wl = data.draw(workloads(prefix=dep.prefix_cache))
    kv = data.draw(st.integers(fits(wl, dep), 4 * fits(wl, dep)), label="kv_tokens")
    with audited() as audit:
        cluster = simulate(wl, dep, kv, instances=data.draw(st.integers(1, 3), label="instances"))
    check_records(cluster, wl)
    assert audit.steps > 0
    assert int(cluster.records.preemptions.sum()) == audit.preempted


@given(data=st.data())
def test_tight_kv_preempts_and_every_preempted_request_still_completes(data: st.DataObject) -> None:
    dep = Deployment(max_batch_size=data.draw(st.integers(4, 32)), kv_block_tokens=data.draw(st.sampled_from([1, 16])),
                     chunked_prefill=data.draw(st.booleans()))
    n = data.draw(st.integers(4, 16))
    wl = Workload.create(np.zeros(n), data.draw(st.lists(st.integers(16, 256), min_size=n, max_size=n)),
                         data.draw(st.lists(st.integers(32, 256), min_size=n, max_size=n)))
    with audited() as audit:
        cluster = simulate(wl, dep, fits(wl, dep), instances=1)
    check_records(cluster, wl)
    assert int(cluster.records.preemptions.sum()) == audit.preempted


@given(data=st.data())
def test_a_prompt_that_cannot_fit_is_rejected_with_its_reason(data: st.DataObject) -> None:
    dep = Deployment(kv_block_tokens=data.draw(st.sampled_from([1, 16, 32])))
    small = Workload.create([0.0], [1], [2])
    big = data.draw(st.integers(fits(small, dep) + 1, CONTEXT_LIMIT))
    kv = data.draw(st.integers(fits(small, dep), big - 1))
    wl = Workload.create([0.0, 0.0], [1, big], [2, 2])
    with pytest.raises(InputError, match=rf"a request of {big} tokens cannot fit in the KV cache .*\({kv} tokens\)"):
        simulate(wl, dep, kv, instances=1)


@given(data=st.data(), dep=deployments())
def test_the_same_workload_gives_the_same_records(data: st.DataObject, dep: Deployment) -> None:
    wl = data.draw(workloads(prefix=dep.prefix_cache))
    kv = 2 * fits(wl, dep)
    first, again = simulate(wl, dep, kv).records.frame(), simulate(wl, dep, kv).records.frame()
    assert first.equals(again)


@given(data=st.data())
def test_fast_forward_equals_stepping_on_generated_workloads(data: st.DataObject) -> None:
    dep = data.draw(deployments())
    wl = data.draw(workloads(max_requests=40, prefix=dep.prefix_cache))
    kv = data.draw(st.integers(fits(wl, dep), 3 * fits(wl, dep) // 2))  # tight: preemptions, blocked queues
    fast = simulate(wl, dep, kv).records
    try:
        Instance.fast_forward = False
        slow = simulate(wl, dep, kv).records
    finally:
        Instance.fast_forward = True
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.completion_s, slow.completion_s, rtol=1e-9, atol=1e-12)


@given(data=st.data(), dep=deployments())
def test_a_prefix_of_the_requests_runs_as_the_full_replay_until_the_next_arrival(data: st.DataObject,
                                                                                 dep: Deployment) -> None:
    """`--samples N` of a trace: its first N requests, and everything before request N arrives as in the
    full replay (the engine is causal)."""
    wl = data.draw(workloads(prefix=dep.prefix_cache))
    assume(not wl.closed_loop and len(wl) > 1)
    n = data.draw(st.integers(1, len(wl) - 1))
    cut = Workload.create(wl.arrival_s[:n], wl.input_tokens[:n], wl.output_tokens[:n],
                          prefix_hashes=wl.prefix_hashes[:n] if wl.prefix_hashes else None)
    kv = 2 * fits(wl, dep)
    full, part = simulate(wl, dep, kv).records, simulate(cut, dep, kv).records
    assert part.completed == n
    before = full.completion_s[:n] < wl.arrival_s[n]
    np.testing.assert_allclose(part.completion_s[:n][before], full.completion_s[:n][before], rtol=1e-9)
    early = full.first_token_s[:n] < wl.arrival_s[n]
    np.testing.assert_allclose(part.first_token_s[:n][early], full.first_token_s[:n][early], rtol=1e-9)


@given(qps=st.floats(5.0, 60.0), isl=st.integers(16, 1024), osl=st.integers(2, 128), seed=st.integers(0, 1000))
def test_littles_law_on_stationary_server_runs(qps: float, isl: int, osl: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 1500
    wl = Workload.create(np.cumsum(rng.exponential(1 / qps, n)), rng.integers(1, 2 * isl, n),
                         rng.integers(1, 2 * osl, n))
    df = simulate(wl, Deployment(), 10**6, instances=2).records.frame()
    latency = (df["completion_s"] - df["scheduled_s"]).to_numpy()
    t_end = float(df["scheduled_s"].max())
    assume(latency.max() < 0.2 * t_end)  # stationary: no request outlives a fifth of the run
    t = np.linspace(0.2 * t_end, 0.8 * t_end, 5001)
    in_system = (np.searchsorted(np.sort(df["scheduled_s"]), t, side="right")
                 - np.searchsorted(np.sort(df["completion_s"]), t, side="right"))
    inside = (df["scheduled_s"] > 0.2 * t_end) & (df["scheduled_s"] < 0.8 * t_end)
    lam = inside.sum() / (0.6 * t_end)
    assert in_system.mean() == pytest.approx(lam * latency[inside.to_numpy()].mean(), rel=0.15)


@given(data=st.data(), dep=deployments())
def test_summary_percentiles_are_ordered_and_count_every_token(data: st.DataObject, dep: Deployment) -> None:
    wl = data.draw(workloads(prefix=dep.prefix_cache))
    df = simulate(wl, dep, 2 * fits(wl, dep)).records.frame()
    s = summarize(df, "server", None, num_gpus=4)
    assert s["completed_requests"] == len(wl) and s["output_tokens"] == int(wl.output_tokens.sum())
    assert s["ttft_p50_s"] <= s["ttft_p90_s"] <= s["ttft_p99_s"] <= s["latency_p99_s"] + 1e-12
    assert s["latency_p50_s"] <= s["latency_p99_s"]
    assert s["ttft_p50_s"] <= s["latency_p50_s"] + 1e-12
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(s["output_tokens_per_s"] / 4)
    if wl.output_tokens.max() < 2:
        assert math.isnan(s["tpot_p50_s"])


# ---- the real cost model and the API ---------------------------------------------------------------------------
REAL = (("h100-hgx", "llama3.1-8b", "fp8"), ("gb200-nvl72", "deepseek-r1", "fp4"))


@st.composite
def real_setups(draw: st.DrawFn):
    """A dense and an MoE model on their systems, with TP/PP/EP, attention DP, MTP, disaggregated pools and
    prefix caching drawn; deployments the setup refuses are not examples."""
    from gpusim.build import prepare

    hw, bench, weights = draw(st.sampled_from(REAL))
    moe = bench == "deepseek-r1"
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    par = {"tp": tp, "pp": draw(st.sampled_from([1, 2])), "ep": tp if moe and draw(st.booleans()) else 1,
           "attention_dp": moe and tp > 1 and draw(st.booleans()), "max_batch_size": draw(st.sampled_from([8, 64])),
           "instances": draw(st.sampled_from([None, 1, 2]))}
    disagg = draw(st.booleans())
    mtp = MTP(depth=2, acceptance=(0.8, 0.6)) if moe and draw(st.booleans()) else None
    try:
        layout = ({"mode": "disaggregated", "prefill": Parallelism(**{**par, "instances": 1}),
                   "decode": Parallelism(**par)} if disagg else par)
        dep = (DisaggregatedDeployment if disagg else Deployment)(**layout, weights=weights, mtp=mtp,
                                                                  prefix_cache=draw(st.booleans()))
        return prepare(hw, bench, 1, dep)
    except (InputError, ValueError):
        assume(False)


@given(setup=real_setups(), data=st.data())
def test_real_cost_model_runs_keep_every_invariant(setup, data: st.DataObject) -> None:
    wl = data.draw(workloads(max_requests=16, prefix=setup.deployment.prefix_cache))
    with audited():
        cluster = setup.cluster(wl)
        cluster.run()
    check_records(cluster, wl)


def _server_records(seed: int, samples: int = 40):
    import gpusim

    return gpusim.run("h100-hgx", "llama3.1-8b", "server", qps=20.0, samples=samples, seed=seed).requests


@given(seed=st.integers(0, 2**31 - 1))
def test_the_same_seed_gives_the_same_records(seed: int) -> None:
    first, again = _server_records(seed), _server_records(seed)
    assert first.equals(again)
    assert not first.equals(_server_records(seed + 1))


def test_the_same_seed_gives_the_same_records_across_processes() -> None:
    import subprocess
    import sys

    seeds = (0, 12345)
    script = ("import sys; sys.path.insert(0, 'tests'); from test_properties import _server_records; "
              f"[print(_server_records(s).to_json(double_precision=15)) for s in {seeds}]")
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[1], capture_output=True,
                         text=True, check=True, env={**__import__("os").environ, "PYTHONHASHSEED": "77"})
    lines = out.stdout.splitlines()
    assert lines == [_server_records(s).to_json(double_precision=15) for s in seeds]


@given(data=st.data())
def test_samples_of_a_trace_are_its_first_requests(data: st.DataObject, tmp_path_factory) -> None:
    import gpusim

    n = data.draw(st.integers(2, 30))
    gaps = data.draw(st.lists(st.floats(0, 2.0), min_size=n, max_size=n))
    isl = data.draw(st.lists(st.integers(1, 8192), min_size=n, max_size=n))
    osl = data.draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
        f"{float(t)!r},{i},{o}\n" for t, i, o in zip(np.cumsum(gaps), isl, osl, strict=True)))
    k = data.draw(st.integers(1, n - 1))
    opts = {"trace": str(path), "model": "llama3.1-8b"}
    full = gpusim.run("h100-hgx", "llama3.1-8b", "trace", **opts).requests
    part = gpusim.run("h100-hgx", "llama3.1-8b", "trace", samples=k, **opts).requests
    assert len(full) == n and len(part) == k
    cols = ["scheduled_s", "input_tokens", "output_tokens"]
    assert part[cols].equals(full[cols].iloc[:k])
    assert (part["output_tokens"] >= 1).all()  # a zero output is clamped to one token
    before = (full["completion_s"] < full["scheduled_s"].iloc[k]).to_numpy()[:k]
    np.testing.assert_allclose(part["completion_s"][before], full["completion_s"].iloc[:k][before], rtol=1e-9)
