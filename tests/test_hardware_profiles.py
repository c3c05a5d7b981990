"""The hardware profiles in hardware_profiles/: they load, cross-reference, and match the reference data."""

from __future__ import annotations

import math

import pytest
import yaml

from gpusim.errors import InputError
from gpusim.specs.hardware import (
    PROFILES,
    all_profiles,
    load_fabric,
    load_gpu,
    load_hardware,
    system_names,
)
from gpusim.specs.sourced import Sourced

SYSTEMS = system_names()
GPUS = all_profiles()["gpus"]
FABRICS = all_profiles()["fabrics"]

EXPECTED_SYSTEMS = {"h100-hgx", "h200-hgx", "b200-hgx", "b300-hgx", "gb200-nvl72", "gb300-nvl72", "vr-nvl72",
                    "jetson-agx-thor", "mi355x-platform", "helios-mi455x", "tpu7x-cube"}
EXPECTED_GPUS = {"h100-sxm", "h200-sxm", "b200", "gb200", "blackwell-ultra", "gb300", "rubin", "thor", "mi355x",
                 "mi455x", "tpu7x"}
EXPECTED_FABRICS = {"nvlink4", "nvlink5", "nvlink6", "cx7-400g", "cx8-800g", "cx9-1600g", "thor-soc", "eth-4x25g",
                    "xgmi-mi350", "pollara-400g", "ualink-helios", "vulcano-800g", "ici-tpu7x", "dcn-tpu7x"}
NO_FP4 = {"hopper", "tpu7"}  # no FP4 tensor path: Hopper, and TPU7x's MXU (FP8 x FP8 at most)

# our GPU id -> the id in ../shared/reference/hardware_specs.yaml
REFERENCE_GPU_IDS = {
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "b200": "b200_hgx",
    "gb200": "gb200_nvl72_gpu",
    "blackwell-ultra": "b300_hgx",
    "gb300": "gb300_nvl72_gpu",
    "rubin": "rubin_vr_nvl72_gpu",
}

NVLINK_GBPS_PER_DIR = {"nvlink4": 450, "nvlink5": 900, "nvlink6": 1800}
NVLINK_BY_ARCH = {
    "hopper": "nvlink4", "blackwell": "nvlink5", "blackwell_ultra": "nvlink5", "rubin": "nvlink6",
}
IB_GBIT = {"cx7-400g": 400, "cx8-800g": 800, "cx9-1600g": 1600}
FIRST_PARTY_SINCE = {("rubin", "tdp_w"): "VR-NVL72_VR-288GB_aarch64x72_TRT.json"}
"""Figures the profile takes from a first-party source the shared reference did not have (it graded its own
figure from secondary sources): (GPU, field) -> the file the profile's source names."""


def _sourced_fields(spec) -> list[tuple[str, Sourced]]:
    out = []
    for name, value in spec:
        if isinstance(value, Sourced):
            out.append((name, value))
        elif isinstance(value, dict):
            out += [(f"{name}.{k}", v) for k, v in value.items() if isinstance(v, Sourced)]
    return out


def test_profile_sets_are_complete():
    assert set(SYSTEMS) == EXPECTED_SYSTEMS
    assert set(GPUS) == EXPECTED_GPUS
    assert set(FABRICS) == EXPECTED_FABRICS


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_system_loads_with_its_gpu_and_fabrics(name):
    hw = load_hardware(name)
    assert hw.id == name == hw.system.id
    assert hw.gpu.id == hw.system.gpu in GPUS
    assert hw.nvlink.id == hw.system.nvlink in FABRICS
    assert hw.scaleout.id == hw.system.scaleout in FABRICS
    assert hw.nvlink.kind in {"nvlink", "xgmi", "ualink", "ici"}  # scale-up: NVLink, Infinity Fabric, UALink, ICI
    assert hw.scaleout.kind in {"infiniband", "ethernet"}
    # the GPU's own links are the ones the system uses
    assert hw.gpu.nvlink == hw.system.nvlink
    assert hw.gpu.scaleout_nic == hw.system.scaleout
    assert hw.system.gpus % hw.system.nvlink_domain_gpus == 0
    if hw.system.form_factor in ("hgx", "oam"):
        assert (hw.system.gpus, hw.domain_gpus) == (8, 8)
    elif hw.system.form_factor == "edge":
        assert (hw.system.gpus, hw.domain_gpus) == (1, 1)
    elif hw.system.cpu in {"grace", "vera"}:  # NVL72: one Grace or Vera per two GPUs
        assert (hw.system.gpus, hw.domain_gpus, hw.system.cpus) == (72, 72, 36)
    else:  # another vendor's rack-scale domain: one domain, a host per 4 GPUs (Helios' trays, TPU7x's VMs)
        assert hw.system.gpus == hw.domain_gpus and hw.system.cpus * 4 == hw.system.gpus
    assert load_hardware(name, systems=4).num_gpus == 4 * hw.system.gpus


@pytest.mark.parametrize("kind", ["gpus", "fabrics", "systems"])
def test_file_stem_is_the_id(kind):
    for path in sorted((PROFILES / kind).glob("*.yaml")):
        assert yaml.safe_load(path.read_text())["id"] == path.stem


@pytest.mark.parametrize("name", GPUS)
def test_gpu_references_resolve(name):
    gpu = load_gpu(name)
    load_fabric(gpu.nvlink)
    load_fabric(gpu.scaleout_nic)
    if gpu.variant_of is not None:
        assert gpu.variant_of in GPUS
        assert load_gpu(gpu.variant_of).architecture == gpu.architecture


def test_every_number_is_sourced_and_graded():
    specs = [load_gpu(g) for g in GPUS] + [load_fabric(f) for f in FABRICS]
    specs += [load_hardware(s).system for s in SYSTEMS]
    for spec in specs:
        fields = _sourced_fields(spec)
        assert fields, spec.id
        for field, s in fields:
            assert s.grade in {"A", "B", "C", "D"}, (spec.id, field)
            assert s.source.strip(), (spec.id, field)
            assert math.isfinite(s.value) and s.value > 0, (spec.id, field)
            if s.grade in {"C", "D"}:
                assert s.note, f"{spec.id}.{field}: a derived or assumed value needs a note"


def test_rubin_is_never_graded_as_a_datasheet_value():
    """Rubin numbers are preliminary (secondary copies of keynote figures)."""
    gpu = load_gpu("rubin")
    assert all(s.grade != "A" for _, s in _sourced_fields(gpu))
    assert load_fabric("nvlink6").bandwidth_gbps_per_dir.grade != "A"
    assert load_fabric("cx9-1600g").bandwidth_gbps_per_dir.grade != "A"


@pytest.mark.parametrize("name", GPUS)
def test_dense_tflops_ordering(name):
    t = {d: s.value for d, s in load_gpu(name).dense_tflops.items()}
    assert "bf16" in t and "fp8" in t
    assert t["fp8"] >= t["bf16"]
    if "fp4" in t:
        assert t["fp4"] >= t["fp8"]


def test_hopper_and_tpu_have_no_fp4():
    for name in GPUS:
        gpu = load_gpu(name)
        assert ("fp4" in gpu.dense_tflops) == (gpu.architecture not in NO_FP4), name
    assert not load_hardware("tpu7x-cube").supports("fp4")
    hw = load_hardware("h100-hgx")
    assert not hw.supports("fp4")
    assert hw.peak_flops("fp4") == hw.peak_flops("fp8") == 1979e12


@pytest.mark.parametrize("name", [s for s in SYSTEMS if load_hardware(s).domain_gpus > 1
                                  and load_hardware(s).nvlink.kind == "nvlink"])
def test_nvlink_bandwidth_matches_generation(name):
    hw = load_hardware(name)
    assert hw.nvlink.id == NVLINK_BY_ARCH[hw.gpu.architecture]
    assert hw.nvlink.bandwidth_gbps_per_dir.value == NVLINK_GBPS_PER_DIR[hw.nvlink.id]
    assert hw.nvlink_bandwidth == NVLINK_GBPS_PER_DIR[hw.nvlink.id] * 1e9
    assert hw.nvlink.sharp


@pytest.mark.parametrize("name", sorted(IB_GBIT))
def test_infiniband_bandwidth_is_line_rate_over_eight(name):
    fab = load_fabric(name)
    assert fab.kind == "infiniband"
    assert fab.bandwidth_gbps_per_dir.value == IB_GBIT[name] / 8
    assert fab.switch_latency_us is not None
    assert fab.switch_latency_us.value < fab.latency_us.value


@pytest.mark.parametrize(("system", "nic"), [
    ("h100-hgx", "cx7-400g"), ("h200-hgx", "cx7-400g"), ("b200-hgx", "cx7-400g"), ("gb200-nvl72", "cx7-400g"),
    ("b300-hgx", "cx8-800g"), ("gb300-nvl72", "cx8-800g"), ("vr-nvl72", "cx9-1600g"),
    ("mi355x-platform", "pollara-400g"),
])
def test_scaleout_nic_per_system(system, nic):
    assert load_hardware(system).system.scaleout == nic


def test_nvlink_is_faster_than_scaleout():
    for name in SYSTEMS:
        hw = load_hardware(name)
        assert hw.nvlink_bandwidth > hw.scaleout_bandwidth
        assert hw.nvlink.latency_us.value < hw.scaleout.latency_us.value


def test_gb300_nvl72_derived_by_hand():
    hw = load_hardware("gb300-nvl72")
    d = hw.derived()
    assert d["system_fp4_pflops"] == pytest.approx(72 * 15_000 / 1e3)  # 1,080 PF dense NVFP4
    assert d["system_fp8_pflops"] == pytest.approx(72 * 5_000 / 1e3)  # 360
    assert d["system_bf16_pflops"] == pytest.approx(72 * 2_500 / 1e3)  # 180
    assert d["system_hbm_tb"] == pytest.approx(72 * 284_208 * 2**20 / 1e12, rel=1e-4)  # nvidia-smi MiB
    assert d["system_hbm_bandwidth_tbps"] == pytest.approx(72 * 8.0)  # 576 TB/s
    assert d["system_nvlink_tbps_bidir"] == pytest.approx(2 * 900 * 72 / 1e3)  # 129.6 ("130 TB/s")
    assert d["system_scaleout_tbps_per_dir"] == pytest.approx(72 * 100 / 1e3)  # 72 x 800 Gb/s
    assert d["system_power_kw"] == 142
    assert hw.peak_flops("fp4") == 15_000e12
    assert hw.hbm_bandwidth == 8e12


def test_unknown_system_lists_valid_names():
    with pytest.raises(InputError) as exc:
        load_hardware("h900-hgx")
    msg = str(exc.value)
    assert "h900-hgx" in msg
    for name in SYSTEMS:
        assert name in msg


def test_nonpositive_system_count_is_rejected():
    with pytest.raises(InputError):
        load_hardware("h100-hgx", systems=0)


# ---------------------------------------------------------------- against ../shared/reference


@pytest.fixture
def reference_gpus(shared_dir) -> dict[str, dict]:
    data = yaml.safe_load((shared_dir / "reference" / "hardware_specs.yaml").read_text())
    return {g["id"]: g for g in data["gpus"]}


@pytest.mark.parametrize("name", sorted(REFERENCE_GPU_IDS))
def test_gpu_matches_reference(name, reference_gpus):
    ref = reference_gpus[REFERENCE_GPU_IDS[name]]
    gpu = load_gpu(name)
    for dtype in ("bf16", "fp8", "fp4"):
        expected = ref.get(f"{dtype}_dense_tflops")
        ours = gpu.dense_tflops.get(dtype)
        if expected is None:
            # the reference has no value: either unsupported (absent here) or our own estimate, graded D
            assert ours is None or ours.grade == "D", (name, dtype)
            if ref["architecture"] == "hopper":
                assert ours is None, (name, dtype)
        else:
            assert ours is not None and ours.value == expected, (name, dtype)
    assert gpu.hbm_bandwidth_tbps.value == ref["hbm_bandwidth_tbps"]
    if (name, "tdp_w") in FIRST_PARTY_SINCE:  # a better source than the reference's: named, and graded for it
        assert FIRST_PARTY_SINCE[name, "tdp_w"] in gpu.tdp_w.source and gpu.tdp_w.grade in ("A", "B")
    else:
        assert gpu.tdp_w.value == ref["tdp_w"]
    assert gpu.architecture == ref["architecture"]
    assert NVLINK_GBPS_PER_DIR[gpu.nvlink] == ref["nvlink_unidir_gbytes_per_s"]
    assert IB_GBIT[gpu.scaleout_nic] == ref["scaleout_gbit_per_s_per_gpu"]


@pytest.mark.parametrize("name", sorted(REFERENCE_GPU_IDS))
def test_hbm_capacity_is_the_usable_figure(name, reference_gpus):
    ref = reference_gpus[REFERENCE_GPU_IDS[name]]
    ours = load_gpu(name).hbm_capacity_gib.value
    if "hbm_capacity_usable_gib" in ref:
        assert ours == ref["hbm_capacity_usable_gib"]
    elif "hbm_capacity_usable_mib" in ref:
        assert ours == pytest.approx(ref["hbm_capacity_usable_mib"] / 1024, abs=0.01)
    else:  # only the marketing GB figure: converted to GiB
        assert ours == pytest.approx(ref["hbm_capacity_gb"] * 1e9 / 2**30, abs=0.01)


def test_thor_matches_reference_with_dense_from_sparse(reference_gpus):
    """Thor's headline FP4/FP8 figures are sparse: the profile keeps half of them, the bandwidth and power as
    published, and a single GPU without NVLink."""
    ref = reference_gpus["jetson_agx_thor_t5000"]
    gpu, hw = load_gpu("thor"), load_hardware("jetson-agx-thor")
    assert gpu.dense_tflops["fp4"].value == ref["fp4_sparse_tflops"] / 2
    assert gpu.dense_tflops["fp8"].value == pytest.approx(ref["fp8_sparse_tflops"] / 2, abs=1)
    assert gpu.hbm_bandwidth_tbps.value == ref["memory_bandwidth_tbps"]
    assert gpu.tdp_w.value == ref["tdp_w_max"]
    assert gpu.hbm_capacity_gib.value < ref["memory_capacity_gb"] * 1e9 / 2**30  # unified: the CPU takes a share
    assert (hw.num_gpus, hw.domain_gpus) == (1, 1)
