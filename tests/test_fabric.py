"""The flow model: a lone transfer costs latency + bytes/bandwidth; concurrent flows share links fairly."""

from __future__ import annotations

import pytest
import simpy

from gpusim.sim.fabric import Fabric, Link

GB = 1e9


def run_transfers(specs):
    """specs: (start time, links, bytes, latency) → finish times."""
    env = simpy.Environment()
    fabric = Fabric(env)
    finish = {}

    def one(i, start, links, nbytes, latency):
        yield env.timeout(start)
        yield fabric.transfer(links, nbytes, latency)
        finish[i] = env.now

    for i, spec in enumerate(specs):
        env.process(one(i, *spec))
    env.run()
    return [finish[i] for i in range(len(specs))]


def test_lone_transfer_is_latency_plus_bytes_over_bandwidth():
    link = Link("nic", 50 * GB)
    (t,) = run_transfers([(0.0, (link,), 10 * GB, 5e-6)])
    assert t == pytest.approx(5e-6 + 10 / 50)


def test_two_flows_on_one_link_each_take_twice_as_long():
    link = Link("nic", 50 * GB)
    a, b = run_transfers([(0.0, (link,), 10 * GB, 0.0), (0.0, (link,), 10 * GB, 0.0)])
    assert a == pytest.approx(0.4) and b == pytest.approx(0.4)


def test_late_flow_shares_only_while_both_run():
    link = Link("nic", 10 * GB)
    # A: 10 GB from t=0. B: 5 GB from t=0.5. Alone A has 5 GB left at 0.5; then both at 5 GB/s:
    # B needs 1 s (done 1.5), A sends 5 GB in that second, done at 1.5 too.
    a, b = run_transfers([(0.0, (link,), 10 * GB, 0.0), (0.5, (link,), 5 * GB, 0.0)])
    assert b == pytest.approx(1.5) and a == pytest.approx(1.5)


def test_max_min_fairness_gives_unused_share_to_the_other_flow():
    slow, fast = Link("slow", 10 * GB), Link("fast", 100 * GB)
    # Flow 1 crosses slow+fast (limited to 10 GB/s); flow 2 only fast, gets the remaining 90 GB/s.
    one, two = run_transfers([(0.0, (slow, fast), 10 * GB, 0.0), (0.0, (fast,), 90 * GB, 0.0)])
    assert one == pytest.approx(1.0) and two == pytest.approx(1.0)


def test_disjoint_links_do_not_interfere():
    a, b = run_transfers([(0.0, (Link("a", 10 * GB),), 10 * GB, 0.0), (0.0, (Link("b", 10 * GB),), 10 * GB, 0.0)])
    assert a == pytest.approx(1.0) and b == pytest.approx(1.0)
