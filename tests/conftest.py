"""Shared fixtures: the reference data in ../shared, skipped cleanly when absent."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(autouse=True, scope="session")
def _private_search_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Searches the tests run are cached in a folder of their own, never in the user's cache."""
    os.environ["GPUSIM_CACHE"] = str(tmp_path_factory.mktemp("gpusim-cache"))


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip when it is absent."""
    if not (SHARED / "reference").is_dir():
        pytest.skip("../shared/reference is absent (fresh clone without the reference data)")
    return SHARED


def _script_loader(folder: Path) -> Callable[[str], ModuleType]:
    """Loads a script of `folder` (not a package) by name."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def benchmark_script() -> Callable[[str], ModuleType]:
    """Loads a script of benchmarks/ by name, e.g. `benchmark_script("speed")`."""
    return _script_loader(BENCHMARKS)


@pytest.fixture
def experiment_script() -> Callable[[str], ModuleType]:
    """Loads a script of experiments/ by name, e.g. `experiment_script("agentic")`."""
    return _script_loader(BENCHMARKS.parent / "experiments")


try:  # property tests (Hypothesis): few examples by default; HYPOTHESIS_PROFILE=slow runs many more
    from hypothesis import HealthCheck, settings

    settings.register_profile("default", max_examples=12, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("slow", max_examples=300, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
except ImportError:  # the property tests skip without it
    pass
