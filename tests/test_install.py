"""Packaging: the wheel ships every profile and module, and an installed gpusim finds them from any directory."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ("hardware_profiles", "workloads")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools", minversion="77")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, cwd=out)
    (path,) = out.glob("gpusim-*.whl")
    return path


def test_the_wheel_ships_every_profile_and_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = [f"gpusim/{p.relative_to(ROOT)}" for d in DATA for p in (ROOT / d).rglob("*.yaml")]
    modules = [str(p.relative_to(ROOT)) for p in (ROOT / "gpusim").rglob("*.py")]
    # launch_recipes.yaml, disagg_recipes.csv: how the silicon sample's harness launched its engines
    package_data = [str(p.relative_to(ROOT)) for glob in ("*.yaml", "*.csv") for p in (ROOT / "gpusim").rglob(glob)]
    assert len(shipped) > 40 and package_data
    assert [f for f in shipped if f not in names] == []
    assert [f for f in modules + package_data if f not in names] == []
    # published results stay in the repository's reference/
    assert [f for f in names if f.endswith(".csv") and f not in package_data] == []


def test_the_wheel_carries_the_one_version(wheel):
    import gpusim

    assert wheel.name.startswith(f"gpusim-{gpusim.__version__}-")


def test_an_unpacked_wheel_runs_from_another_directory(wheel, tmp_path):
    """The wheel's files on sys.path alone (no checkout): the profiles are found as package data."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpusim.cli import main; "
            "sys.exit(main(['list', 'hardware']))")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(site)], cwd=elsewhere, capture_output=True,
                         text=True, check=True).stdout
    assert "h100-hgx" in out and "gb300-nvl72" in out and "nvlink5" in out
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import gpusim; "
            "print(gpusim.__file__); print(gpusim.run('h100-hgx', 'llama2-70b', 'server', qps=5, duration_s=20)"
            ".summary['completed_requests'])")
    lines = subprocess.run([sys.executable, "-I", "-c", code, str(site)], cwd=elsewhere, capture_output=True,
                           text=True, check=True).stdout.split()
    assert lines[0].startswith(str(site)) and int(lines[1]) > 0


def test_a_wheel_built_from_the_sdist_ships_every_profile(tmp_path):
    """`python -m build` builds the wheel from the sdist: the profiles must survive that route too."""
    pytest.importorskip("setuptools", minversion="77")
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()[-1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(tmp_path / name)], check=True, capture_output=True, cwd=tmp_path)
    (path,) = tmp_path.glob("gpusim-*.whl")
    names = set(zipfile.ZipFile(path).namelist())
    shipped = [f"gpusim/{p.relative_to(ROOT)}" for d in DATA for p in (ROOT / d).rglob("*.yaml")]
    assert [f for f in shipped if f not in names] == []
