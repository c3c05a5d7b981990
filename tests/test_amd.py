"""AMD Instinct MI355X: the Infinity Fabric full mesh (one link per GPU pair) against hand-worked times, clean
loading errors for incomplete AMD profiles, and a short end-to-end run of the mi355x-platform system.

Every expected time below is worked out by hand in its comment from the published link rates, not read back
from the code under test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import simpy
import yaml
from test_perf import software

from gpusim.cli import main
from gpusim.deploy import rule_deployment
from gpusim.perf.collectives import allreduce_time, p2p_time
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.sim.fabric import Fabric
from gpusim.sim.topology import Placement, Topology
from gpusim.specs.catalog import clear_cache
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import FabricSpec, GpuSpec, Hardware, SystemSpec, load_fabric, load_hardware
from gpusim.specs.model import ModelSpec, load_model
from gpusim.specs.sourced import Sourced

REPO = Path(__file__).resolve().parents[1]


def S(v: float) -> Sourced:
    return Sourced(value=v, source="test", grade="D")


# ---- the shipped profile --------------------------------------------------------------------------------
def test_the_mi355x_mesh_is_seven_links_of_76_8_gb_per_s():
    """AMD's 1,075.2 GB/s per GPU counts both directions of 7 links: 537.6 GB/s one way, 76.8 per link."""
    hw = load_hardware("mi355x-platform")
    assert (hw.nvlink.topology, hw.nvlink.links, hw.nvlink.sharp) == ("full_mesh", 7, False)
    assert hw.nvlink_bandwidth == pytest.approx(537.6e9)
    assert hw.domain_bandwidth(1) == pytest.approx(76.8e9)  # one GPU pair: one link
    assert hw.domain_bandwidth(3) == pytest.approx(230.4e9)  # a 4-GPU group: 3 links
    assert hw.domain_bandwidth(7) == pytest.approx(537.6e9)  # all 8 GPUs: every link
    assert hw.domain_bandwidth(20) == pytest.approx(537.6e9)  # never more than the 7 links
    assert hw.derived()["system_nvlink_tbps_bidir"] == pytest.approx(8.6016)  # 8 x 1,075.2 GB/s


def test_mi355x_collective_and_p2p_times_by_hand():
    """With the published rates (alpha 0.6 us for the point-to-point send, none for the collectives here):

    p2p of 76.8 MB between two GPUs crosses their one link: 76.8e6 / 76.8e9 = 1.000 ms, + 0.6 us = 1.0006 ms.
    A switched fabric of the same 537.6 GB/s per GPU would take 76.8e6 / 537.6e9 = 0.142857 ms.
    all-reduce of 537.6 MB over 8 GPUs, ring over 7 links at 537.6 GB/s: 2 * 7/8 * 1.000 ms = 1.75 ms.
    all-reduce of 76.8 MB over 2 GPUs, their one link at 76.8 GB/s: 2 * 1/2 * 1.000 ms = 1.000 ms.
    all-reduce of 230.4 MB over 4 GPUs, 3 links at 230.4 GB/s: 2 * 3/4 * 1.000 ms = 1.5 ms.
    """
    hw = load_hardware("mi355x-platform")
    assert p2p_time(76.8e6, hw.domain_bandwidth(1), 0.6e-6) == pytest.approx(1.0006e-3)
    assert p2p_time(76.8e6, load_hardware("mi355x-platform").nvlink_bandwidth, 0.0) == pytest.approx(0.142857e-3,
                                                                                                     rel=1e-5)
    assert allreduce_time(537.6e6, 8, hw.domain_bandwidth(7), 0.0) == pytest.approx(1.75e-3)
    assert allreduce_time(76.8e6, 2, hw.domain_bandwidth(1), 0.0) == pytest.approx(1.0e-3)
    assert allreduce_time(230.4e6, 4, hw.domain_bandwidth(3), 0.0) == pytest.approx(1.5e-3)


def test_switched_fabrics_are_unchanged():
    """Every NVLink profile stays switched: any peer count gets the full per-GPU bandwidth."""
    for name in ("nvlink4", "nvlink5", "nvlink6", "thor-soc"):
        fabric = load_fabric(name)
        assert fabric.topology == "switched" and fabric.links is None
    hw = load_hardware("b200-hgx")
    assert hw.domain_bandwidth(1) == hw.domain_bandwidth(7) == hw.nvlink_bandwidth == 900e9


# ---- the step model on a toy full mesh ------------------------------------------------------------------
H, LAYERS = 1024, 2


def toy(topology: str) -> Hardware:
    """8 GPUs, 1 TB/s HBM, a 700 GB/s domain fabric: switched, or 7 links of 100 GB/s; 1 us fabric hop."""
    gpu = GpuSpec(id="toy", name="Toy", architecture="toy", dense_tflops={"bf16": S(100), "fp8": S(200)},
                  hbm_capacity_gib=S(80), hbm_bandwidth_tbps=S(1.0), nvlink="mesh", scaleout_nic="ib", tdp_w=S(100))
    links = 7 if topology == "full_mesh" else None
    mesh = FabricSpec(id="mesh", name="Mesh", kind="xgmi", bandwidth_gbps_per_dir=S(700), latency_us=S(1),
                      topology=topology, links=links)
    ib = FabricSpec(id="ib", name="IB", kind="infiniband", bandwidth_gbps_per_dir=S(10), latency_us=S(5))
    system = SystemSpec(id="toy8", name="Toy 8", gpu="toy", gpus=8, nvlink_domain_gpus=8, nvlink="mesh",
                        scaleout="ib", power_kw=S(1), form_factor="oam")
    return Hardware(system=system, gpu=gpu, nvlink=mesh, scaleout=ib)


def dense_model() -> ModelSpec:
    return ModelSpec(id="tiny", name="Tiny", hf_id="-", num_layers=LAYERS, hidden_size=H, num_attention_heads=8,
                     num_kv_heads=8, head_dim=128, vocab_size=1024, intermediate_size=4096, source="test")


def comm(hw: Hardware, dep: Deployment, op: str) -> float:
    """Seconds of `op` in a decode step of 100 sequences (100 tokens)."""
    cm = StepCostModel(hw, dense_model(), dep, software(step_us=0.0))
    return cm.breakdown(BatchShape(decode_seqs=100, decode_context=100)).by_op[op]


def test_tp_allreduce_on_a_full_mesh_uses_the_groups_links():
    """100 tokens x 1,024 x 2 B = 204,800 B per all-reduce, 2 per layer x 2 layers = 4 calls.

    TP4 on the mesh: 3 links x 100 GB/s x 0.5 = 150 GB/s; 2*3/4 * 204,800 / 150e9 = 2.048 us, + 2*3 * 1 us
    = 8.048 us a call, 32.192 us a step. Switched (700 x 0.5 = 350 GB/s): 0.877714 us + 6 us = 6.877714 us a
    call, 27.510857 us a step.
    TP2 on the mesh: 1 link, 50 GB/s; 2*1/2 * 204,800 / 50e9 = 4.096 us, + 2 us = 6.096 us, 24.384 us a step.
    """
    assert comm(toy("full_mesh"), Deployment(tp=4), "tp_allreduce") == pytest.approx(32.192e-6)
    assert comm(toy("switched"), Deployment(tp=4), "tp_allreduce") == pytest.approx(27.510857e-6)
    assert comm(toy("full_mesh"), Deployment(tp=2), "tp_allreduce") == pytest.approx(24.384e-6)


def test_pipeline_send_on_a_full_mesh_crosses_one_link():
    """PP2: one send of 204,800 B over one 100 GB/s link at full rate, + the fabric's 1 us: 3.048 us.
    Switched, 700 GB/s: 0.292571 us + 1 us = 1.292571 us."""
    assert comm(toy("full_mesh"), Deployment(pp=2), "pp_send_recv") == pytest.approx(3.048e-6)
    assert comm(toy("switched"), Deployment(pp=2), "pp_send_recv") == pytest.approx(1.292571e-6)


def finish_times(topo: Topology, sends: dict[str, tuple[Placement, Placement]], size: float) -> dict[str, float]:
    """When each named transfer of `size` bytes (source, destination), all started at once, ends."""
    env = simpy.Environment()
    fabric = Fabric(env)
    done: dict[str, float] = {}

    def send(name: str, src: Placement, dst: Placement):
        links, latency = topo.path(src, dst)
        yield fabric.transfer(links, size, latency)
        done[name] = env.now

    for name, (src, dst) in sends.items():
        env.process(send(name, src, dst))
    env.run()
    return done


def test_kv_transfer_between_two_one_gpu_instances_takes_their_one_link():
    """A 76.8 MB KV cache from GPU 0 to GPU 1 of the MI355X platform: the pair's link carries 76.8 GB/s, so
    1.000 ms after the 0.6 us hop latency; two GPUs sending to GPU 1 at once share its 537.6 GB/s ingress
    only through their own links, so each still takes 1.000 ms (+ 0.6 us)."""
    topo = Topology.from_hardware(load_hardware("mi355x-platform"))
    a, b, c = (Placement(g, 1, 0, 0) for g in (0, 1, 2))
    done = finish_times(topo, {"a": (a, b), "c": (c, b)}, 76.8e6)
    assert done["a"] == pytest.approx(1.0006e-3) and done["c"] == pytest.approx(1.0006e-3)


# ---- loading errors -------------------------------------------------------------------------------------
@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `GPUSIM_PATH` folder whose copies shadow the shipped MI355X profiles."""
    for kind, name in (("systems", "mi355x-platform"), ("gpus", "mi355x"), ("fabrics", "xgmi-mi350")):
        (tmp_path / kind).mkdir()
        shutil.copy(REPO / "hardware_profiles" / kind / f"{name}.yaml", tmp_path / kind)
    monkeypatch.setenv("GPUSIM_PATH", str(tmp_path))
    clear_cache()
    yield tmp_path
    clear_cache()


def drop(path: Path, field: str) -> None:
    doc = yaml.safe_load(path.read_text())
    del doc[field]
    path.write_text(yaml.safe_dump(doc))


def one_line_error(capsys, *args: str) -> str:
    code = main(["run", "--hardware", "mi355x-platform", "--benchmark", "llama2-70b", "--samples", "20", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("field", ["hbm_bandwidth_tbps", "dense_tflops", "tdp_w"])
def test_a_gpu_profile_missing_a_field_is_one_line_naming_file_and_field(lab, capsys, field):
    drop(lab / "gpus" / "mi355x.yaml", field)
    err = one_line_error(capsys)
    assert "mi355x.yaml" in err and field in err


def test_a_full_mesh_without_its_links_is_one_line_naming_file_and_field(lab, capsys):
    drop(lab / "fabrics" / "xgmi-mi350.yaml", "links")
    err = one_line_error(capsys)
    assert "xgmi-mi350.yaml" in err and "links" in err


def test_a_mesh_domain_larger_than_its_links_connect_is_refused(lab, capsys):
    system = lab / "systems" / "mi355x-platform.yaml"
    system.write_text(system.read_text().replace("gpus: 8\nnvlink_domain_gpus: 8", "gpus: 16\nnvlink_domain_gpus: 16"))
    err = one_line_error(capsys)
    assert "mi355x-platform.yaml" in err and "nvlink_domain_gpus" in err and "at most 8" in err


def test_a_system_naming_an_unknown_software_stack_is_refused(lab, capsys):
    system = lab / "systems" / "mi355x-platform.yaml"
    system.write_text(system.read_text().replace("software: vllm-rocm", "software: rocm-magic"))
    err = one_line_error(capsys)
    assert "mi355x-platform.yaml" in err and "software" in err and "vllm-rocm" in err


# ---- end to end ------------------------------------------------------------------------------------------
def test_the_rule_deployment_runs_the_systems_own_stack():
    """No searched default exists for the MI355X: the rule deployment runs the stack the system names."""
    hw = load_hardware("mi355x-platform")
    dep = rule_deployment(hw, load_model("llama2-70b"))
    assert (dep.software, dep.weights, dep.tp) == ("vllm-rocm", "fp4", 1)
    assert rule_deployment(load_hardware("h200-hgx"), load_model("llama2-70b")).software == "trtllm"


def test_the_mi355x_platform_runs_end_to_end(capsys):
    code = main(["run", "--hardware", "mi355x-platform", "--benchmark", "llama2-70b", "--scenario", "offline",
                 "--samples", "200", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    summary = json.loads(out)
    assert summary["num_gpus"] == 8 and summary["completed_requests"] == 200
    assert summary["output_tokens_per_s"] > 0
    assert "vllm-rocm" in json.dumps(summary["deployment"])


# ---- published MLPerf results of other vendors: validated, never fitted ---------------------------------
def test_mi355x_mlperf_rows_run_on_the_amd_platform_with_its_own_stack(tmp_path) -> None:
    """reference/mlperf_other_vendors.csv holds AMD's v6.1 rows (mlcommons/inference_results_v6.1 summary.csv):
    8 and 72 MI355X map to one and nine mi355x-platform systems, served by the stack the system profile names
    (vLLM on ROCm, as AMD's submission), and the request-level fit of TensorRT-LLM never takes them."""
    from gpusim.analysis.published import read_published
    from gpusim.calibrate.offline import offline_rows
    from gpusim.validate.mlperf import software_for_row

    rows = read_published(REPO / "reference" / "mlperf_other_vendors.csv")
    assert {(r.hardware, r.systems, r.gpus) for r in rows} == {("mi355x-platform", 1, 8), ("mi355x-platform", 9, 72)}
    assert {software_for_row(r)[0] for r in rows} == {"vllm-rocm"}
    # the same row's round (v6.1) runs TensorRT-LLM on NVIDIA systems, and an NVIDIA row still does
    nvidia = read_published(REPO / "reference" / "mlperf_calibration.csv")
    assert {software_for_row(r)[0] for r in nvidia if r.round == "v6.1"} <= {"trtllm", "vllm"}
    assert offline_rows(REPO / "reference" / "mlperf_other_vendors.csv", "trtllm", "trtllm", 60.0, workers=1) == []
