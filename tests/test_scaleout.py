"""Several systems joined over InfiniBand: independent replicas scale perfectly; spanning groups pay the NICs."""

from __future__ import annotations

import pytest

import gpusim
from gpusim.errors import InputError
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import load_software


def throughput(systems: int) -> float:
    # identical requests, a closed loop sized per system: the replicas never interact and there is no tail
    r = gpusim.run("b200-hgx", "llama2-70b", "concurrency", systems=systems, concurrency=32 * systems,
                   isl=256, osl=64, samples=256 * systems)
    assert r.summary["num_gpus"] == 8 * systems
    return r.summary["output_tokens_per_s"]


def test_independent_replicas_scale_at_efficiency_one():
    one, three = throughput(1), throughput(3)
    assert three / (3 * one) == pytest.approx(1.0, abs=2e-3)  # only the 5 µs cross-system dispatch differs


def test_pipeline_stages_on_two_systems_send_activations_over_the_nics():
    hw = load_hardware("h100-hgx", systems=2)
    model = load_model("llama3.1-405b")
    dep = Deployment(tp=8, pp=2)
    t = 512
    comm = StepCostModel(hw, model, dep).breakdown(BatchShape(prefill_tokens=t, prefill_attn_pairs=t * t / 2,
                                                              prefill_seqs=1)).by_op["pp_send_recv"]
    so = hw.scaleout
    alpha = (so.latency_us.value + so.switch_latency_us.value) * 1e-6
    fixed = load_software("trtllm").for_architecture(hw.gpu.architecture).value("collective_kernel_us") * 1e-6
    by_hand = t * model.hidden_size * 2 / hw.scaleout_bandwidth + alpha + fixed  # the fixed time per call too
    assert comm == pytest.approx(by_hand)


def test_tp_wider_than_the_nvlink_domain_is_refused_but_pp_may_span_systems():
    with pytest.raises(InputError, match="NVLink domain"):
        gpusim.run("h100-hgx", "llama2-70b", "offline", systems=2, samples=10, deployment=Deployment(tp=16))
    r = gpusim.run("h100-hgx", "llama2-70b", "offline", systems=2, samples=20, deployment=Deployment(tp=8, pp=2))
    assert r.summary["instances"] == 1 and r.summary["num_gpus"] == 16


def test_attention_tp_must_divide_the_heads_but_attention_dp_need_not():
    # DeepSeek-R1 has 128 attention heads: TP 48 cannot split them; 48 attention-DP ranks with wide EP can run
    with pytest.raises(InputError, match="does not divide deepseek-r1's 128 attention heads; valid: 1, 2, 4"):
        gpusim.run("gb300-nvl72", "deepseek-r1", "offline", samples=10, deployment=Deployment(tp=48, ep=48))
    r = gpusim.run("gb300-nvl72", "deepseek-r1", "offline", samples=20,
                   deployment=Deployment(tp=48, ep=48, attention_dp=True, weights="fp4", activations="fp4"))
    assert r.summary["num_gpus"] == 48


def test_pools_listed_one_after_the_other_still_fill_four_racks():
    """Four racks of a disaggregated deployment: four 4-GPU prefill instances, then four 68-GPU decode instances.
    In order the prefill instances take rack 0 and the decode instances find no rack with room for the fourth;
    largest first, each rack holds one decode and one prefill instance."""
    from gpusim.errors import InputError
    from gpusim.sim.topology import Topology

    racks = Topology(systems=4, gpus_per_system=72, domain_gpus=72)
    sizes = [4] * 4 + [68] * 4
    with pytest.raises(InputError):
        racks._in_order(sizes)
    placed = racks.place(sizes)
    expected = [(s, 4) for s in range(4)] + [(s, 68) for s in range(4)]
    assert sorted((p.system, p.gpus) for p in placed) == sorted(expected)
    taken = [set(range(p.first_gpu, p.first_gpu + p.gpus)) for p in placed]
    assert sum(map(len, taken)) == len(set().union(*taken)) == 288  # no GPU twice
    assert racks.place([4, 68]) == racks._in_order([4, 68])  # what fits in order stays where it was
    with pytest.raises(InputError, match="more than the 288 GPUs"):
        racks.place([68] * 5)
    wide = Topology(systems=4, gpus_per_system=8, domain_gpus=8)._largest_first([16, 8, 4, 4])
    assert wide[0].first_gpu == 0 and wide[0].gpus == 16  # two whole systems in a row


def test_a_disaggregated_deployment_runs_on_four_racks():
    from gpusim.build import prepare
    from gpusim.search import candidate_deployments, trial

    base = prepare("gb300-nvl72", "deepseek-r1", 4, scenario="server")
    dep = next(d for d in candidate_deployments(base.hardware, base.model, base.bench, "server")
               if d.mode == "disaggregated")
    s = trial(base.with_deployment(dep, dep.name), "server", 100.0, 20.0).result.summary
    assert s["num_gpus"] == 288 and s["completed_requests"] > 0 and s["kv_transfer_p50_s"] > 0


def test_a_kv_cache_moved_to_the_other_rack_crosses_infiniband_by_hand():
    """Prefill on rack 0, decode on rack 1 (a DEP8 prefill instance, then a DEP72 decode instance that only the
    second rack has room for): one request's KV cache, prompt plus the first token at FP8, leaves through the
    prefill instance's 8 NICs and lands on the decode instance's 72, so the 8 set the rate, after the fat tree's
    latency and the software's handoff time."""
    from gpusim.build import prepare
    from gpusim.loadgen.workload import Workload
    from gpusim.specs.deployment import DisaggregatedDeployment, Parallelism

    dep = DisaggregatedDeployment(mode="disaggregated", weights="fp4", activations="fp4",
                                  prefill=Parallelism(tp=8, ep=8, attention_dp=True, instances=1),
                                  decode=Parallelism(tp=72, ep=72, attention_dp=True, instances=1))
    setup = prepare("gb300-nvl72", "deepseek-r1", 2, dep)
    cluster = setup.cluster(Workload.create([0.0], [1000], [2]))
    cluster.run()
    assert [p.system for p in cluster.placement] == [0, 1]
    hw, so = setup.hardware, setup.hardware.scaleout
    latency = (so.latency_us.value + 3 * so.switch_latency_us.value) * 1e-6
    by_hand = latency + setup.software_ms("handoff_overhead_ms") + setup.model.kv_bytes(1001, 1) / (
        8 * hw.scaleout_bandwidth)
    assert cluster.records.kv_transfer_s[0] == pytest.approx(by_hand, rel=1e-6)  # NVLink's rate would be 9x


def test_the_scaling_experiment_shares_disaggregated_pools_across_racks():
    """experiments/scaling-gb300-deepseek-r1.yaml runs, beside the replicas, a layout whose pools span the racks:
    on every size each rack holds one DEP56 decode instance and two DEP8 prefill instances, and the router may send
    a KV cache to any decode instance, so a prefill on one rack feeds a decode on another over InfiniBand."""
    from pathlib import Path

    from gpusim.build import prepare
    from gpusim.loadgen.workload import Workload
    from gpusim.sweep import apply_deployment, load_sweep

    path = Path(__file__).resolve().parents[1] / "experiments" / "scaling-gb300-deepseek-r1.yaml"
    points = [p for p in load_sweep(path).points() if p.params.get("deployment") and p.spec.scenario == "offline"]
    assert sorted(p.spec.systems for p in points) == [1, 2, 3, 4]
    for p in points:
        dep = apply_deployment(p.spec, p.deployment, p.source)
        assert dep.mode == "disaggregated" and dep.router == "least_loaded"
        cluster = prepare("gb300-nvl72", "deepseek-r1", p.spec.systems, dep).cluster(
            Workload.create([0.0], [100], [2]))
        per_rack = [sorted(pl.gpus for pl in cluster.placement if pl.system == s) for s in range(p.spec.systems)]
        assert per_rack == [[8, 8, 56]] * p.spec.systems
