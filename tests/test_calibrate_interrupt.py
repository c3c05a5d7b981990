"""An interrupted calibration leaves the tracked software profiles byte-identical; the fitted one is written
once, atomically, at the end."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gpusim.calibrate import fit
from gpusim.specs.software import SoftwareProfile, load_software, software_overlay

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,"
           "moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,"
           "silicon_tpot_ms")


def _silicon(path: Path, rows: int = 40) -> Path:
    """A synthetic silicon sample: Llama 3.1 8B on H100 under TensorRT-LLM, made-up measurements. Every row is
    its own run (no cached prediction), so each pass takes a second or two on 2 cores and an interrupt in the
    second pass lands several passes before the end (with 40-token rows a pass took 0.2 s, and one CI run
    finished its calibration before the interrupt reached it)."""
    lines = [COLUMNS]
    for i in range(rows):
        isl, osl, bs = 512 + 16 * i, 2048 + 32 * i, (32, 64, 128, 256)[i % 4]
        lines.append(f"r{i},synthetic,trtllm,1.0,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,agg,{isl},{osl},,,"
                     f"{bs},1,1,,1,1,{40 + 5 * i},{6 + 0.1 * i}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _copy_repo(dest: Path) -> Path:
    """The package and the files it reads, in a scratch checkout: a calibration that ran to its end would
    write there, never into this checkout."""
    for part in ("gpusim", "hardware_profiles", "workloads"):
        shutil.copytree(REPO / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _children(pid: int) -> list[str]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.read_text().split() if path.exists() else []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to see the worker processes")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_calibration_interrupted_mid_prediction_leaves_the_profiles_byte_identical(tmp_path, sig) -> None:
    repo = _copy_repo(tmp_path / "repo")
    software = repo / "hardware_profiles" / "software"
    before = _digests(software)
    cmd = [sys.executable, "-c", "from gpusim.cli import main; raise SystemExit(main())", "calibrate",
           "--profile", "trtllm", "--no-ops", "--no-mlperf", "--silicon", str(_silicon(tmp_path / "s.csv")),
           "--train-sample", "30", "--workers", "2"]
    # a runner started in the background of a non-interactive shell ignores SIGINT, and a child inherits that
    # (it would run to the end and exit 0): the calibration gets the default disposition back
    proc = subprocess.Popen(cmd, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pools: list[set[str]] = []
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            assert _digests(software) == before, "a profile changed while the calibration ran"
            workers = set(_children(proc.pid))
            if workers and (not pools or workers.isdisjoint(pools[-1])):
                pools.append(workers)
            elif workers:
                pools[-1] |= workers  # a pool starts its workers one at a time
            if len(pools) == 2:  # the second prediction pass: trial constants nudged
                time.sleep(0.5)
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the calibration ended before it could be interrupted: {proc.communicate()}"
        assert len(pools) == 2, "no second prediction pass within the time limit"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # workers outliving a SIGKILLed parent: orphans are no longer its children, the pools seen name them
        for pid in set(_children(proc.pid)).union(*pools):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert proc.returncode != 0
    assert _digests(software) == before
    assert not list(software.glob(".*")), "a temporary file was left beside the profiles"


def test_write_profile_is_atomic_and_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    base = load_software("trtllm")
    block = fit.calibration_block("gpusim calibrate --profile x", "synthetic rows", {"mape_tpot": 0.1}, {})
    path = fit.write_profile("x", base, {}, {"step_overhead_us": 123.0}, block, tmp_path / "x.yaml")
    written = path.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["x.yaml"]
    cal = yaml.safe_load(written)["calibration"]
    assert cal["command"] == "gpusim calibrate --profile x" and cal["data"] == "synthetic rows" and cal["date"]

    def fail(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(fit.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        fit.write_profile("x", base, {}, {"step_overhead_us": 999.0}, block, path)
    assert path.read_bytes() == written
    assert [p.name for p in tmp_path.iterdir()] == ["x.yaml"]


def test_trial_profile_is_what_the_file_would_hold(tmp_path) -> None:
    base = load_software("trtllm")
    block = fit.calibration_block("c", "d", {}, {})
    for timing in ("roofline", "table"):
        args = ("trtllm", base, {"hopper": {"gemm_efficiency_fp8": 0.41}}, {"step_overhead_us": 77.0}, block)
        path = fit.write_profile(*args, path=tmp_path / f"{timing}.yaml", timing=timing)
        assert fit.trial_profile(*args, timing=timing) == SoftwareProfile.model_validate(
            yaml.safe_load(path.read_text()))


def test_overlaid_profiles_reach_worker_processes_as_data() -> None:
    from functools import partial

    from gpusim.parallel import parallel_map

    trial = load_software("trtllm").model_copy(update={"id": "trial-only"})
    with software_overlay(trial):
        got = parallel_map(partial(_software_id), ["trial-only", "trtllm"], workers=2)
    assert got == ["trial-only", "trtllm"]
    with pytest.raises(Exception, match="trial-only"):
        load_software("trial-only")


def _software_id(name: str) -> str:
    return load_software(name).id
