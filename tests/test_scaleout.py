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
