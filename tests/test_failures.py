"""Regression tests of failures users met: a cost object that did not survive a process pool, inputs the
validator accepted and a run then crashed on, and pool workers that outlived a killed parent."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gpusim.build import prepare
from gpusim.cli import main
from gpusim.perf.step import BatchShape
from gpusim.specs.benchmark import benchmark_names, load_benchmark


def test_a_vision_language_setup_survives_pickling():
    """Qwen3-VL's cost object delegated every attribute to its language model, `llm` included, so unpickling
    (which looks up __setstate__ before `llm` exists) recursed until RecursionError and broke the search's pool."""
    setup = prepare("b300-hgx", "qwen3-vl-235b-a22b")
    back = pickle.loads(pickle.dumps(setup))
    shape = BatchShape(prefill_tokens=4096, prefill_attn_pairs=4096 * 2048, prefill_seqs=2)
    for a, b in zip(setup.pools, back.pools, strict=True):
        assert b.cost.step_time(shape) == a.cost.step_time(shape)


@pytest.mark.parametrize("name", benchmark_names())
def test_every_benchmarks_setup_crosses_a_process_boundary(name):
    setup = prepare("b300-hgx", name)
    assert pickle.loads(pickle.dumps(setup)).deployment == setup.deployment


def test_a_server_run_of_a_benchmark_without_limits_is_bad_input(capsys):
    bench = next(b for b in benchmark_names() if load_benchmark(b).limits("server") is None
                 and load_benchmark(b).kind == "llm")
    assert main(["run", "--hardware", "b300-hgx", "--benchmark", bench, "--scenario", "server", "--qps", "1"]) == 2
    err = capsys.readouterr().err
    assert "scenario" in err and "no server latency limits" in err and err.count("\n") == 1


def test_a_rate_that_asks_for_billions_of_arrivals_is_bad_input(capsys):
    assert main(["run", "--hardware", "b300-hgx", "--benchmark", "llama2-70b", "--scenario", "server",
                 "--qps", "1e7"]) == 2
    err = capsys.readouterr().err
    assert "qps:" in err and "6,000,000,000 arrivals" in err
    # the same rate over a short enough window is fine for the validator
    from gpusim.specs.experiment import RunSpec
    RunSpec(scenario="server", qps=1e7, duration_s=1.0)


PARENT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from gpusim.parallel import parallel_map
    def spin(_):
        Path(sys.argv[1], str(os.getpid())).write_text("")  # one file per worker: its pid
        time.sleep(60)
    parallel_map(spin, [0, 1], 2)
""")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_pool_workers_exit_when_their_parent_is_killed(tmp_path):
    script, pids = tmp_path / "parent.py", tmp_path / "pids"
    script.write_text(PARENT)
    pids.mkdir()
    parent = subprocess.Popen([sys.executable, str(script), str(pids)])
    started = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < started:
        time.sleep(0.1)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{w}") and _alive(w) for w in workers):
        time.sleep(0.2)
    assert not [w for w in workers if os.path.exists(f"/proc/{w}") and _alive(w)]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its (new) parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
