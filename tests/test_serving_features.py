"""Serving features in the engine: disaggregation, MTP, attention DP, prefix caching, KV-aware routing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpusim.loadgen.workload import Workload
from gpusim.perf.step import BatchShape
from gpusim.sim.cluster import Cluster, Pool
from gpusim.sim.kvcache import KVCache
from gpusim.sim.prefixcache import PrefixCache
from gpusim.sim.ranks import AttentionRanks
from gpusim.sim.topology import Topology
from gpusim.specs.deployment import MTP, Deployment, DisaggregatedDeployment, Parallelism

BASE, PER_TOKEN, PER_CTX = 0.010, 1e-5, 1e-7


class LinearCost:
    """step = BASE + PER_TOKEN·tokens + PER_CTX·context; records the prefill tokens it was asked for."""

    def __init__(self) -> None:
        self.prefill_tokens = 0

    def step_time(self, b: BatchShape) -> float:
        self.prefill_tokens += b.prefill_tokens
        return BASE + PER_TOKEN * (b.prefill_tokens + b.decode_seqs) + PER_CTX * b.decode_context


def run(pools, workload, **kw) -> Cluster:
    c = Cluster(pools, workload, **kw)
    c.run()
    return c


def agg(count=1, kv=10**7, **dep) -> Pool:
    return Pool("aggregated", LinearCost(), kv, Deployment(**dep), count)


# ---- MTP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("acceptance", "tokens_per_step"), [([1.0, 1.0, 1.0], 4), ([0.0, 0.0, 0.0], 1)])
def test_mtp_tokens_per_step(acceptance, tokens_per_step):
    prompt, out = 100, 41
    mtp = MTP(depth=3, acceptance=acceptance)
    assert mtp.expected_tokens_per_step == tokens_per_step
    c = run([agg(mtp=mtp)], Workload.create([0.0], [prompt], [out]))
    steps = math.ceil((out - 1) / tokens_per_step)
    decode = sum(BASE + PER_TOKEN + PER_CTX * (prompt + 1 + i * tokens_per_step) for i in range(steps))
    r = c.records
    assert r.completion_s[0] - r.first_token_s[0] == pytest.approx(decode, rel=1e-12)


def test_mtp_expected_length_is_the_product_series():
    assert MTP(depth=2, acceptance=[0.8, 0.5]).expected_tokens_per_step == pytest.approx(1 + 0.8 + 0.4)
    with pytest.raises(ValueError):
        MTP(depth=2, acceptance=[0.8])


# ---- disaggregation ---------------------------------------------------------------------------------
def disagg_pools(prefill=2, decode=3) -> list[Pool]:
    dep = DisaggregatedDeployment(mode="disaggregated", prefill=Parallelism(instances=prefill),
                                  decode=Parallelism(instances=decode))
    return [Pool("prefill", LinearCost(), 10**7, dep.role("prefill"), prefill),
            Pool("decode", LinearCost(), 10**7, dep.role("decode"), decode)]


def test_every_request_passes_through_one_prefill_and_one_decode_instance():
    rng = np.random.default_rng(5)
    n = 300
    wl = Workload.create(np.cumsum(rng.exponential(0.05, n)), rng.integers(50, 500, n), rng.integers(2, 200, n))
    c = run(disagg_pools(), wl, kv_bytes=lambda tokens: tokens * 1e5)
    df = c.records.frame()
    assert len(df) == n and (df["handoffs"] == 1).all()
    assert set(df["prefill_instance"]) <= {0, 1} and set(df["instance"]) <= {2, 3, 4}
    assert (df["kv_transfer_s"] > 0).all()
    assert c.records.generated_tokens == int(wl.output_tokens.sum())


@pytest.mark.parametrize("handoff", [0.0, 0.050])
def test_decode_starts_when_the_kv_transfer_has_landed(handoff):
    prompt, out, per_token = 1000, 3, 70272.0
    topo = Topology(nvlink_bw=100e9, nvlink_latency=2e-6)
    c = run(disagg_pools(1, 1), Workload.create([0.0], [prompt], [out]), topology=topo,
            kv_bytes=lambda tokens: tokens * per_token, handoff_overhead_s=handoff)
    r = c.records
    prefill = BASE + PER_TOKEN * prompt
    transfer = 2e-6 + handoff + (prompt + 1) * per_token / 100e9  # the first token is generated before the move
    assert r.kv_transfer_s[0] == pytest.approx(transfer)
    # the client's first token comes from the decode worker, once it has the KV cache
    assert r.first_token_s[0] == pytest.approx(prefill + transfer)
    decode = sum(BASE + PER_TOKEN + PER_CTX * (prompt + 1 + i) for i in range(out - 1))
    assert r.completion_s[0] == pytest.approx(prefill + transfer + decode)


def test_concurrent_transfers_from_one_prefill_instance_share_its_link():
    topo = Topology(nvlink_bw=10e9, nvlink_latency=0.0)
    one = run(disagg_pools(1, 2), Workload.create([0.0], [4000], [2]), topology=topo,
              kv_bytes=lambda t: t * 1e5).records.kv_transfer_s[0]
    two = run(disagg_pools(1, 2), Workload.create([0.0, 0.0], [4000, 4000], [2, 2]), topology=topo,
              kv_bytes=lambda t: t * 1e5).records.kv_transfer_s
    assert two.min() == pytest.approx(2 * one, rel=1e-6)


def test_cross_system_transfers_use_the_scale_out_nics():
    topo = Topology(systems=2, gpus_per_system=1, domain_gpus=1, nic_bw=50e9, scaleout_latency=5e-6)
    c = run(disagg_pools(1, 1), Workload.create([0.0], [1000], [2]), topology=topo, kv_bytes=lambda t: t * 1e6)
    assert c.placement[0].system == 0 and c.placement[1].system == 1
    assert c.records.kv_transfer_s[0] == pytest.approx(5e-6 + 1001 * 1e6 / 50e9)


# ---- prefix cache and KV-aware routing ----------------------------------------------------------------
def test_prefix_hits_skip_exactly_the_cached_blocks():
    hashes = [(1, 2, 3, 4), (1, 2, 3, 9)]  # the second shares three 512-token blocks
    wl = Workload.create([0.0, 100.0], [2000, 2000], [2, 2], prefix_hashes=hashes)
    pool = agg(prefix_cache=True)
    run([pool], wl)
    assert pool.cost.prefill_tokens == 2000 + (2000 - 3 * 512)
    no_cache = agg()
    run([no_cache], wl)
    assert no_cache.cost.prefill_tokens == 4000


def test_kv_aware_routing_follows_the_cached_prefix():
    hashes = [(7, 8), (5, 6), (7, 8), (7, 8)]
    wl = Workload.create([0.0, 0.0, 50.0, 100.0], [1100] * 4, [2] * 4, prefix_hashes=hashes)
    c = run([agg(count=2, prefix_cache=True, router="kv_aware")], wl, router="kv_aware")
    inst = c.records.instance
    assert inst[0] != inst[1] and inst[2] == inst[0] and inst[3] == inst[0]
    assert c.stats().prefix_hit_rate == pytest.approx(2 * 1024 / 4400)


def test_prefix_cache_blocks_are_evicted_when_kv_is_needed():
    wl = Workload.create([0.0, 10.0, 20.0], [1024, 1024, 1024], [2, 2, 2],
                         prefix_hashes=[(1, 2), (3, 4), (1, 2)])
    pool = agg(kv=1600, prefix_cache=True, kv_block_tokens=1)
    c = run([pool], wl)
    assert c.records.completed == 3
    # (3, 4) needed one block's room: the tail of (1, 2) went, block 2, so the third request still finds block 1
    # (pinned before anything is evicted for it) and prefills its other 512 tokens; head first would leave none
    assert pool.cost.prefill_tokens == 2 * 1024 + 512



def test_a_finished_requests_blocks_go_idle_tail_first():
    kv = KVCache(4 * 512, 512)
    cache = PrefixCache(kv, 512)
    kv.tokens = 4 * 512  # the four blocks of one context: (1, 2) cached before, (3, 4) this request's own
    cache.adopt([1, 2])
    cache.acquire([1, 2])  # the request reuses them, then finishes: (3, 4) kept, (1, 2) unpinned
    cache.adopt([3, 4])
    cache.release([1, 2])
    cache.evict(512)  # room for one block: the context's last goes
    assert cache.match([1, 2, 3, 4]) == 3 and list(cache.idle) == [3, 2, 1]
    cache.evict(1024)  # room for two: block 3 goes too
    assert cache.match([1, 2, 3, 4]) == 2 and list(cache.idle) == [2, 1]


# ---- attention data parallelism ----------------------------------------------------------------
def test_attention_ranks_balance_and_report_the_busiest():
    ranks = AttentionRanks(ranks=2, rate=1.0)
    a = ranks.join(1000, step=0)
    b = ranks.join(10, step=0)
    assert a != b
    assert ranks.busiest(step=5) == (1005, 1)
    ranks.leave(a, 1005, step=5)
    assert ranks.busiest(step=5) == (15, 1)  # asked again at the same step: what changed since counts
    assert ranks.join(2000, step=5) == a and ranks.busiest(step=5) == (2000, 1)


def test_attention_dp_instance_passes_the_busiest_rank_to_the_cost_model():
    seen = []

    class Spy(LinearCost):
        def step_time(self, b):
            seen.append(b)
            return super().step_time(b)

    pool = Pool("aggregated", Spy(), 10**7, Deployment(tp=2, attention_dp=True), 1)
    run([pool], Workload.create([0.0, 0.0], [3000, 100], [5, 5]))
    decode = [b for b in seen if b.decode_seqs == 2]
    assert decode and all(b.attn_rank_seqs == 1 and b.attn_rank_context >= 3000 for b in decode)
