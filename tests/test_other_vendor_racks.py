"""Racks beyond NVIDIA's: AMD Helios (72x MI455X, UALink over Ethernet) and a Google TPU7x cube (64 chips on a
4x4x4 ICI torus). Their fabrics against hand-worked collective times from the published link rates, a short
end-to-end run of each on its own serving stack, their grades on show, and clean errors for broken copies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_amd import drop

from gpusim.cli import main
from gpusim.perf.collectives import allreduce_time, alltoall_time
from gpusim.specs.catalog import clear_cache
from gpusim.specs.hardware import load_hardware
from gpusim.validate.datasets import HELD_OUT_CSV, MLPERF_CSV

REPO = Path(__file__).resolve().parents[1]


# ---- the fabrics, by hand ---------------------------------------------------------------------------------
def test_tpu7x_ici_collectives_by_hand():
    """Google: 1.2 TB/s of ICI per chip both ways over six links, 100 GB/s a link each way.
    - TP8 all-reduce of 80 MB: 8 chips fill a wrapped axis of 4 and a line of 2, 3 links, 300 GB/s:
      2 · 7/8 · 80e6 / 300e9 = 466.67 us;
    - TP4 (one wrapped axis, 2 links, 200 GB/s): 2 · 3/4 · 80e6 / 200e9 = 600 us;
    - EP64 all-to-all over the whole cube of 1,000 tokens × 8 experts × 7,168 × 1 B (57.344 MB per chip):
      63/64 of it leaves the chip; the cube's bisection lets (63/64) / (1/2) = 1.96875 links' worth through,
      196.875 GB/s: 57.344e6 · 63/64 / 196.875e9 = 286.72 us."""
    hw = load_hardware("tpu7x-cube")
    assert (hw.nvlink.topology, hw.nvlink.torus_dims, hw.nvlink.links) == ("torus", [4, 4, 4], 6)
    assert allreduce_time(80e6, 8, hw.domain_bandwidth(7), 0.0) == pytest.approx(466.667e-6, rel=1e-5)
    assert allreduce_time(80e6, 4, hw.domain_bandwidth(3), 0.0) == pytest.approx(600e-6)
    ep = hw.domain_bandwidth(63, alltoall=True)
    assert alltoall_time(1000, 8, 7168, 1, 64, ep, 0.0) == pytest.approx(286.72e-6)


def test_helios_is_switched_every_peer_at_the_full_1_8_tb_per_s():
    """AMD: 3.6 TB/s per GPU both ways through 12 UALoE switches, one hop: 1.8 TB/s each way to any number of
    peers. An all-reduce of 80 MB over 8 GPUs: 2 · 7/8 · 80e6 / 1.8e12 = 77.78 us; over 72: 2 · 71/72 · ... =
    87.65 us (only the ring's share grows)."""
    hw = load_hardware("helios-mi455x")
    assert hw.domain_bandwidth(1) == hw.domain_bandwidth(71) == pytest.approx(1.8e12)
    assert allreduce_time(80e6, 8, hw.domain_bandwidth(7), 0.0) == pytest.approx(77.778e-6, rel=1e-4)
    assert allreduce_time(80e6, 72, hw.domain_bandwidth(71), 0.0) == pytest.approx(87.654e-6, rel=1e-4)


# ---- end to end -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("system", "gpus", "software"), [("helios-mi455x", 72, "vllm-rocm"),
                                                           ("tpu7x-cube", 64, "vllm-tpu")])
def test_each_rack_runs_end_to_end_on_its_own_stack(capsys, system, gpus, software):
    code = main(["run", "--hardware", system, "--benchmark", "llama2-70b", "--scenario", "offline",
                 "--samples", "300", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    summary = json.loads(out)
    assert summary["num_gpus"] == gpus and summary["completed_requests"] == 300
    assert summary["output_tokens_per_s"] > 0
    deployment = json.dumps(summary["deployment"])
    assert software in deployment
    if system == "tpu7x-cube":  # no FP4 path on the MXU: the rule deployment serves FP8 weights
        assert '"weights": "fp8"' in deployment


@pytest.mark.parametrize("system", ["helios-mi455x", "tpu7x-cube"])
def test_show_hardware_prints_every_grade(capsys, system):
    assert main(["show", "hardware", system]) == 0
    out = capsys.readouterr().out
    assert "grade: D" in out and "grade: A" in out


# ---- loading errors ---------------------------------------------------------------------------------------
@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `GPUSIM_PATH` folder whose copies shadow the shipped TPU7x and Helios profiles."""
    for kind, names in (("systems", ("tpu7x-cube", "helios-mi455x")), ("gpus", ("tpu7x", "mi455x")),
                        ("fabrics", ("ici-tpu7x", "ualink-helios"))):
        (tmp_path / kind).mkdir()
        for name in names:
            shutil.copy(REPO / "hardware_profiles" / kind / f"{name}.yaml", tmp_path / kind)
    monkeypatch.setenv("GPUSIM_PATH", str(tmp_path))
    clear_cache()
    yield tmp_path
    clear_cache()


def one_line_error(capsys, system: str) -> str:
    code = main(["run", "--hardware", system, "--benchmark", "llama2-70b", "--samples", "20"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(("system", "kind", "name", "field"), [
    ("tpu7x-cube", "fabrics", "ici-tpu7x", "torus_dims"),
    ("tpu7x-cube", "gpus", "tpu7x", "hbm_bandwidth_tbps"),
    ("helios-mi455x", "fabrics", "ualink-helios", "bandwidth_gbps_per_dir"),
    ("helios-mi455x", "gpus", "mi455x", "dense_tflops"),
])
def test_an_incomplete_profile_is_one_line_naming_file_and_field(lab, capsys, system, kind, name, field):
    drop(lab / kind / f"{name}.yaml", field)
    err = one_line_error(capsys, system)
    assert f"{name}.yaml" in err and field in err


def test_a_cube_larger_than_its_torus_is_refused(lab, capsys):
    system = lab / "systems" / "tpu7x-cube.yaml"
    two_cubes = system.read_text().replace("gpus: 64\nnvlink_domain_gpus: 64", "gpus: 128\nnvlink_domain_gpus: 128")
    system.write_text(two_cubes)
    err = one_line_error(capsys, "tpu7x-cube")
    assert "tpu7x-cube.yaml" in err and "nvlink_domain_gpus" in err and "64" in err


# ---- the cross-vendor table (docs/comparisons.md) ---------------------------------------------------------
def test_the_cross_vendor_table_names_both_sides_and_divides_published_medians(benchmark_script, tmp_path):
    """AMD's 8x MI355X Llama 2 70B Offline (106,517 tokens/s: 13,314.6 per GPU) against two invented B200 rows
    of 12,000 and 14,000 per GPU (median 13,000): published ratio 13,314.6 / 13,000 = 1.02; predicted 9,000 /
    10,000 = 0.90; 0.90 / 1.0242 = 0.88. Each side's deployment and stack is named."""
    cmp = benchmark_script("comparisons")
    nvidia = tmp_path / "nvidia.csv"
    head = "round,submitter,system,accelerator,num_accelerators,benchmark,scenario,metric,value,unit,software,source"
    rows = [f"v6.1,X,{s},NVIDIA B200,8,llama2-70b-99.9,Offline,throughput,{v},tokens/s,trt,test"
            for s, v in (("a", 96000), ("b", 112000))]
    nvidia.write_text("\n".join([head, *rows]) + "\n")
    pub = cmp.published_medians(nvidia, REPO / "reference" / "mlperf_other_vendors.csv")
    assert pub[("mi355x-platform", "llama2-70b", "offline")] == pytest.approx(106517 / 8)
    assert pub[("b200-hgx", "llama2-70b", "offline")] == pytest.approx(13000)
    pred = {("mi355x-platform", "llama2-70b", "offline"): cmp.Predicted(9000.0, "amd-dep", None, None, "vllm-rocm"),
            ("b200-hgx", "llama2-70b", "offline"): cmp.Predicted(10000.0, "nv-dep", None, None, "trtllm")}
    lines = cmp.cross_vendor(pub, pred, {("mi355x-platform", "b200-hgx", "llama2-70b"): 1.25})
    row = next(line for line in lines if line.startswith("| mi355x-platform / b200-hgx"))
    assert row == ("| mi355x-platform / b200-hgx | llama2-70b | offline | amd-dep (vllm-rocm) | nv-dep (trtllm) | "
                   "0.90 | 1.25 | 1.02 | 0.88 |")
    assert not any(line.startswith("| mi355x-platform / b300-hgx") for line in lines)  # no B300 prediction given
    assert any(line.startswith("| tpu7x-cube | ") and "FLOPS A" in line for line in lines)


def test_nvidia_rows_beyond_the_calibration_set_give_vera_rubin_a_published_ratio(benchmark_script):
    """The comparison page reads reference/mlperf_held_out.csv beside the calibration set (its default `--other`):
    Vera Rubin NVL72's DeepSeek-R1 Offline, 1,183,326.85 tokens/s on 72 GPUs, is its published median, and the
    page divides it by GB300 NVL72's v6.1 median (679,740 tokens/s on 72 GPUs and 75,918.2 on 8: 9,465.6 per GPU)
    for the VR / GB300 ratio."""
    cmp = benchmark_script("comparisons")
    pub = cmp.published_medians(MLPERF_CSV, HELD_OUT_CSV)
    assert pub[("vr-nvl72", "deepseek-r1", "offline")] == pytest.approx(1183326.85 / 72)
    pred = {("vr-nvl72", "deepseek-r1", "offline"): cmp.Predicted(17.4, "vr", None, None, "trtllm"),
            ("gb300-nvl72", "deepseek-r1", "offline"): cmp.Predicted(10.0, "gb", None, None, "trtllm")}
    (r,) = [r for r in cmp.ratios(cmp.PAIRS, pred, pub) if r.a == "vr-nvl72"]
    assert r.predicted == pytest.approx(1.74)
    assert r.published == pytest.approx(1183326.85 / 72 / ((679740.0 / 72 + 75918.2 / 8) / 2))
