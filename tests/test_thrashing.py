"""A batch cap the KV cache cannot hold once contexts grow: the length-biased context in flight, the thrash such a
cap causes in the engine, and the search's KV-sized caps (`gpusim.perf.capacity.Lengths`, `gpusim.search.kv_sized`)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.build import prepare
from gpusim.deploy import roles
from gpusim.perf.capacity import Lengths
from gpusim.perf.memory import plan_memory
from gpusim.search import KV_HEADROOM, candidate_deployments, kv_sized, shortlist, trial


def test_the_context_in_flight_is_length_biased() -> None:
    lengths = Lengths.of(np.array([100, 100]), np.array([10, 30]))
    # by hand: a request stays in the batch for its output's steps, holding isl + osl / 2 on average over them;
    # weighted by those steps, (10 * (100 + 5) + 30 * (100 + 15)) / 40 = 112.5 (the dataset's mean: 100 + 10 = 110)
    assert lengths.context == pytest.approx(112.5)
    assert Lengths.fixed(100, 20).context == 110
    assert lengths.kv_batch(1125) == 10 and lengths.kv_batch(1124) == 9


DSR1 = prepare("h200-hgx", "deepseek-r1", scenario="offline")
ONE = DSR1.deployment.model_copy(update={"instances": 1, "adp_balance": None})


def _kv_batch(dep) -> int:
    (_, role), = roles(dep)
    return DSR1.lengths().kv_batch(plan_memory(DSR1.hardware, DSR1.model, role).kv_capacity_tokens)


def test_a_cap_above_the_kv_batch_thrashes_in_the_engine_and_the_searched_cap_does_not() -> None:
    cap = 2 * _kv_batch(ONE)
    over = ONE.model_copy(update={"max_batch_size": cap, "name": f"tp8-b{cap}-t16384"})
    kv = _kv_batch(over)  # the KV cache left beside the activations of this cap's batch
    sized = kv_sized(DSR1.hardware, DSR1.model, over, DSR1.lengths())
    assert KV_HEADROOM * kv - sized.attention_ranks < sized.max_batch_size <= KV_HEADROOM * kv
    assert DSR1.with_deployment(over).thrashes() and not DSR1.with_deployment(sized).thrashes()
    runs = {d.name: trial(DSR1.with_deployment(d), "offline", duration_s=2400).result.summary for d in (over, sized)}
    assert all(s["steady_turned_over"] for s in runs.values())
    assert sized.name == f"tp8-b{sized.max_batch_size}-t16384"
    thrash, kept = runs[over.name], runs[sized.name]
    assert thrash["preemptions_per_request"] > 1  # every request recomputed about once or more
    assert kept["preemptions_per_request"] < thrash["preemptions_per_request"] / 4
    assert kept["steady_output_tokens_per_s_per_gpu"] > thrash["steady_output_tokens_per_s_per_gpu"]


def test_no_candidate_thrashes_and_a_thrashing_start_does_not_compete() -> None:
    for dep in candidate_deployments(DSR1.hardware, DSR1.model, DSR1.bench, "offline"):
        assert not DSR1.with_deployment(dep).thrashes(), dep.name
    start = DSR1.with_deployment(DSR1.deployment.model_copy(update={"max_batch_size": 2 * _kv_batch(ONE) * 8}))
    assert start.thrashes()
    short, _ = shortlist(start, "offline")
    assert all(r.setup.deployment.max_batch_size < start.deployment.max_batch_size for r in short)
