"""The power limit (perf/step.py): a step takes at least its tensor-core joules over the TDP.

The toy GPU of test_perf (bf16 100 / fp8 200 TFLOPS, 1 TB/s, TDP 100 W); the expected joules are counted
by hand from the toy model's FLOPs, not by calling the code under test.
"""

from __future__ import annotations

import pytest

from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import Hardware, load_hardware
from gpusim.specs.sourced import Sourced
from tests.test_perf import FFN, HEADS, LAYERS, VOCAB, D, H, dense_model, hardware, software

PREFILL = BatchShape(prefill_tokens=4096, prefill_attn_pairs=4096 * 4097 / 2, prefill_seqs=1)
DECODE = BatchShape(decode_seqs=1, decode_context=10)


def with_energy(hw: Hardware, pj: dict[str, float]) -> Hardware:
    energy = {d: Sourced(value=v, source="test", grade="D") for d, v in pj.items()}
    return hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"tensor_pj_per_flop": energy})})


def model(hw: Hardware) -> StepCostModel:
    return StepCostModel(hw, dense_model(), Deployment(tp=1), software(launch_us=0, step_us=0))


def prefill_joules(pj_fp8: float, pj_bf16: float) -> float:
    """FP8 GEMMs over the prompt, the BF16 LM head over the one sampled row, FP8 causal attention (FP8 KV)."""
    t = PREFILL.prefill_tokens
    gemm = 2 * (4 * H * H + 3 * H * FFN) * LAYERS * t
    lm = 2 * VOCAB * H * 1
    attention = 4 * HEADS * D * PREFILL.prefill_attn_pairs * LAYERS  # QK^T and PV, 2 FLOPs per multiply-add
    return ((gemm + attention) * pj_fp8 + lm * pj_bf16) * 1e-12


def test_no_energy_no_limit() -> None:
    plain, cheap = model(hardware()), model(with_energy(hardware(), {"bf16": 1e-9}))
    assert cheap.step_time(PREFILL) == pytest.approx(plain.step_time(PREFILL), rel=1e-12)
    assert "power_limit" not in cheap.breakdown(PREFILL).by_op


def test_power_bound_step_is_joules_over_tdp() -> None:
    hw = with_energy(hardware(), {"fp8": 10.0, "bf16": 20.0})  # 10 pJ/FLOP at 200 TF/s = 2 kW > 100 W
    step = model(hw).step_time(PREFILL)
    assert step == pytest.approx(prefill_joules(10.0, 20.0) / hw.gpu.tdp_w.value, rel=1e-9)
    bd = model(hw).breakdown(PREFILL)
    assert bd.total_s == pytest.approx(step)
    assert bd.compute_s + bd.memory_s + bd.communication_s + bd.overhead_s == pytest.approx(bd.total_s)
    assert bd.by_op["power_limit"] == pytest.approx(step - model(hardware()).step_time(PREFILL))


def test_missing_precision_costs_the_wider_one() -> None:
    only_bf16 = model(with_energy(hardware(), {"bf16": 20.0})).step_time(PREFILL)
    assert only_bf16 == pytest.approx(prefill_joules(20.0, 20.0) / 100.0, rel=1e-9)


def test_weight_streaming_decode_is_not_power_bound() -> None:
    """Batch-1 decode does a few FLOPs per weight byte: the energy that caps a prefill leaves it alone."""
    hw = with_energy(hardware(), {"fp8": 3.0, "bf16": 6.0})  # prefill at 100 TFLOP/s would draw ~300 W
    assert model(hw).step_time(PREFILL) > model(hardware()).step_time(PREFILL) * 1.1
    assert model(hw).step_time(DECODE) == pytest.approx(model(hardware()).step_time(DECODE), rel=1e-12)


@pytest.mark.parametrize("tdp", [50.0, 100.0, 400.0])
def test_power_bound_time_scales_with_one_over_tdp(tdp: float) -> None:
    base = with_energy(hardware(), {"fp8": 10.0, "bf16": 20.0})
    hw = base.model_copy(update={"gpu": base.gpu.model_copy(update={"tdp_w": Sourced(value=tdp, source="t",
                                                                                      grade="D")})})
    assert model(hw).step_time(PREFILL) * tdp == pytest.approx(model(base).step_time(PREFILL) * 100.0, rel=1e-9)


def test_shipped_blackwell_energies_are_one_process() -> None:
    """B200, GB200, B300 and GB300 (TSMC 4NP) share one energy per FLOP: the B300/B200 gap in a power-bound
    step is the TDP ratio, not the 1.56x NVFP4 peak ratio."""
    energies = {s: load_hardware(s).tensor_joules_per_flop() for s in ("b200-hgx", "gb200-nvl72", "b300-hgx",
                                                                        "gb300-nvl72")}
    assert all(energies.values()), "the Blackwell profiles carry a fitted tensor_pj_per_flop"
    assert len({tuple(sorted(e.items())) for e in energies.values()}) == 1
    assert not load_hardware("h200-hgx").tensor_joules_per_flop()


def test_show_gives_the_rate_the_tdp_sustains() -> None:
    hw = load_hardware("b300-hgx")
    e4 = hw.gpu.tensor_pj_per_flop["fp4"].value * 1e-12
    derived = hw.derived()
    assert derived["system_fp4_pflops_at_tdp"] == pytest.approx(hw.gpu.tdp_w.value / e4 * hw.system.gpus / 1e15)
    assert derived["system_fp4_pflops_at_tdp"] < derived["system_fp4_pflops"]
    assert "system_fp4_pflops_at_tdp" not in load_hardware("h200-hgx").derived()


def test_wider_precisions_are_capped_by_what_measured_gemms_draw() -> None:
    """FP8 and BF16 cost 2x and 4x NVFP4 per FLOP unless a measured saturated GEMM would then exceed its TDP."""
    from gpusim.calibrate.power import energies

    loose = energies(0.2, {"fp8": (1.0, "x"), "bf16": (1.0, "x")})
    assert loose["fp8"][0] == pytest.approx(0.4) and loose["bf16"][0] == pytest.approx(0.8)
    tight = energies(0.2, {"fp8": (1.0, "x"), "bf16": (0.66, "b200 1.5 PFLOP/s at 1,000 W")})
    assert tight["bf16"][0] == pytest.approx(0.66) and "capped" in tight["bf16"][1]
    assert tight["fp8"][0] == pytest.approx(0.4)
