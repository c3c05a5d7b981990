"""Calibration: the fitting code on synthetic data, the profiles it writes, and the silicon CI gate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from gpusim.calibrate import fit
from gpusim.specs.software import SoftwareProfile, load_software
from gpusim.validate.errors import mape
from gpusim.validate.holdout import split_rows

GATE_ROWS, GATE_SEED = 60, 7
GATE_MAPE_TTFT, GATE_MAPE_TPOT = 0.53, 0.33
"""CI gate: silicon MAPE on a fixed 60-row sample (seed 7) of the held-out rows may not regress past
these, about a tenth above what it reached (0.485 / 0.293 on 58 predicted rows, 2026-12-02); the issue's
targets, 0.20 / 0.10 per partition, are judged by the report (`TARGETS` in gpusim/validate/silicon.py)."""


def test_fit_surrogate_recovers_known_constants() -> None:
    rng = np.random.default_rng(1)
    n = 300
    layers = rng.choice([32, 61, 94], n).astype(float)
    base = {"tpot": rng.uniform(5, 50, n), "ttft": rng.uniform(20, 2000, n)}
    slopes = {  # per unit of each constant: step (ms), layer (µs × layers), request (ms, TTFT only)
        "step": {"tpot": np.ones(n), "ttft": np.full(n, 2.0)},
        "layer": {"tpot": layers * 1e-3, "ttft": 2 * layers * 1e-3},
        "request": {"tpot": np.zeros(n), "ttft": np.ones(n)},
    }
    theta0 = {"step": 0.5, "layer": 0.0, "request": 0.0}
    true = {"step": 1.2, "layer": 40.0, "request": 35.0}
    measured = {m: base[m] + sum((true[k] - theta0[k]) * slopes[k][m] for k in true) for m in base}
    got = fit.fit_surrogate(base, slopes, measured, theta0)
    assert got == pytest.approx(true, rel=2e-3)
    # Never negative, however fast the measurements are.
    fast = {m: v / 10 for m, v in base.items()}
    assert all(v >= 0 for v in fit.fit_surrogate(base, slopes, fast, theta0).values())


def test_split_rows_is_seeded_disjoint_and_thirty_percent() -> None:
    rows = pd.DataFrame({"id": range(1000)})
    train, held = split_rows(rows)
    assert len(held) == 300 and set(train["id"]).isdisjoint(held["id"])
    assert split_rows(rows)[1]["id"].tolist() == held["id"].tolist()
    assert split_rows(rows, seed=1)[1]["id"].tolist() != held["id"].tolist()


def test_mape_ignores_missing_predictions() -> None:
    assert mape(np.array([110.0, np.nan, 90.0]), np.array([100.0, 5.0, 100.0])) == pytest.approx(0.1)
    assert mape(np.array([np.nan]), np.array([1.0])) is None


def test_write_profile_round_trips_with_overrides_and_calibration(tmp_path) -> None:
    base = load_software("trtllm")
    arch = {fit.BASE_ARCH: {"gemm_efficiency_fp8": 0.5, "gemm_kernel_us": 11.0},
            "hopper": {"gemm_efficiency_fp8": 0.45, "gemm_kernel_us": 11.0}}
    block = fit.calibration_block("gpusim calibrate --profile x", "synthetic", {"mape_tpot": 0.123456}, {})
    path = fit.write_profile("x", base, arch, {"request_overhead_ms": 40.0}, block, tmp_path / "x.yaml")
    prof = SoftwareProfile.model_validate(yaml.safe_load(path.read_text()))
    assert prof.id == "x" and prof.gemm_efficiency("fp8") == 0.5 and prof.value("request_overhead_ms") == 40.0
    assert prof.for_architecture("hopper").gemm_efficiency("fp8") == 0.45
    assert "gemm_kernel_us" not in prof.overrides["hopper"]  # equal to the base: not repeated
    assert prof.calibration["fit"]["mape_tpot"] == 0.123
    later = fit.calibration_block("gpusim calibrate --profile y --no-ops", "synthetic", {}, {})
    again = fit.write_profile("y", prof, arch, {}, later, tmp_path / "y.yaml")  # overrides kept, not re-fitted
    kept = SoftwareProfile.model_validate(yaml.safe_load(again.read_text())).overrides["hopper"]["gemm_efficiency_fp8"]
    assert kept.source == prof.overrides["hopper"]["gemm_efficiency_fp8"].source


def test_a_partial_op_fit_keeps_the_other_overrides(tmp_path) -> None:
    """`calibrate --op-families moe` fits MoE constants only: the profile's other per-architecture values stay."""
    base = load_software("trtllm")
    fitted = {fit.BASE_ARCH: {"moe_kernel_us_fp8": 9.0}, "hopper": {"moe_kernel_us_fp8": 45.0}}
    merged = fit.with_kept_overrides(base, fitted)
    assert merged[fit.BASE_ARCH] == {"moe_kernel_us_fp8": 9.0}
    assert merged["hopper"]["moe_kernel_us_fp8"] == 45.0
    assert merged["hopper"]["moe_efficiency_fp8"] == base.overrides["hopper"]["moe_efficiency_fp8"].value
    assert merged["blackwell"] == {k: v.value for k, v in base.overrides["blackwell"].items()}
    block = fit.calibration_block("gpusim calibrate --profile x --op-families moe", "synthetic", {}, {})
    prof = SoftwareProfile.model_validate(yaml.safe_load(
        fit.write_profile("x", base, merged, {}, block, tmp_path / "x.yaml").read_text()))
    assert prof.moe_kernel_s("fp8") == pytest.approx(9e-6)
    hopper = prof.for_architecture("hopper")
    assert hopper.moe_kernel_s("fp8") == pytest.approx(45e-6)
    assert hopper.value("moe_inter_half_fp8") == base.for_architecture("hopper").value("moe_inter_half_fp8")


def test_fit_ops_limited_to_families_fits_only_their_constants() -> None:
    from gpusim.calibrate import kernels

    if kernels.aic_data_dir() is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    values, errors = fit.fit_ops(load_software("vllm"), "vllm", max_rows=40, systems=["b200_sxm"], families=("moe",))
    assert set(values) == {"blackwell"} and set(errors["b200_sxm"]) <= {"moe_bf16", "moe_fp8", "moe_fp4"}
    assert {"moe_kernel_us", "moe_kernel_us_fp8", "moe_efficiency_fp8"} <= set(values["blackwell"])
    assert all(k.startswith("moe_") for k in values["blackwell"])


def test_fit_ops_fits_an_architectures_systems_together_as_the_pooled_kernel_fit_does() -> None:
    from gpusim.calibrate import kernels

    data = kernels.aic_data_dir()
    if data is None:
        pytest.skip("aiconfigurator-core is not installed (optional calibration extra)")
    hopper = ("h100_sxm", "h200_sxm")
    values, errors = fit.fit_ops(load_software("vllm"), "vllm", max_rows=30, systems=hopper, families=("allreduce",))
    pooled = kernels.calibrate_architectures(data, hopper, max_rows=30, backend="vllm", families=("allreduce",))
    assert set(values) == {"hopper"} and set(errors) == set(hopper)
    assert values["hopper"] == pytest.approx(pooled[0]["fitted"], rel=1e-6)


def test_table_timing_constants_are_written_apart_and_win_on_every_architecture(tmp_path) -> None:
    base = load_software("trtllm")
    over = {fit.BASE_ARCH: {}, "hopper": {"layer_overhead_us": 77.0}}
    block = fit.calibration_block("gpusim calibrate --profile x --no-ops --timing table", "synthetic", {}, {})
    path = fit.write_profile("x", base, over, {"layer_overhead_us": 5.0, "step_overhead_us": 60.0}, block,
                             tmp_path / "x.yaml", timing="table")
    prof = SoftwareProfile.model_validate(yaml.safe_load(path.read_text()))
    assert prof.value("layer_overhead_us") == base.value("layer_overhead_us")  # the roofline's kept
    assert prof.for_architecture("hopper").value("layer_overhead_us") == 77.0
    assert prof.calibration == base.calibration and prof.table_calibration["command"].endswith("--timing table")
    table = prof.for_timing("table")
    assert table.value("step_overhead_us") == 60.0
    assert table.for_architecture("hopper").value("layer_overhead_us") == 5.0
    assert prof.for_timing("roofline") is prof


def test_profiles_for_every_backend_and_round() -> None:
    from gpusim.validate.mlperf import software_for_round
    from gpusim.validate.silicon import row_software

    assert row_software({"backend": "vllm"})[0] == "vllm" and row_software({"backend": "sglang"})[0] == "sglang"
    assert row_software({"backend": "other"}) == ("trtllm", "backend other has no software profile: trtllm used")
    assert software_for_round("v6.1")[0] == "trtllm" and software_for_round("v5.1")[0] == "trtllm-v5.1"
    assert software_for_round("v4.1")[0] == "trtllm-v5.1"
    for name in ("trtllm", "trtllm-v5.1", "vllm", "sglang"):
        cal = load_software(name).calibration
        assert cal and {"command", "date", "data", "fit", "held_out"} <= set(cal)


def test_silicon_ci_gate(shared_dir) -> None:
    """A fixed 60-row sample of the held-out rows may not regress past the gate (all of them:
    docs/validation/silicon)."""
    from gpusim.validate.silicon import validate_silicon

    path = shared_dir / "reference" / "silicon_sample.csv"
    if not path.is_file():
        pytest.skip("no silicon sample")
    s = validate_silicon(path, sample=GATE_ROWS, workers=2, seed=GATE_SEED, held_out=True).summary
    assert s["rows_predicted"] >= 0.7 * GATE_ROWS
    assert s["mape_ttft"] <= GATE_MAPE_TTFT, s["mape_ttft"]
    assert s["mape_tpot"] <= GATE_MAPE_TPOT, s["mape_tpot"]


def test_mlperf_offline_rows_pin_a_constant_the_silicon_rows_do_not_see() -> None:
    # Silicon rows: the host time per sequence moves neither metric (small batches); the front-end time
    # explains their TTFT. Offline rows: seconds per token grow 2e-6 per µs of host time.
    n = 40
    train = pd.DataFrame({"silicon_ttft_ms": np.full(n, 120.0), "silicon_tpot_ms": np.full(n, 10.0)})

    def pred(ttft: float) -> pd.DataFrame:
        return pd.DataFrame({"status": ["ok"] * n, "predicted_ttft_ms": np.full(n, ttft),
                             "predicted_tpot_ms": np.full(n, 10.0)})

    step = fit.FITTED["host_seq_us"]
    base_s = np.array([1e-4, 2e-4, 4e-4])
    slope = np.array([2e-6, 4e-6, 8e-6])
    measured = base_s + (50.0 - 30.0) * slope
    offline = fit.OfflineFit(base_s, {"host_seq_us": base_s + step * slope}, measured)
    theta0 = {"host_seq_us": 30.0, "request_overhead_ms": 0.0}
    got, errors = fit.fit_requests(train, pred(100.0), {"host_seq_us": pred(100.0)}, theta0, offline)
    assert got["host_seq_us"] == pytest.approx(50.0, rel=1e-6)
    assert got["request_overhead_ms"] == pytest.approx(20.0, rel=1e-6)
    assert errors["mlperf_offline_rows"] == 3 and errors["mape_mlperf_offline"] == pytest.approx(0.0, abs=1e-9)
    # Without them the host time is free: nothing moves it away from where the LP starts its basis.
    alone, errors = fit.fit_requests(train, pred(100.0), {"host_seq_us": pred(100.0)}, theta0)
    assert "mape_mlperf_offline" not in errors and alone["host_seq_us"] != pytest.approx(50.0)


def test_throughput_mape_is_the_published_ratio_error() -> None:
    # predicted twice as fast (half the seconds per token): throughput ratio 2, error 100%
    assert fit.throughput_mape(np.array([0.5, 1.0]), np.array([1.0, 1.0])) == pytest.approx(0.5)


def test_offline_rows_are_the_rounds_of_the_fitted_profile_on_searched_deployments(tmp_path) -> None:
    from gpusim.calibrate.offline import offline_rows, predict_offline

    csv = tmp_path / "published.csv"
    row = {"system": "h100", "accelerator": "NVIDIA H100-SXM-80GB", "num_accelerators": 1,
           "benchmark": "llama3.1-8b", "scenario": "Offline", "value": 3000.0, "unit": "tokens/s"}
    pd.DataFrame([
        {**row, "round": "v6.1"},
        {**row, "round": "v6.1", "value": 6000.0},  # a second submitter: same setting, searched once
        {**row, "round": "v4.1"},  # runs with trtllm-v5.1
        {**row, "round": "v6.1", "scenario": "Server"},  # not fitted
        {**row, "round": "v6.1", "accelerator": "AMD Instinct MI355X"},  # no profile
    ]).to_csv(csv, index=False)
    rows = offline_rows(csv, "trtllm", "trtllm", duration_s=30.0, workers=1)
    assert [r.row.value for r in rows] == [3000.0, 6000.0]
    assert rows[0].deployment == rows[1].deployment and rows[0].deployment.software == "trtllm"
    assert rows[1].measured_s_per_token == pytest.approx(1 / 6000.0)
    s = predict_offline(rows, 30.0, workers=1)
    assert s[0] == s[1] and 0 < s[0] < 1e-2  # seconds per token per GPU of one simulated run
