"""Shared fixtures: the reference data in ../shared, skipped cleanly when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip when it is absent."""
    if not (SHARED / "reference").is_dir():
        pytest.skip("../shared/reference is absent (fresh clone without the reference data)")
    return SHARED
