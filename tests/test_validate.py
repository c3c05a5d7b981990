"""Validation against measured rows: row → deployment mapping, rows.csv, partitions, the MLPerf validator."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from gpusim.analysis.published import map_system
from gpusim.cli import main
from gpusim.errors import InputError
from gpusim.validate.errors import (
    error_stats,
    first_wave_weights,
    partition_errors,
    repeat_scatter,
    scatter_stats,
    slot_queueing,
    target_status,
)
from gpusim.validate.mlperf import validate_mlperf
from gpusim.validate.runner import Unsupported
from gpusim.validate.silicon import (
    map_model,
    row_case,
    row_concurrency,
    row_dtypes,
    scored_table,
    summarize_table,
)

SILICON_COLUMNS = [
    "id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode", "isl",
    "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
    "moe_tp_size", "moe_ep_size", "prefill_batch_size", "prefill_num_workers", "prefill_tp_size",
    "prefill_pp_size", "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size",
    "decode_batch_size", "decode_num_workers", "decode_tp_size", "decode_pp_size", "decode_attention_dp_size",
    "decode_moe_tp_size", "decode_moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms",
]


def _row(**fields) -> dict:
    row = dict.fromkeys(SILICON_COLUMNS, math.nan)
    row.update(backend="trtllm", backend_version="1.0", isl=128, osl=16, silicon_ttft_ms=50.0, silicon_tpot_ms=5.0)
    row.update(fields)
    return row


AGG_DENSE = _row(id="llama_h100_trtllm_agg_128x16_c4_cfg1", silicon_data_source="silicon_concurrency=4",
                 model_path="meta-llama/Llama-3.1-8B-Instruct", system="h100_sxm", precision="fp8", mode="agg",
                 gemm_quant_mode="fp8", batch_size=4, tp_size=2, pp_size=1, attention_dp_size=1, moe_tp_size=2,
                 moe_ep_size=1)
AGG_MOE_DP = _row(id="dsr1_b200_trtllm_agg_128x16_c16_cfg2", silicon_data_source="config_id=2",
                  model_path="nvidia/DeepSeek-R1-NVFP4", system="b200_sxm", precision="fp4", mode="agg",
                  gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", batch_size=2, tp_size=1, pp_size=1,
                  attention_dp_size=8, moe_tp_size=1, moe_ep_size=8)
DISAGG = _row(id="2026_qwen3_32b_gb200_sglang_fp8_disagg_128x16_c6_tp2_ep1_7", silicon_data_source="model=Qwen3-32B",
              model_path="Qwen/Qwen3-32B", system="gb200", backend="sglang", precision="fp8", mode="disagg",
              gemm_quant_mode="fp8", moe_quant_mode="fp8", prefill_tp_size=1, prefill_pp_size=1,
              prefill_attention_dp_size=1, prefill_moe_tp_size=1, prefill_moe_ep_size=1, decode_tp_size=2,
              decode_pp_size=1, decode_attention_dp_size=1, decode_moe_tp_size=2, decode_moe_ep_size=1)
UNKNOWN_MODEL = _row(id="mystery_h100_c2", silicon_data_source="silicon_concurrency=2", model_path="acme/Mystery-7B",
                     system="h100_sxm", mode="agg", tp_size=1, batch_size=2)


def test_system_names_map_by_rule() -> None:
    assert map_system("h100_sxm") == ("h100-hgx", 1)
    assert map_system("h200_sxm") == ("h200-hgx", 1)
    assert map_system("b300_sxm", 16) == ("b300-hgx", 2)
    assert map_system("gb200") == ("gb200-nvl72", 1)
    assert map_system("gb300") == ("gb300-nvl72", 1)
    assert map_system("mi300x") is None


def test_models_map_by_rule() -> None:
    assert map_model("nvidia/Llama-3.1-8B-Instruct-FP8") == "llama3.1-8b"
    assert map_model("meta-llama/Llama-3.1-70B") == "llama3.1-70b"
    assert map_model("nvidia/DeepSeek-V3.1-NVFP4") == "deepseek-v3"
    assert map_model("Qwen/Qwen3-235B-A22B-FP8") == "qwen3-235b-a22b"
    assert map_model("Qwen/Qwen3.5-397B-A17B") == "qwen3.5-397b-a17b"
    with pytest.raises(Unsupported, match="no architecture"):
        map_model("acme/Mystery-7B")


def test_aggregated_rows_build_one_instance() -> None:
    dense = row_case(AGG_DENSE)
    d = dense.deployment
    assert (dense.hardware, dense.systems, dense.model, dense.concurrency) == ("h100-hgx", 1, "llama3.1-8b", 4)
    assert (d.mode, d.tp, d.ep, d.attention_dp, d.instances, d.max_batch_size) == ("aggregated", 2, 1, False, 1, 4)
    assert (d.weights, d.activations, d.kv_cache) == ("fp8", "fp8", "fp8")
    moe = row_case(AGG_MOE_DP)
    d = moe.deployment
    assert (moe.model, moe.concurrency) == ("deepseek-r1", 16)  # from the id: the source has no concurrency
    assert (d.tp, d.ep, d.attention_dp, d.max_batch_size, d.weights) == (8, 8, True, 16, "fp4")


def test_a_stated_batch_below_the_concurrency_does_not_cap_the_engine() -> None:
    # rows that record batch_size as concurrency per GPU (c32 on tp4 → 8): the closed loop keeps 32 in flight
    row = {**AGG_DENSE, "id": "llama_h100_trtllm_agg_128x16_c32_tp4", "silicon_data_source": "silicon_concurrency=32",
           "tp_size": 4, "batch_size": 8}
    case = row_case(row)
    assert case.concurrency == 32 and case.deployment.max_batch_size == 32


def test_a_concurrency_beyond_batch_times_gpus_is_not_one_engine() -> None:
    row = {**AGG_DENSE, "id": "llama_h100_trtllm_agg_128x16_c416_tp2", "silicon_data_source": "silicon_concurrency=416",
           "tp_size": 2, "batch_size": 13}
    with pytest.raises(Unsupported, match="exceeds batch_size 13 × 2 GPUs"):
        row_case(row)
    assert row_case({**row, "batch_size": 208}).concurrency == 416  # the per-GPU convention still holds


def test_ep_squared_exports_read_as_k_gpus() -> None:
    # TEP8 written as tp 64 (moe_tp 8 × ep 8) on an 8-GPU system: 64 GPUs cannot be one engine there
    tep = {**AGG_MOE_DP, "id": "dsr1_b200_trtllm_agg_128x16_c16_cfg3", "tp_size": 64, "attention_dp_size": 1,
           "moe_tp_size": 8, "moe_ep_size": 8, "batch_size": 16}
    case = row_case(tep)
    d = case.deployment
    assert (case.systems, d.tp, d.ep, d.attention_dp) == (1, 8, 8, False)
    # DEP4 written as dp 16 with the per-rank batch divided by 4 (c256 = 16 × 16): 4 ranks of 64
    dep = {**tep, "id": "x_c256_tp4_ep4_9", "silicon_data_source": "silicon_concurrency=256", "tp_size": 1,
           "attention_dp_size": 16, "moe_tp_size": 4, "moe_ep_size": 4, "batch_size": 16}
    d = row_case(dep).deployment
    assert (d.tp, d.ep, d.attention_dp, d.max_batch_size) == (4, 4, True, 256)
    # tp 4 with moe_tp 2 × ep 2 fits one system and is a real layout, unless the id labels it tp2_ep2
    small = {**tep, "tp_size": 4, "moe_tp_size": 2, "moe_ep_size": 2}
    assert row_case(small).deployment.tp == 4
    assert row_case({**small, "id": "x_c16_tp2_ep2_9"}).deployment.tp == 2
    # vLLM TEP4 written as tp 4 × dp 4 with moe_ep 16 and the batch divided by that dp (c64 = 16 × 4)
    vllm = {**tep, "id": "x_c64_tp4_ep4_9", "silicon_data_source": "silicon_concurrency=64", "tp_size": 4,
            "attention_dp_size": 4, "moe_tp_size": 1, "moe_ep_size": 16, "batch_size": 16}
    case = row_case(vllm)
    d = case.deployment
    assert (case.systems, d.tp, d.ep, d.attention_dp, d.max_batch_size) == (1, 4, 4, False, 64)
    # the same pattern at k = 2 fits one system: 4 GPUs of attention DP unless labelled tp2_ep2
    pair = {**vllm, "id": "x_c16_cfg9", "silicon_data_source": "silicon_concurrency=16", "tp_size": 2,
            "attention_dp_size": 2, "moe_ep_size": 4, "batch_size": 8}
    d = row_case(pair).deployment
    assert (d.tp, d.ep, d.attention_dp) == (4, 4, True)
    d = row_case({**pair, "id": "x_c16_tp2_ep2_9"}).deployment
    assert (d.tp, d.ep, d.attention_dp) == (2, 2, False)


def test_disaggregated_row_with_empty_batch_and_workers() -> None:
    assert row_concurrency(DISAGG) == 6  # `_c6` in the id
    case = row_case(DISAGG)
    d = case.deployment
    assert d.mode == "disaggregated"
    assert (d.prefill.tp, d.prefill.instances, d.decode.tp, d.decode.instances) == (1, 1, 2, 1)
    assert d.decode.max_batch_size == 6
    assert case.hardware == "gb200-nvl72"
    assert any("workers unstated" in n for n in case.notes)


def test_dtypes_from_quant_modes() -> None:
    assert row_dtypes({"gemm_quant_mode": "nvfp4"}) == ("fp4", "fp4", "fp8")
    assert row_dtypes({"gemm_quant_mode": "fp8_block"}) == ("fp8", "fp8", "fp8")
    assert row_dtypes({"gemm_quant_mode": math.nan, "precision": "bf16"}) == ("bf16", "bf16", "bf16")
    assert row_dtypes({"model_path": "nvidia/Qwen3-32B-NVFP4"}) == ("fp4", "fp4", "fp8")
    assert row_dtypes({"gemm_quant_mode": "int4_wo"}) == ("fp4", "bf16", "fp8")


def test_rows_csv_has_one_line_per_input_row(tmp_path, capsys) -> None:
    csv = tmp_path / "rows_in.csv"
    pd.DataFrame([AGG_DENSE, DISAGG, UNKNOWN_MODEL], columns=SILICON_COLUMNS).to_csv(csv, index=False)
    out = tmp_path / "out"
    assert main(["validate", "silicon", str(csv), "--json", "--workers", "1", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == {"rows_total", "rows_predicted", "mape_ttft", "mape_tpot", "partitions", "generations",
                            "fronts"}
    assert summary["rows_total"] == 3 and summary["rows_predicted"] == 2 and summary["generations"] == []
    assert summary["fronts"] == []  # no setup measured at two concurrencies
    rows = pd.read_csv(out / "rows.csv")
    assert list(rows.columns) == ["id", "predicted_ttft_ms", "predicted_tpot_ms", "status"]
    assert rows["id"].tolist() == [AGG_DENSE["id"], DISAGG["id"], UNKNOWN_MODEL["id"]]
    assert rows["status"].str.startswith("ok").tolist() == [True, True, False]
    assert "no architecture" in rows["status"][2]
    assert (rows["predicted_ttft_ms"][:2] > 0).all() and (rows["predicted_tpot_ms"][:2] > 0).all()


def test_partitions_by_hand() -> None:
    t = pd.DataFrame({
        "system": ["a", "a", "b", "b"],
        "measured_ttft": [100.0, 200.0, 10.0, 10.0], "predicted_ttft": [110.0, 100.0, 20.0, math.nan],
        "measured_tpot": [10.0, 10.0, 4.0, 4.0], "predicted_tpot": [10.0, 12.0, 3.0, math.nan],
        "predicted": [True, True, True, False],
    })
    overall = error_stats(t, ("ttft", "tpot"))
    assert overall["rows"] == 4 and overall["rows_predicted"] == 3
    assert overall["mape_ttft"] == pytest.approx((0.1 + 0.5 + 1.0) / 3)
    assert overall["median_ape_ttft"] == pytest.approx(0.5)
    assert overall["bias_ttft"] == pytest.approx((0.1 - 0.5 + 1.0) / 3)
    parts = {p["value"]: p for p in partition_errors(t, {"system": ["system"]}, ("ttft", "tpot"))}
    assert parts["a"]["mape_ttft"] == pytest.approx(0.3) and parts["a"]["mape_tpot"] == pytest.approx(0.1)
    assert parts["b"]["rows"] == 2 and parts["b"]["rows_predicted"] == 1
    assert parts["b"]["mape_tpot"] == pytest.approx(0.25)



def test_rows_are_also_scored_by_the_rules_they_were_read_by() -> None:
    rows = pd.DataFrame([AGG_DENSE, {**DISAGG, "silicon_ttft_ms": 100.0}, {**DISAGG, "silicon_ttft_ms": 200.0}])
    note = "prefill workers unstated: {} assumed (≤ 64 sequences per GPU)"
    preds = pd.DataFrame({"id": rows["id"], "predicted_ttft_ms": [50.0, 150.0, 100.0],
                          "predicted_tpot_ms": [5.0, 5.0, 5.0],
                          "status": ["ok", f"ok ({note.format(1)})", f"ok ({note.format(3)})"]})
    parts = {p["value"]: p for p in summarize_table(scored_table(rows, preds))["partitions"] if p["kind"] == "reading"}
    assert set(parts) == {"as stated", "prefill workers unstated"}
    unstated = parts["prefill workers unstated"]
    assert unstated["rows"] == 2 and unstated["mape_ttft"] == pytest.approx((0.5 + 0.5) / 2)
    assert parts["as stated"]["rows"] == 1 and parts["as stated"]["mape_ttft"] == pytest.approx(0.0)


def test_repeat_scatter_by_hand() -> None:
    """Setup a measured 100, 120, 80 and 100 again (a copy counts once): 0, 0.2, 0.2 around the median 100;
    setup b measured twice alike and setup c once have no scatter."""
    measured = pd.Series([100.0, 120.0, 80.0, 100.0, 50.0, 50.0, 70.0])
    setup = pd.Series(["a", "a", "a", "a", "b", "b", "c"])
    got = repeat_scatter(measured, setup)
    assert got[:3].tolist() == pytest.approx([0.0, 0.2, 0.2])
    assert got[3:].isna().all()
    t = pd.DataFrame({"system": ["x", "x", "x", "x", "y", "y", "y"], "scatter_ttft": got, "scatter_tpot": got / 2})
    stats = {(p["kind"], p["value"]): p for p in scatter_stats(t, {"system": ["system"]}, ("ttft", "tpot"))}
    assert stats[("all", "all")]["rows_repeated"] == 3
    assert stats[("system", "x")]["scatter_ttft"] == pytest.approx(0.4 / 3)
    assert stats[("system", "x")]["scatter_tpot"] == pytest.approx(0.2 / 3)
    assert stats[("system", "y")]["rows_repeated"] == 0 and stats[("system", "y")]["scatter_ttft"] is None


def test_partitions_against_the_targets_by_hand() -> None:
    """System a (TTFT 10%, TPOT 5%) meets 20% / 10%; b (TTFT 50%) does not and carries its setups' scatter;
    c has too few predicted rows to be judged. The report counts them and lists each."""
    from gpusim.validate.report import target_table

    t = pd.DataFrame({
        "system": ["a", "a", "b", "b", "c", "c"],
        "measured_ttft": [100.0, 100.0, 10.0, 10.0, 1.0, 1.0], "predicted_ttft": [110.0, 90.0, 15.0, 5.0, 1.0, None],
        "measured_tpot": [10.0] * 6, "predicted_tpot": [10.5, 9.5, 10.0, 10.0, 10.0, None],
        "predicted": [True, True, True, True, True, False],
        "scatter_ttft": [None, None, 0.3, 0.1, None, None], "scatter_tpot": [None, None, 0.02, 0.04, None, None],
    })
    got = {p["value"]: p for p in target_status(t, {"system": ["system"]}, {"ttft": 0.2, "tpot": 0.1}, 2)}
    assert set(got) == {"a", "b"}
    assert got["a"]["meets"] and got["a"]["mape_ttft"] == pytest.approx(0.1) and got["a"]["scatter_ttft"] is None
    assert not got["b"]["meets"] and got["b"]["mape_ttft"] == pytest.approx(0.5)
    assert got["b"]["rows_repeated"] == 2 and got["b"]["scatter_ttft"] == pytest.approx(0.2)
    text = target_table({"mape": {"ttft": 0.2, "tpot": 0.1}, "min_rows": 2, "partitions": list(got.values())})
    assert text.startswith("1 of 2 partitions with at least 2 predicted rows meet TTFT ≤ 20.0% and TPOT ≤ 10.0%")
    assert "| system | b | 2 | 50.0% | 0.0% | no | 2 | 20.0% | 3.0% |" in text


def test_report_states_the_scatter_of_repeated_setups(tmp_path) -> None:
    """Two measurements of one setup (60 and 40 ms TTFT, median 50) put a 20% floor in the report; the
    scatter is taken over the whole sample, so a validated subset still sees its setup's repeats."""
    from gpusim.validate.report import write_report
    from gpusim.validate.silicon import scored_table, summarize_table

    again = {**AGG_DENSE, "id": AGG_DENSE["id"] + "_again", "silicon_ttft_ms": 40.0}
    first = {**AGG_DENSE, "silicon_ttft_ms": 60.0}
    sample = pd.DataFrame([first, again, DISAGG], columns=SILICON_COLUMNS)
    rows = sample.iloc[[0]].reset_index(drop=True)
    pred = pd.DataFrame({"id": rows["id"], "predicted_ttft_ms": [55.0], "predicted_tpot_ms": [5.0], "status": ["ok"]})
    table = scored_table(rows, pred, sample)
    assert table["scatter_ttft"].tolist() == pytest.approx([0.2])
    summary = summarize_table(table)
    text = write_report(tmp_path, table, summary, "t", "cmd").read_text()
    assert "| all | all | 1 | 20.0% | - |" in text

def test_mlperf_validator_on_three_rows(tmp_path) -> None:
    csv = tmp_path / "published.csv"
    pd.DataFrame([
        {"round": "v6.1", "system": "one-h100", "accelerator": "NVIDIA H100-SXM-80GB", "num_accelerators": 1,
         "benchmark": "llama3.1-8b", "scenario": "Offline", "value": 3000.0, "unit": "tokens/s"},
        {"round": "v6.1", "system": "b300", "accelerator": "NVIDIA B300-SXM-270GB", "num_accelerators": 8,
         "benchmark": "qwen3-vl-235b-a22b", "scenario": "Offline", "value": 129.4, "unit": "samples/s"},
        {"round": "v6.1", "system": "gaudi", "accelerator": "Intel Gaudi 3", "num_accelerators": 8,
         "benchmark": "llama2-70b-99.9", "scenario": "Offline", "value": 1e5, "unit": "tokens/s"},
    ]).to_csv(csv, index=False)
    result = validate_mlperf(csv, duration_s=30)
    rows = result["rows"]
    assert result["rows_supported"] == 2
    assert rows[0]["status"].startswith("ok")  # v6.1 runs with trtllm (test_calibrate checks the rule)
    assert rows[0]["ratio"] == pytest.approx(rows[0]["predicted"] / 3000.0)
    assert rows[1]["status"].startswith("ok")  # Qwen3-VL: samples/s, with its vision encoder (docs/workloads.md)
    assert rows[1]["ratio"] == pytest.approx(rows[1]["predicted"] / 129.4)
    assert rows[2]["status"].startswith("unsupported: accelerator")
    assert result["mape"] == pytest.approx((abs(rows[0]["ratio"] - 1) + abs(rows[1]["ratio"] - 1)) / 2)


@pytest.mark.slow
def test_silicon_sample_rows_parse(shared_dir) -> None:
    rows = pd.read_csv(shared_dir / "reference" / "silicon_sample.csv")
    built = 0
    for row in rows.to_dict("records"):
        try:
            row_case(row)
            built += 1
        except Unsupported:
            pass
    assert built >= 0.9 * len(rows)


def test_held_out_rows_are_exactly_those_calibration_never_fits_on(tmp_path) -> None:
    from gpusim.validate.holdout import split_rows
    from gpusim.validate.silicon import read_sample

    rows = pd.DataFrame([{**AGG_DENSE, "id": f"row{i}"} for i in range(50)])
    path = tmp_path / "rows.csv"
    rows.to_csv(path, index=False)
    held = read_sample(path, held_out=True)
    train = split_rows(pd.read_csv(path))[0]
    assert len(held) == 15 and set(held["id"]).isdisjoint(train["id"])
    assert len(read_sample(path, sample=5, held_out=True)) == 5


@pytest.mark.parametrize(("concurrency", "dep"), [(16, False), (1024, True)])
def test_unstated_mla_decode_switches_to_attention_dp_at_high_concurrency(concurrency, dep) -> None:
    row = {**DISAGG, "id": f"dsr1_gb200_trtllm_disagg_1024x1024_c{concurrency}_tp8_ep8_1",
           "model_path": "deepseek-ai/DeepSeek-R1", "backend": "trtllm", "decode_tp_size": 8,
           "decode_moe_ep_size": 4, "prefill_moe_ep_size": 4, "prefill_tp_size": 4}
    d = row_case(row).deployment.decode
    assert d.attention_dp is dep
    assert d.ep == (8 if dep else 4)


def _dsr1_disagg(concurrency: int, isl: int = 1024, osl: int = 1024, **fields) -> dict:
    return {**DISAGG, "id": f"dsr1_gb200_trtllm_disagg_{isl}x{osl}_c{concurrency}_tp8_ep8_1",
            "model_path": "deepseek-ai/DeepSeek-R1", "backend": "trtllm", "isl": isl, "osl": osl,
            "prefill_tp_size": 4, "prefill_moe_ep_size": 4, "decode_tp_size": 8, "decode_moe_ep_size": 8, **fields}


def test_unstated_prefill_pool_keeps_up_with_the_decode_pool() -> None:
    from gpusim.perf.capacity import Lengths, decode_rate, prefill_rate
    from gpusim.perf.memory import plan_memory
    from gpusim.perf.step import StepCostModel
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model

    case = row_case(_dsr1_disagg(4096))
    dep = case.deployment
    k, workers = dep.prefill.instances, dep.decode.instances
    assert any(n.startswith(f"prefill workers unstated: {k} sized") for n in case.notes)
    # by hand: k prefill workers cover the decode pool's completions at the client's mean lengths, k - 1 do not
    hw, model = load_hardware("gb200-nvl72"), load_model("deepseek-r1")
    decode, prefill = dep.role("decode"), dep.role("prefill")
    done = workers * decode_rate(StepCostModel(hw, model, decode), plan_memory(hw, model, decode).kv_capacity_tokens,
                                 decode, Lengths.fixed(0.9 * 1024, 0.9 * 1024), batch=math.ceil(4096 / workers))
    one = prefill_rate(StepCostModel(hw, model, prefill), prefill, 0.9 * 1024)
    assert (k - 1) * one < done <= k * one
    # far fewer context servers than generation servers at 1k/1k, as the recipes run (ctx4_gen1 … ctx10_gen1)
    assert k * dep.prefill.gpus_per_instance < workers * dep.decode.gpus_per_instance
    # eight times the prompt needs more prefill workers at the same concurrency; a stated count is kept
    assert row_case(_dsr1_disagg(4096, isl=8192)).deployment.prefill.instances > k
    stated = row_case(_dsr1_disagg(4096, prefill_num_workers=3, decode_num_workers=2))
    assert (stated.deployment.prefill.instances, stated.deployment.decode.instances) == (3, 2)
    assert not any("unstated" in n for n in stated.notes)


def test_disaggregated_systems_cover_whole_instances_placed_in_order() -> None:
    # 3 × 16 prefill GPUs, then 3 × 32 decode GPUs whole within 72-GPU racks: 48 | 32 + 32 | 32 → 3 racks, not 2
    row = _dsr1_disagg(256, prefill_num_workers=3, prefill_tp_size=16, prefill_moe_ep_size=16,
                       decode_num_workers=3, decode_tp_size=1, decode_attention_dp_size=32, decode_moe_ep_size=32)
    case = row_case(row)
    assert (case.hardware, case.systems) == ("gb200-nvl72", 3)


def test_unstated_pools_that_cannot_run_say_why() -> None:
    from gpusim.validate.silicon import predict_case

    with pytest.raises(Unsupported, match="tp: weights need"):  # DeepSeek-R1 FP8 on 2 H100s: no rate to size by
        row_case(_dsr1_disagg(64, system="h100_sxm", decode_tp_size=2, decode_moe_ep_size=2))
    wide = row_case(_dsr1_disagg(64, system="h200_sxm", prefill_tp_size=16, prefill_moe_ep_size=16))
    assert predict_case(wide).status.startswith("unsupported: prefill.tp: tp = 16 exceeds the NVLink domain")


def test_four_bit_checkpoints_run_weight_only_on_hopper() -> None:
    row = {**AGG_DENSE, "id": "gptoss_h100_vllm_agg_c4", "model_path": "openai/gpt-oss-120b", "backend": "vllm",
           "gemm_quant_mode": "nvfp4", "tp_size": 2, "moe_ep_size": 1}
    hopper = row_case(row)
    assert (hopper.deployment.weights, hopper.deployment.activations) == ("fp4", "bf16")
    assert any("W4A16" in n or "bf16 activations" in n for n in hopper.notes)
    blackwell = row_case({**row, "system": "b200_sxm"})
    assert (blackwell.deployment.weights, blackwell.deployment.activations) == ("fp4", "fp4")


def test_nvidia_rows_beyond_the_calibration_set_map_to_one_vera_rubin_rack() -> None:
    """reference/mlperf_held_out.csv holds NVIDIA's v6.1 Vera Rubin NVL72 DeepSeek-R1 results (mlcommons
    inference_results_v6.1 report.txt files): one rack of 72 GPUs, each scenario once, run with the round's
    TensorRT-LLM, and no row of the calibration set is on that system, so no fit reads them."""
    from gpusim.analysis.published import read_published
    from gpusim.validate.datasets import HELD_OUT_CSV, MLPERF_CSV
    from gpusim.validate.mlperf import software_for_row

    rows = read_published(HELD_OUT_CSV)
    assert {(r.hardware, r.systems, r.gpus, r.benchmark) for r in rows} == {("vr-nvl72", 1, 72, "deepseek-r1")}
    assert sorted(r.scenario for r in rows) == ["interactive", "offline", "server"]
    assert {software_for_row(r)[0] for r in rows} == {"trtllm"}
    assert "vr-nvl72" not in {r.hardware for r in read_published(MLPERF_CSV)}


def test_mlperf_validator_searches_each_row_on_its_own_gpus_in_parallel(tmp_path) -> None:
    csv = tmp_path / "published.csv"
    pd.DataFrame([
        {"round": "v6.1", "accelerator": "NVIDIA H100-SXM-80GB", "num_accelerators": n, "benchmark": "llama3.1-8b",
         "scenario": "Offline", "value": 3000.0 * n, "unit": "tokens/s"} for n in (1, 2)
    ]).to_csv(csv, index=False)
    rows = validate_mlperf(csv, duration_s=20, workers=2)["rows"]
    assert all(r["status"].startswith("ok") for r in rows)
    one, two = rows[0]["predicted"], rows[1]["predicted"]
    assert 1.6 < two / one < 2.4  # twice the GPUs, about twice the tokens/s


def test_first_wave_weight_implied_by_the_measured_mean() -> None:
    """Mean TTFT = w·first + (1 − w)·steady: a row measured at 0.3·1000 + 0.7·100 = 370 ms implies w = 0.3,
    one at 100 ms w = 0; a row whose first wave is within 25% of its steady state says nothing."""
    from gpusim.validate.report import first_wave_table

    t = pd.DataFrame({"backend": ["x", "x", "y", "y"], "predicted": [True, True, True, False],
                      "measured_ttft": [370.0, 100.0, 500.0, 900.0], "predicted_ttft": [190.0, 190.0, 110.0, math.nan],
                      "predicted_ttft_first_wave": [1000.0, 1000.0, 120.0, 2000.0],
                      "predicted_ttft_steady": [100.0, 100.0, 100.0, 100.0]})
    got = {w["value"]: w for w in first_wave_weights(t, "backend")}
    assert got["all"]["rows"] == 2 and set(got) == {"all", "x"}
    assert got["x"]["weight_median"] == pytest.approx(0.15)
    assert (got["x"]["weight_q25"], got["x"]["weight_q75"]) == pytest.approx((0.075, 0.225))
    assert "| x | 2 | 0.15 |" in first_wave_table(list(got.values()))


def test_slot_queueing_bands_disaggregated_rows_by_concurrency_over_decode_slots() -> None:
    """Four disaggregated rows with 8 decode slots at c = 4, 8, 10 and 12 (c / S = 0.5, 1, 1.25, 1.5); an
    aggregated row and an unpredicted one are left out. The last two fall in the top band: TTFT ratios 0.6 and
    0.8 beside TPOT ratios 0.5 and 1.0 (quotients 1.2 and 0.8), measured waits 2,000 / (100 · 40) = 0.5 and
    2,000 / (100 · 20) = 1.0 request times against Little's 0.25 and 0.5."""
    from gpusim.validate.report import slot_table

    t = pd.DataFrame({
        "mode": ["disagg"] * 5 + ["agg"], "predicted": [True, True, True, True, False, True],
        "concurrency": [4, 8, 10, 12, 12, 12], "decode_slots": [8, 8, 8, 8, 8, None], "osl": [100] * 6,
        "measured_ttft": [100.0, 100.0, 2000.0, 2000.0, 1.0, 1.0],
        "predicted_ttft": [50.0, 50.0, 1200.0, 1600.0, 1.0, 1.0],
        "measured_tpot": [10.0, 10.0, 40.0, 20.0, 1.0, 1.0], "predicted_tpot": [10.0, 10.0, 20.0, 20.0, 1.0, 1.0]})
    bands = slot_queueing(t, edges=(0.9, 1.1))
    assert [b["rows"] for b in bands] == [1, 1, 2]
    top = bands[-1]
    assert (top["ttft_ratio"], top["tpot_ratio"], top["ttft_over_tpot"]) == pytest.approx((0.7, 0.75, 1.0))
    assert (top["measured_wait"], top["little"]) == pytest.approx((0.75, 0.375))
    assert bands[0]["little"] == 0.0
    table = slot_table(bands)
    assert "| < 0.9 | 1 |" in table and "| 0.9–1.1 | 1 |" in table
    assert "| ≥ 1.1 | 2 | 0.70 | 0.75 | 1.00 | 0.75 | 0.38 |" in table


def test_closed_loop_splits_the_first_wave_from_the_steady_state() -> None:
    """32 requests of 4k tokens sent at once queue behind each other's prefill; later ones arrive spread
    out as earlier ones finish. The mean is the request-weighted mix of the two."""
    from gpusim.specs.hardware import load_hardware
    from gpusim.specs.model import load_model
    from gpusim.validate.runner import WAVES, simulate_closed_loop

    case = row_case({**AGG_DENSE, "id": "llama_h100_trtllm_agg_4096x512_c32_tp2", "isl": 4096, "osl": 512,
                     "silicon_data_source": "silicon_concurrency=32", "tp_size": 2, "batch_size": 32})
    res = simulate_closed_loop(load_hardware(case.hardware, case.systems), load_model(case.model),
                               case.deployment, 32, 4096, 512)
    assert res.ttft_first_wave_s > 2 * res.ttft_steady_s
    assert res.ttft_mean_s == pytest.approx((res.ttft_first_wave_s + (WAVES - 1) * res.ttft_steady_s) / WAVES)


def test_one_wave_per_run_makes_the_mean_the_first_wave(capsys) -> None:
    """`--waves 1`: every request is sent at t = 0, so the mean TTFT is the first wave's; 0 waves is bad input."""
    from gpusim.validate.silicon import predict_rows

    rows = pd.DataFrame([AGG_DENSE], columns=SILICON_COLUMNS)
    one, ten = predict_rows(rows, 1, waves=1).iloc[0], predict_rows(rows, 1).iloc[0]
    assert one["predicted_ttft_ms"] == pytest.approx(one["predicted_ttft_first_wave_ms"])
    assert math.isnan(one["predicted_ttft_steady_ms"]) and not math.isnan(ten["predicted_ttft_steady_ms"])
    assert main(["validate", "silicon", "x.csv", "--waves", "0"]) == 2
    assert "waves: must be > 0" in capsys.readouterr().err


def test_table_timing_without_the_extra_is_bad_input(capsys, monkeypatch) -> None:
    from gpusim.perf import kernel_tables

    monkeypatch.setattr(kernel_tables, "aic_data_dir", lambda: None)
    assert main(["validate", "silicon", "x.csv", "--timing", "table"]) == 2
    err = capsys.readouterr().err
    assert "--timing" in err and "valid without it: roofline" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("change", "interval"), [
    ({}, 30),
    ({"silicon_data_source": "silicon_concurrency=8"}, 10),
    ({"model_path": "zai-org/GLM-5-FP8"}, 1),
    ({"system": "h200_sxm"}, 1),
    ({"backend": "vllm"}, 1),
])
def test_inferencex_sglang_rows_read_new_requests_every_n_decode_steps(change, interval) -> None:
    row = {**AGG_MOE_DP, "id": "dsr1_b200_sglang_agg_1024x1024_c64_cfg3", "backend": "sglang",
           "silicon_data_source": "silicon_concurrency=64", "batch_size": 8, **change}
    case = row_case(row)
    assert case.deployment.scheduler_recv_interval == interval
    assert any("scheduler-recv-interval" in n for n in case.notes) is (interval > 1)


_TP8_FP8 = {"attention_dp_size": 1, "tp_size": 8, "batch_size": 64, "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8",
            "precision": "fp8", "model_path": "deepseek-ai/DeepSeek-R1"}


@pytest.mark.parametrize(("change", "gate"), [
    ({}, "adp_balance"),  # attention DP: balance with InferenceX's timeout of 60 iterations
    (_TP8_FP8, "batch_wait"),  # FP8 on B200 at 1k/1k from concurrency 64
    ({**_TP8_FP8, "silicon_data_source": "silicon_concurrency=32"}, None),
    ({**_TP8_FP8, "osl": 8192}, None),
    ({**_TP8_FP8, "gemm_quant_mode": "nvfp4"}, None),
    ({"backend": "sglang"}, None),
    ({"model_path": "zai-org/GLM-5-FP8"}, None),
])
def test_inferencex_trtllm_deepseek_rows_hold_context_requests(change, gate) -> None:
    row = {**AGG_MOE_DP, "id": "dsr1_b200_trtllm_agg_1024x1024_c64_cfg3", "backend": "trtllm", "isl": 1024,
           "osl": 1024, "silicon_data_source": "silicon_concurrency=64", "batch_size": 8, **change}
    case = row_case(row)
    d = case.deployment
    assert (d.adp_balance is not None, d.batch_wait is not None) == (gate == "adp_balance", gate == "batch_wait")
    if gate == "adp_balance":
        assert (d.adp_balance.timeout_iters, d.adp_balance.batching_wait_iters) == (60, 0)
    if gate == "batch_wait":
        assert (d.batch_wait.timeout_iters, d.batch_wait.max_tokens_ratio) == (40, 0.8)
    assert any(n.startswith(f"InferenceX launch: {gate}") for n in case.notes) is (gate is not None)


@pytest.mark.parametrize(("change", "wait"), [({}, True), ({"tp_size": 8}, False), ({"osl": 8192}, False),
                                              ({"backend": "vllm"}, False)])
def test_inferencex_trtllm_llama70b_rows_batch_wait_at_1k1k_below_tp8(change, wait) -> None:
    row = {**AGG_DENSE, "id": "llama70b_b200_trtllm_agg_1024x1024_c64_cfg4", "model_path": "meta-llama/Llama-3.1-70B",
           "system": "b200_sxm", "isl": 1024, "osl": 1024, "tp_size": 4, "batch_size": 64,
           "silicon_data_source": "silicon_concurrency=64", **change}
    d = row_case(row).deployment
    assert (d.batch_wait is not None) is wait
    assert d.max_num_tokens == (8192 if change.get("backend") == "vllm" else 16384)
    if wait:
        assert (d.batch_wait.timeout_iters, d.batch_wait.max_tokens_ratio) == (20, 0.9)


@pytest.mark.parametrize(("change", "budget", "launched"), [
    ({}, 2048, True),  # vLLM 0.19 image: --max-num-batched-tokens 2 × ISL
    ({"isl": 8192}, 16384, True),
    ({"attention_dp_size": 2, "tp_size": 1, "batch_size": 32}, 4096, True),  # per DP engine
    ({"backend_version": "0.17.0"}, 8192, False),  # the script before the flag: vLLM's default
    ({"system": "h200_sxm"}, 8192, False),
])
def test_inferencex_vllm_minimax_rows_take_their_scripts_token_budget(change, budget, launched) -> None:
    row = {**AGG_DENSE, "id": "minimax_b200_vllm_agg_1024x1024_c64_cfg5", "model_path": "MiniMaxAI/MiniMax-M2.5",
           "system": "b200_sxm", "backend": "vllm", "backend_version": "0.19.0", "isl": 1024, "osl": 1024,
           "tp_size": 2, "moe_tp_size": 2, "batch_size": 64, "silicon_data_source": "silicon_concurrency=64", **change}
    case = row_case(row)
    assert case.deployment.max_num_tokens == budget
    assert any(n.startswith("InferenceX launch: max_num_tokens") for n in case.notes) is launched


@pytest.mark.parametrize(("backend", "model", "system", "version", "kv"), [
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "h200_sxm", "0.18.0", "bf16"),  # no --kv-cache-dtype at the rows' dates
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "h100_sxm", "0.18.0", "bf16"),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "b200_sxm", "0.17.0", "bf16"),  # before the v0.19.0 script's flag
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "b200_sxm", "0.19.0", "fp8"),
    ("sglang", "deepseek-ai/DeepSeek-R1", "h200_sxm", "0.5.9", "bf16"),
    ("sglang", "deepseek-ai/DeepSeek-R1", "b200_sxm", "0.5.9", "fp8"),  # --kv-cache-dtype fp8_e4m3
])
def test_inferencex_rows_keep_the_models_bf16_kv_cache_where_the_script_names_none(backend, model, system, version,
                                                                                   kv) -> None:
    """Engines keep the model's BF16 KV cache (`auto`) unless launched with an FP8 one: rows whose InferenceX script
    names none read BF16, the others the reader's FP8 for an FP8 checkpoint."""
    row = {**AGG_DENSE, "id": "moe_agg_1024x1024_c16_cfg5", "model_path": model, "system": system,
           "backend": backend, "backend_version": version, "isl": 1024, "osl": 1024, "tp_size": 8, "moe_tp_size": 8,
           "batch_size": 16, "silicon_data_source": "silicon_concurrency=16"}
    assert row_case(row).deployment.kv_cache == kv


@pytest.mark.parametrize(("model", "system", "precision", "tp", "budget"), [
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", 8, 32768),  # dsr1_fp8_b200.sh at TP8
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", 4, 8192),  # ... and at TP4
    ("nvidia/DeepSeek-R1-NVFP4", "b200_sxm", "nvfp4", 8, 16384),  # dsr1_fp4_b200.sh
    ("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 32768),
    ("zhipuai/GLM-5", "h200_sxm", "fp8", 8, 8192),  # glm5_fp8_h200.sh names none: the reader's default
])
def test_inferencex_sglang_rows_take_their_scripts_prefill_size(model, system, precision, tp, budget) -> None:
    row = {**AGG_DENSE, "id": "sglang_agg_8192x1024_c16_cfg7", "model_path": model, "system": system,
           "backend": "sglang", "backend_version": "0.5.9", "precision": precision, "gemm_quant_mode": precision,
           "moe_quant_mode": precision, "isl": 8192, "osl": 1024, "tp_size": tp, "moe_tp_size": tp, "batch_size": 16,
           "silicon_data_source": "silicon_concurrency=16"}
    assert row_case(row).deployment.max_num_tokens == budget


@pytest.mark.parametrize(("dp", "budget", "balance"), [(1, 20000, None), (4, 80000, (50, 10))])
def test_inferencex_trtllm_gptoss_rows_take_their_scripts_token_budget_and_balance(dp, budget, balance) -> None:
    """gptoss_fp4_b200_trt.sh: --max_num_tokens 20000 per engine rank, attention-DP balance at TensorRT-LLM's
    default iterations whenever it runs attention DP."""
    row = {**AGG_DENSE, "id": "gptoss_b200_trtllm_agg_1024x1024_c64_cfg3", "model_path": "openai/gpt-oss-120b",
           "system": "b200_sxm", "backend": "trtllm", "backend_version": "1.2.0rc2.post2", "precision": "fp4",
           "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "isl": 1024, "osl": 1024, "tp_size": 1,
           "attention_dp_size": dp, "moe_tp_size": 1, "moe_ep_size": dp, "batch_size": 64,
           "silicon_data_source": "silicon_concurrency=64"}
    d = row_case(row).deployment
    got = None if d.adp_balance is None else (d.adp_balance.timeout_iters, d.adp_balance.batching_wait_iters)
    assert (d.max_num_tokens, got) == (budget, balance)


def test_aic_baseline_configurations_parse(tmp_path, benchmark_script) -> None:
    mod = benchmark_script("aic_compare")
    md = tmp_path / "aic.md"
    md.write_text("| exact | DeepSeek-R1 \\| b200_sxm \\| sglang \\| agg | 161 / 169 | 68.7 | 72.2 | -51.6 | 12% | "
                  "23.8 | 21.7 | +3.3 | 61% |\n"
                  "| exact | GLM-5 \\| b200_sxm \\| sglang \\| agg | 0 / 46 | – | – | – | – | – | – | – | – |\n")
    got = mod.aic_configs(md)
    want = {"model": "DeepSeek-R1", "system": "b200_sxm", "backend": "sglang", "mode": "agg", "aic_rows": 161,
            "aic_ttft": pytest.approx(0.687), "aic_tpot": pytest.approx(0.238)}
    assert got.to_dict("records") == [want]


@pytest.mark.parametrize("kind", ["silicon", "mlperf"])
@pytest.mark.parametrize(("text", "says"), [("", "cannot read a CSV"), ("a,b\n1,2\n", "missing columns")])
def test_an_empty_or_column_short_csv_is_one_line_of_bad_input(tmp_path, capsys, kind, text, says) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert main(["validate", kind, str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert says in err and str(path) in err and len(err.strip().splitlines()) == 1


def test_an_mlperf_validation_writes_each_search_as_it_finishes_and_resumes(tmp_path, monkeypatch) -> None:
    import gpusim.validate.mlperf as vm

    csv = tmp_path / "published.csv"
    pd.DataFrame([
        {"round": "v6.1", "accelerator": "NVIDIA H100-SXM-80GB", "num_accelerators": n, "benchmark": "llama3.1-8b",
         "scenario": "Offline", "value": 3000.0 * n, "unit": "tokens/s"} for n in (1, 2)
    ]).to_csv(csv, index=False)
    out = tmp_path / "out"
    lines: list[str] = []
    first = validate_mlperf(csv, duration_s=20, out=out, progress=lines.append)
    log = (out / "searches.jsonl").read_text().splitlines()
    assert len(log) == 2 and any("[2/2" in s for s in lines)
    assert [json.loads(line)["key"].split("|")[2] for line in log] == ["2", "1"]  # the larger search first
    (out / "searches.jsonl").write_text(log[0] + "\n" + log[1][: len(log[1]) // 2])  # killed while writing the 2nd
    searched = []
    real = vm.find_best
    monkeypatch.setattr(vm, "find_best", lambda setup, *a, **k: searched.append(setup.num_gpus) or real(setup, *a, **k))
    again = validate_mlperf(csv, duration_s=20, out=out)
    assert len(searched) == 1  # only the search the torn line lost
    assert [r["predicted"] for r in again["rows"]] == [r["predicted"] for r in first["rows"]]


def test_the_repositorys_mlperf_results_are_the_reference_file_and_parse(shared_dir) -> None:
    from gpusim.analysis.published import read_published
    from gpusim.validate.datasets import MLPERF_CSV

    assert MLPERF_CSV.read_bytes() == (shared_dir / "reference" / "mlperf_calibration.csv").read_bytes()
    assert len(read_published(MLPERF_CSV)) > 60


def test_without_a_path_or_the_extra_the_silicon_sample_is_one_clear_error(monkeypatch) -> None:
    from gpusim.validate import datasets

    monkeypatch.setattr(datasets, "aic_data_dir", lambda: None)
    assert datasets.silicon_path(Path("x.csv"), "path") == Path("x.csv")
    with pytest.raises(InputError, match=r"path.*aiconfigurator-core"):
        datasets.silicon_path(None, "path")


def _on(row: dict, system: str, ttft: float, tpot: float, **fields) -> dict:
    """`row` measured on `system`."""
    return {**row, "id": f"{row['id']}_{system}_{ttft}", "system": system, "silicon_ttft_ms": ttft,
            "silicon_tpot_ms": tpot, **fields}


def test_generation_ratios_by_hand(tmp_path) -> None:
    """One setup measured on B200 (TPOT 10, measured twice: 9 and 11) and on B300 (8): a measured speed-up of 1.25;
    predicted 10 and 9, a speed-up of 1.11 and an agreement of 0.889. A second setup on both speeds up 1.5
    measured and predicted. The same setup at another concurrency or engine version, or on B200 alone, pairs with
    nothing."""
    from gpusim.validate.generations import GENERATION_BLIND, paired
    from gpusim.validate.report import generation_table
    from gpusim.validate.silicon import _setup_keys, select_rows

    other = {**AGG_DENSE, "id": "other", "isl": 256}
    rows = pd.DataFrame([
        _on(AGG_DENSE, "b200_sxm", 100.0, 9.0), _on(AGG_DENSE, "b200_sxm", 100.0, 11.0),
        _on(AGG_DENSE, "b300_sxm", 50.0, 8.0),
        _on(other, "b200_sxm", 60.0, 6.0), _on(other, "b300_sxm", 40.0, 4.0),
        _on(AGG_DENSE, "b300_sxm", 50.0, 8.0, silicon_data_source="silicon_concurrency=8"),
        _on({**AGG_DENSE, "isl": 512}, "b200_sxm", 70.0, 7.0),
        _on(other, "b300_sxm", 30.0, 3.0, backend_version="2.0"),
    ], columns=SILICON_COLUMNS)
    mask = paired(_setup_keys(rows, GENERATION_BLIND), rows["system"])
    assert mask.tolist() == [True] * 5 + [False] * 3
    assert len(select_rows(rows, generations=True)) == 5
    preds = pd.DataFrame({"id": rows["id"], "predicted_ttft_ms": [80.0, 80.0, 40.0, 60.0, 40.0, 1.0, 1.0, 1.0],
                          "predicted_tpot_ms": [10.0, 10.0, 9.0, 6.0, 4.0, 1.0, 1.0, 1.0], "status": ["ok"] * 8})
    got = {r["group"]: r for r in summarize_table(scored_table(rows, preds))["generations"]}
    assert set(got) == {"all", "meta-llama/Llama-3.1-8B-Instruct, trtllm, agg"}
    one = got["all"]
    assert one["pair"] == "b300_sxm / b200_sxm" and one["setups"] == 2
    assert one["measured_tpot"] == pytest.approx((1.25 + 1.5) / 2)
    assert one["predicted_tpot"] == pytest.approx((10 / 9 + 1.5) / 2)
    assert one["agreement_tpot"] == pytest.approx((10 / 9 / 1.25 + 1.0) / 2)
    assert one["within_tpot"] == pytest.approx(0.5)  # 0.889 is more than 10% off, 1.0 is not
    assert one["measured_ttft"] == pytest.approx((2.0 + 1.5) / 2) and one["agreement_ttft"] == pytest.approx(1.0)
    assert "| **b300_sxm / b200_sxm** | 2 | 1.75 | 1.75 | 1.00 | 100% | 1.38 | 1.31 | 0.94 | 50% |" in generation_table(
        [one])


def test_unpredicted_rows_pair_with_nothing() -> None:
    """A setup whose B300 row was not predicted has no generation ratio."""
    rows = pd.DataFrame([_on(AGG_DENSE, "b200_sxm", 100.0, 10.0), _on(AGG_DENSE, "b300_sxm", 50.0, 8.0)],
                        columns=SILICON_COLUMNS)
    preds = pd.DataFrame({"id": rows["id"], "predicted_ttft_ms": [80.0, None], "predicted_tpot_ms": [10.0, None],
                          "status": ["ok", "unsupported: no"]})
    assert summarize_table(scored_table(rows, preds))["generations"] == []


@pytest.mark.slow
def test_generation_speed_ups_on_measured_setups_come_out_within_ten_percent(shared_dir) -> None:
    """On the silicon sample's setups measured on two generations, the median predicted speed-up of the newer GPU
    is within 10% of the measured one, for every pair and both metrics (docs/accuracy.md: Generation ratios)."""
    from gpusim.validate.generations import GENERATION_PAIRS
    from gpusim.validate.silicon import validate_silicon

    result = validate_silicon(shared_dir / "reference" / "silicon_sample.csv", generations=True)
    pairs = {r["pair"]: r for r in result.summary["generations"] if r["group"] == "all"}
    assert set(pairs) == {f"{new} / {old}" for new, old in GENERATION_PAIRS}
    for r in pairs.values():
        assert r["setups"] >= 10
        assert abs(r["agreement_ttft"] - 1) <= 0.10 and abs(r["agreement_tpot"] - 1) <= 0.10, r


def test_generations_validates_only_setups_measured_on_two_generations(tmp_path, capsys) -> None:
    """One setup on B200 and B300, another on H100 alone: --generations simulates the pair only and sets the
    predicted speed-up beside the measured 1.25x (TPOT) and 1.2x (TTFT)."""
    csv = tmp_path / "rows_in.csv"
    rows = [_on(AGG_DENSE, "b200_sxm", 60.0, 5.0), _on(AGG_DENSE, "b300_sxm", 50.0, 4.0), UNKNOWN_MODEL]
    pd.DataFrame(rows, columns=SILICON_COLUMNS).to_csv(csv, index=False)
    assert main(["validate", "silicon", str(csv), "--generations", "--json", "--workers", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows_total"] == 2 and summary["rows_predicted"] == 2
    (pair,) = [r for r in summary["generations"] if r["group"] == "all"]
    assert pair["pair"] == "b300_sxm / b200_sxm" and pair["setups"] == 1
    assert pair["measured_tpot"] == pytest.approx(1.25) and pair["measured_ttft"] == pytest.approx(1.2)
    assert pair["agreement_tpot"] == pytest.approx(pair["predicted_tpot"] / 1.25)
