"""`gpusim compare`: sides on their own deployments or one held deployment, ratios, what changed and why."""

from __future__ import annotations

import json

import pytest
from test_user_profiles import _faster_hbm_rack

from gpusim.cli import main

SHORT = ["--benchmark", "llama2-70b", "--samples", "4000"]


def _compare(capsys, *args: str) -> dict:
    assert main(["compare", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_side_runs_its_own_deployment_and_ratios_are_over_the_first(capsys):
    c = _compare(capsys, "b200-hgx", "b300-hgx", *SHORT)
    a, b = c["sides"]
    assert a["label"] == "b200-hgx" and b["label"] == "b300-hgx" and a["ratios"] is None
    assert a["deployment_origin"].startswith("searched default (b200-hgx")
    assert b["deployment_origin"].startswith("searched default (b300-hgx")
    for key, r in b["ratios"].items():
        if r is not None:
            assert r == pytest.approx(b[key] / a[key])  # the second side's figure over the first's
    assert "hardware.gpu.dense_tflops.fp4: 9000 → 14000" in b["changes"]


def test_a_held_deployment_is_a_what_if_diff_that_names_the_change_and_times_the_same_step(tmp_path, capsys):
    rack = _faster_hbm_rack(tmp_path)  # GB300 NVL72 with 12 TB/s HBM instead of 8, no `base:`
    c = _compare(capsys, "gb300-nvl72", str(rack), *SHORT, "--same-deployment")
    a, b = c["sides"]
    assert b["deployment"] == a["deployment"] and b["deployment_origin"] == "held: the first side's"
    assert "hardware.gpu.hbm_bandwidth_tbps: 8 → 12" in b["changes"]
    # by hand: the same decode step reads the same KV cache (Llama 2's GQA attention is memory-bound) at 12 TB/s
    # instead of 8
    ka, kb = a["decode_step"]["by_op"]["attention_decode"], b["decode_step"]["by_op"]["attention_decode"]
    assert kb / ka == pytest.approx(8 / 12, rel=0.02)
    assert b["decode_step"]["total_s"] < a["decode_step"]["total_s"]
    # without --same-deployment the rack (no `base:`) runs its fallback, and the comparison says so
    c = _compare(capsys, "gb300-nvl72", str(rack), *SHORT)
    assert c["sides"][1]["deployment_origin"].startswith("fallback")


def test_a_held_deployment_keeps_the_fields_it_has_by_default():
    """The TPU7x cube's searched Llama 2 default is FP8 TP1 at 8,192 tokens per step, all of which are Deployment's
    defaults (its defaults file stores only the batch cap, stack and frontend); B200's own default is FP4 at 2,048.
    Held, the B200 side runs the TPU's deployment field for field, not its own default's precision or budget."""
    from gpusim.compare import Side, compare
    from gpusim.specs.experiment import RunSpec

    sides = [Side(h, RunSpec(hardware=h, benchmark="llama2-70b", scenario="offline", samples=200), "test")
             for h in ("tpu7x-cube", "b200-hgx")]
    first, second = (s.deployment for s in compare(sides, same_deployment=True).setups)
    assert (second.weights, second.activations, second.max_num_tokens) == ("fp8", "fp8", 8192)
    assert second.model_dump() == first.model_copy(update={"instances": None}).model_dump()


@pytest.mark.parametrize("args, words", [
    (["b200-hgx"], "sides: give at least two"),
    (["b200-hgx", "b200-hgx"], "sides: two sides have the same name"),
    (["b200-hgx", "b999-hgx"], "hardware"),
    (["b200-hgx", "b300-hgx", "--qps", "-1", "--scenario", "server"], "qps"),
])
def test_bad_sides_are_one_line_and_exit_2(capsys, args, words):
    assert main(["compare", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
