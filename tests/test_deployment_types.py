"""Aggregated and disaggregated deployments are two types whose fields mean one thing each."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpusim.deploy import load_deployment
from gpusim.errors import InputError
from gpusim.specs.deployment import Deployment, DisaggregatedDeployment, Parallelism

ROOT = Path(__file__).resolve().parents[1]


def test_parallelism_knows_its_attention_split() -> None:
    assert (Parallelism(tp=8).attention_tp, Parallelism(tp=8).attention_ranks) == (8, 1)
    adp = Parallelism(tp=8, ep=8, attention_dp=True)
    assert (adp.attention_tp, adp.attention_ranks) == (1, 8)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "deployments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_deployment_file_loads_as_its_mode(path: Path) -> None:
    dep, _ = load_deployment(str(path))
    disagg = yaml.safe_load(path.read_text()).get("mode") == "disaggregated"
    assert isinstance(dep, DisaggregatedDeployment if disagg else Deployment)


def test_a_pool_is_the_shared_knobs_with_its_own_parallelism() -> None:
    dep = DisaggregatedDeployment(mode="disaggregated", weights="fp4", kv_cache="fp8", frontend="http",
                                  prefill=Parallelism(tp=4, ep=4, instances=2),
                                  decode=Parallelism(tp=8, ep=8, attention_dp=True, max_batch_size=2048))
    decode = dep.role("decode")
    assert isinstance(decode, Deployment) and decode.mode == "aggregated"
    assert (decode.tp, decode.ep, decode.attention_dp, decode.max_batch_size) == (8, 8, True, 2048)
    assert (decode.weights, decode.kv_cache, decode.frontend) == ("fp4", "fp8", "http")
    assert dep.role("prefill").instances == 2
    assert not hasattr(dep, "tp")  # no top-level shape beside the pools'


def test_the_old_disaggregated_form_with_a_top_level_shape_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("mode: disaggregated\ntp: 8\nprefill: {tp: 4}\ndecode: {tp: 8}\n")
    with pytest.raises(InputError, match=r"prefill\.tp and decode\.tp"):
        load_deployment(str(path))
    path.write_text("prefill: {tp: 4}\ndecode: {tp: 8}\n")
    with pytest.raises(InputError, match="need mode: disaggregated"):
        load_deployment(str(path))
    path.write_text("tp: 2\nprefill: null\ndecode: null\n")  # an aggregated dump of the one-type days
    assert load_deployment(str(path))[0] == Deployment(tp=2)
    path.write_text("mode: disagg\n")
    with pytest.raises(InputError, match="valid: aggregated, or disaggregated"):
        load_deployment(str(path))
