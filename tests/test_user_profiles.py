"""Your own hardware and model: profiles by path, GPUSIM_PATH folders, errors that name the user's file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import gpusim
from gpusim.cli import main
from gpusim.errors import InputError
from gpusim.specs.hardware import PROFILES, load_hardware, same_as_shipped

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"scenario": "server", "qps": 5, "duration_s": 20}
DIFFERS = {"hardware", "wall_s"}


def renamed(src: Path, dest: Path, new_id: str, **fields: object) -> Path:
    """A copy of a shipped profile under a new id (and any fields replaced)."""
    data = yaml.safe_load(src.read_text())
    data.update(id=new_id, **fields)
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def same(a: dict, b: dict) -> bool:
    return {k: v for k, v in a.items() if k not in DIFFERS} == {k: v for k, v in b.items() if k not in DIFFERS}


def test_a_renamed_copy_of_a_rack_by_path_gives_the_racks_result(tmp_path):
    rack = renamed(PROFILES / "systems" / "gb300-nvl72.yaml", tmp_path / "my-rack.yaml", "my-rack")
    shipped = gpusim.run("gb300-nvl72", "llama2-70b", **SMALL).summary
    mine = gpusim.run(str(rack), "llama2-70b", **SMALL, costs={"capex_usd": 3.5e6}).summary
    assert mine["hardware"] == "my-rack" and shipped["completed_requests"] > 0
    assert same(mine, shipped)


def test_a_renamed_copy_gets_the_racks_searched_default_deployment(tmp_path):
    from gpusim.build import prepare

    rack = renamed(PROFILES / "systems" / "gb300-nvl72.yaml", tmp_path / "my-rack.yaml", "my-rack")
    shipped = prepare("gb300-nvl72", "deepseek-r1", scenario="server").deployment
    assert shipped.name != "default-tp4"  # a searched one, not the rule's
    assert prepare(str(rack), "deepseek-r1", scenario="server").deployment == shipped
    changed = renamed(PROFILES / "systems" / "gb300-nvl72.yaml", tmp_path / "other.yaml", "other", gpus=64)
    assert same_as_shipped(load_hardware(str(changed))) is None  # another number: not the shipped rack


def test_a_rack_without_a_price_runs_without_a_dollar_figure(tmp_path):
    rack = renamed(PROFILES / "systems" / "h100-hgx.yaml", tmp_path / "r.yaml", "unpriced")
    s = gpusim.run(str(rack), "llama2-70b", **SMALL).summary
    assert s["usd_per_million_tokens"] is None and s["energy_j_per_token"] > 0


def test_references_resolve_to_files_beside_the_profile(tmp_path, monkeypatch):
    """A rack with its own GPU (twice the HBM bandwidth) beside it: a path reference, read from another folder."""
    gpu = yaml.safe_load((PROFILES / "gpus" / "h100-sxm.yaml").read_text())
    gpu["id"] = "my-gpu"
    gpu["hbm_bandwidth_tbps"]["value"] *= 2
    (tmp_path / "my-gpu.yaml").write_text(yaml.safe_dump(gpu))
    rack = renamed(PROFILES / "systems" / "h100-hgx.yaml", tmp_path / "rack.yaml", "fast-hbm", gpu="my-gpu.yaml")
    monkeypatch.chdir(ROOT / "tests")
    hw, h100 = load_hardware(str(rack)), load_hardware("h100-hgx")
    assert hw.gpu.id == "my-gpu" and hw.hbm_bandwidth == 2 * h100.hbm_bandwidth
    fast = gpusim.run(str(rack), "llama2-70b", **SMALL).summary
    base = gpusim.run("h100-hgx", "llama2-70b", **SMALL).summary
    assert fast["tpot_p50_s"] < base["tpot_p50_s"]  # decode is memory-bound: faster HBM, faster tokens


def test_a_model_file_by_path_and_an_experiment_naming_files_beside_it(tmp_path, monkeypatch, capsys):
    model = renamed(ROOT / "workloads" / "models" / "llama2-70b.yaml", tmp_path / "my-llama.yaml", "my-llama")
    renamed(PROFILES / "systems" / "b200-hgx.yaml", tmp_path / "rack.yaml", "my-b200")
    exp = tmp_path / "exp.yaml"
    exp.write_text("hardware: rack.yaml\nbenchmark: llama2-70b\nmodel: my-llama.yaml\nscenario: server\n"
                   "qps: 5\nduration_s: 20\n")
    monkeypatch.chdir(ROOT)
    assert main(["run", str(exp), "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    shipped = gpusim.run("b200-hgx", "llama2-70b", **SMALL).summary
    assert mine["model"] == "my-llama" and mine["hardware"] == "my-b200"
    assert mine["output_tokens_per_s"] == shipped["output_tokens_per_s"]
    assert gpusim.run("b200-hgx", "llama2-70b", model=str(model), **SMALL).summary["model"] == "my-llama"


def test_gpusim_path_adds_profiles_that_list_and_show_include(tmp_path, monkeypatch, capsys):
    (tmp_path / "systems").mkdir()
    (tmp_path / "models").mkdir()
    renamed(PROFILES / "systems" / "h200-hgx.yaml", tmp_path / "systems" / "lab-h200.yaml", "lab-h200")
    renamed(ROOT / "workloads" / "models" / "llama3.1-8b.yaml", tmp_path / "models" / "tuned-8b.yaml", "tuned-8b")
    monkeypatch.setenv("GPUSIM_PATH", f"{tmp_path}/nothing-here:{tmp_path}")
    assert main(["list", "hardware"]) == 0
    assert "lab-h200" in capsys.readouterr().out.splitlines()[0]
    assert main(["list", "models"]) == 0
    assert "tuned-8b" in capsys.readouterr().out.split()
    assert main(["show", "hardware", "lab-h200"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["system"]["id"] == "lab-h200"
    assert gpusim.run("lab-h200", "llama2-70b", **SMALL).summary["hardware"] == "lab-h200"
    monkeypatch.delenv("GPUSIM_PATH")
    with pytest.raises(InputError, match="unknown 'lab-h200'"):
        gpusim.run("lab-h200", "llama2-70b", **SMALL)


def test_show_yaml_prints_a_profile_that_loads_back(tmp_path, capsys):
    assert main(["show", "hardware", "gb300-nvl72", "--yaml"]) == 0
    text = capsys.readouterr().out
    assert text == (PROFILES / "systems" / "gb300-nvl72.yaml").read_text()
    (tmp_path / "copy.yaml").write_text(text.replace("id: gb300-nvl72", "id: copy"))
    assert load_hardware(str(tmp_path / "copy.yaml")).num_gpus == 72


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"gpus": "many"}, "gpus", "valid integer"),
    ({"gpu": "gb301"}, "gpu", "valid: b200"),
    ({"gpu": "missing-gpu.yaml"}, "gpu", "not found"),
    ({"nvlink_gpus": 72}, "nvlink_gpus", "did you mean 'nvlink_domain_gpus'"),
])
def test_an_error_in_a_user_file_names_the_file_the_field_and_what_is_valid(tmp_path, capsys, change, field,
                                                                             says):
    rack = renamed(PROFILES / "systems" / "gb300-nvl72.yaml", tmp_path / "bad.yaml", "bad", **change)
    assert main(["run", "--hardware", str(rack), "--samples", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpusim: error: {rack}: {field}: ") and says in err and "\n" not in err


def test_a_missing_profile_file_is_one_line(capsys):
    assert main(["run", "--hardware", "no/such/rack.yaml"]) == 2
    assert "hardware: file 'no/such/rack.yaml' not found" in capsys.readouterr().err


def _faster_hbm_rack(tmp_path: Path, **system: object) -> Path:
    """GB300 NVL72 with 12 TB/s HBM instead of 8 (a GPU file beside the rack), the rack's other fields as `system`."""
    gpu = yaml.safe_load((PROFILES / "gpus" / "gb300.yaml").read_text())
    gpu["id"] = "gb300-12tb"
    gpu["hbm_bandwidth_tbps"] = {**gpu["hbm_bandwidth_tbps"], "value": 12.0, "source": "what-if", "grade": "D"}
    (tmp_path / "gpu12.yaml").write_text(yaml.safe_dump(gpu, sort_keys=False))
    return renamed(PROFILES / "systems" / "gb300-nvl72.yaml", tmp_path / "rack.yaml", "my-rack", gpu="gpu12.yaml",
                   **system)


def test_a_derived_rack_keeps_its_bases_deployment_and_says_so(tmp_path):
    from gpusim.build import prepare

    shipped = prepare("gb300-nvl72", "deepseek-r1", scenario="server").deployment
    derived = _faster_hbm_rack(tmp_path, base="gb300-nvl72")
    assert prepare(str(derived), "deepseek-r1", scenario="server").deployment == shipped
    summary = gpusim.run(str(derived), "deepseek-r1", **SMALL).summary
    assert summary["deployment"]["name"] == shipped.name
    assert summary["deployment_origin"].startswith("searched default of its base gb300-nvl72")
    # without `base:` the same file falls back to the rule deployment, and says why
    alone = _faster_hbm_rack(tmp_path)
    assert prepare(str(alone), "deepseek-r1", scenario="server").deployment.name == "default-tp4"
    assert "names no `base:`" in gpusim.run(str(alone), "deepseek-r1", **SMALL).summary["deployment_origin"]


def test_a_fallback_deployment_is_printed_with_its_reason(tmp_path, capsys):
    rack = _faster_hbm_rack(tmp_path)
    assert main(["run", "--hardware", str(rack), "--benchmark", "llama2-70b", "--scenario", "server", "--qps", "5",
                 "--duration", "20"]) == 0
    out = capsys.readouterr().out
    assert "(fallback: rule deployment, since my-rack is not a shipped system and names no `base:`)" in out
    assert main(["run", "--hardware", "gb300-nvl72", "--benchmark", "llama2-70b", "--scenario", "server", "--qps", "5",
                 "--duration", "20"]) == 0
    assert "fallback" not in capsys.readouterr().out  # a shipped default goes without saying


def test_an_unknown_base_is_bad_input(tmp_path, capsys):
    rack = _faster_hbm_rack(tmp_path, base="gb999-nvl72")
    assert main(["run", "--hardware", str(rack), "--benchmark", "llama2-70b", "--scenario", "offline",
                 "--samples", "100"]) == 2
    err = capsys.readouterr().err
    assert "base" in err and "'gb999-nvl72' is not a shipped system; valid:" in err and "gb300-nvl72" in err
