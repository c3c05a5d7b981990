"""Energy and cost per token: every figure follows from its inputs by hand computation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gpusim
from gpusim.analysis.energy import energy_and_cost
from gpusim.errors import InputError
from gpusim.specs.costs import load_costs
from gpusim.specs.hardware import load_hardware, system_names

# An 8 x H100 node (TDP 700 W, 10.2 kW node, $260 k) at half load with round inputs.
OVERRIDES = {"gpu_idle_fraction": 0.2, "gpu_busy_fraction": 1.0, "pue": 1.5, "usd_per_kwh": 0.1,
             "amortisation_years": 4, "capex_usd": 260_000}
SUMMARY = {"output_tokens_per_s": 1000.0, "simulated_s": 100.0, "num_gpus": 8}
HALF_BUSY = SimpleNamespace(busy_s=[50.0] * 8, instance_gpus=[])


def test_figures_follow_by_hand():
    out = energy_and_cost(SUMMARY, load_hardware("h100-hgx"), HALF_BUSY, OVERRIDES)
    # GPUs 8 x 700 x (0.2 + 0.8 x 0.5) = 3,360 W; rest of the node 10,200 - 5,600 = 4,600 W; x PUE 1.5
    watts = (3360 + 4600) * 1.5
    assert out["gpu_busy_fraction"] == pytest.approx(0.5)
    assert out["power_kw"] == pytest.approx(11.94)
    assert out["energy_j_per_token"] == pytest.approx(11.94)  # 11,940 W / 1,000 tokens/s
    assert out["tokens_per_s_per_mw"] == pytest.approx(1000 / 0.01194)
    capex_per_s = 260_000 / (4 * 365.25 * 86_400)  # $0.0020597/s
    power_per_s = 11.94 * 0.1 / 3600  # $0.00033167/s
    assert out["usd_per_million_tokens"] == pytest.approx((capex_per_s + power_per_s) * 1e6 / 1000)
    assert watts == pytest.approx(11_940)


def test_unused_gpus_idle_and_systems_multiply():
    four_used = energy_and_cost({**SUMMARY, "num_gpus": 4}, load_hardware("h100-hgx"), HALF_BUSY, OVERRIDES)
    assert four_used["power_kw"] == pytest.approx((700 * (4 * 0.6 + 4 * 0.2) + 4600) * 1.5 / 1e3)
    two = energy_and_cost({**SUMMARY, "num_gpus": 16}, load_hardware("h100-hgx", 2), HALF_BUSY, OVERRIDES)
    assert two["power_kw"] == pytest.approx(2 * 11.94)
    capex_per_s = 2 * 260_000 / (4 * 365.25 * 86_400)
    assert two["usd_per_million_tokens"] == pytest.approx((capex_per_s + 2 * 11.94 * 0.1 / 3600) * 1e3)


def test_defaults_come_from_the_cost_file():
    costs = load_costs()
    out = energy_and_cost(SUMMARY, load_hardware("h100-hgx"), SimpleNamespace(busy_s=[100.0] * 8, instance_gpus=[]))
    tdp_w = 8 * 700 * costs.gpu_busy_fraction.value
    assert out["power_kw"] == pytest.approx((tdp_w + 4600) * costs.pue.value / 1e3)
    capex = costs.capex_usd["h100-hgx"].value / (costs.amortisation_years.value * 365.25 * 86_400)
    energy = out["power_kw"] * costs.usd_per_kwh.value / 3600
    assert out["usd_per_million_tokens"] == pytest.approx((capex + energy) * 1e3)


def test_every_system_has_a_sourced_price():
    costs = load_costs()
    assert set(system_names()) <= set(costs.capex_usd)
    assert all(v.source and v.grade in "ABCD" for v in costs.capex_usd.values())


def test_no_tokens_gives_none_and_bad_override_is_an_input_error():
    out = energy_and_cost({**SUMMARY, "output_tokens_per_s": 0.0}, load_hardware("h100-hgx"), HALF_BUSY)
    assert out["energy_j_per_token"] is None and out["usd_per_million_tokens"] is None
    with pytest.raises(InputError, match="pue"):
        energy_and_cost(SUMMARY, load_hardware("h100-hgx"), HALF_BUSY, {"pue": 0.5})
    with pytest.raises(InputError, match="watts"):
        energy_and_cost(SUMMARY, load_hardware("h100-hgx"), HALF_BUSY, {"watts": 1})


def test_run_summary_carries_the_figures():
    s = gpusim.run("b200-hgx", "llama2-70b", "offline", samples=50).summary
    assert s["energy_j_per_token"] > 0 and s["usd_per_million_tokens"] > 0
    assert s["tokens_per_s_per_mw"] == pytest.approx(s["output_tokens_per_s"] / (s["power_kw"] / 1e3))


def test_the_busy_fraction_is_weighted_by_gpus() -> None:
    from gpusim.analysis.energy import busy_fraction

    # by hand: an 8-GPU prefill instance idle and a 64-GPU decode instance busy all of a 100 s run: 64 of 72 GPUs
    assert busy_fraction([0.0, 100.0], 100.0, [8, 64]) == pytest.approx(64 / 72)
    assert busy_fraction([0.0, 100.0], 100.0) == pytest.approx(0.5)  # one each: the mean over instances
