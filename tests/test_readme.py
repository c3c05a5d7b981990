"""Every example in the README runs as shown and does what its text says (slow ones with `-m slow`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


HEADLINE = "## Install and run"
"""The headline run (a whole rack, Offline sized for 2,400 s: about 40 s) runs with the slow checks."""


def shell_lines() -> list[str]:
    """The gpusim commands of the README's bash blocks, in order (an install before `&&` is the test's own
    environment; the test command itself is this suite). The headline's line is marked slow."""
    lines = []
    for section in re.split(r"(?m)^(?=## )", README):
        for block in re.findall(r"```bash\n(.*?)```", section, re.S):
            for line in block.splitlines():
                command = line.split(" && ")[-1].strip()
                if command.startswith("gpusim "):
                    lines.append(command + ("  # slow: the headline" if section.startswith(HEADLINE) else ""))
    return lines


def is_slow(line: str) -> bool:
    return "# slow" in line


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A scratch folder that sees the repository's experiments/ and reference/ as the README's root does."""
    work = tmp_path_factory.mktemp("readme") / "repo"
    work.mkdir()
    for d in ("experiments", "reference"):
        (work / d).symlink_to(ROOT / d)
    return work


def run(line: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", line.split("  #")[0]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
    check(line, proc.stdout, cwd)
    return proc.stdout


def check(line: str, out: str, cwd: Path) -> None:
    """What the line's comment or flags promise."""
    if "--json" in line:
        json.loads(out)  # exactly one JSON object
    if line.startswith("gpusim list hardware"):
        assert {"systems", "gpus", "fabrics"} <= {row.split(":")[0] for row in out.splitlines()}
    if line.startswith("gpusim report "):
        assert Path(out.strip()).name == "report.html" and (cwd / out.strip()).stat().st_size > 10_000
    if " --out " in line and line.startswith("gpusim run "):
        folder = cwd / line.split(" --out ")[1].split()[0]
        assert {"summary.json", "requests.parquet", "timeline.csv", "steps.json"} <= {p.name for p in folder.iterdir()}
    if "experiments/gb300-deepseek-r1-server.yaml" in line:  # a short run: within the limits, not conformant
        assert "not an MLPerf-conformant run (its p99 TTFT and TPOT meet the limits)" in out


def test_the_readme_has_a_short_tour():
    assert len(README.splitlines()) <= 200
    assert len(shell_lines()) >= 10 and sum(not is_slow(line) for line in shell_lines()) >= 8


def test_the_quick_readme_examples_run(workdir):
    for line in shell_lines():
        if not is_slow(line):
            run(line, workdir)


@pytest.mark.slow
def test_every_readme_example_runs(workdir):
    for line in shell_lines():
        run(line, workdir)


def test_the_python_example_runs(monkeypatch, tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", README, re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    result = scope["result"]
    assert result.summary["latency_met"] is True and len(result.requests) > 0 and len(result.timeline) > 0


def test_docs_howtos_run_to_their_last_command(tmp_path):
    """Each how-to's shell blocks, in one shell, from an empty folder: the last command is a run."""
    for page in ("own-hardware.md", "add-a-model.md", "agentic.md"):
        blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)
        assert "gpusim run " in blocks[-1].strip().splitlines()[-1]
        folder = tmp_path / page
        folder.mkdir()
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + "\n".join(blocks)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{page}\n{proc.stderr[-2000:]}"
        assert proc.stdout.count("completed   ") >= 2  # the runs printed their summaries
