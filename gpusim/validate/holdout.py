"""The rows calibration holds out: the split that `gpusim calibrate` trains on and `validate --held-out` scores."""

from __future__ import annotations

import pandas as pd

HOLDOUT = 0.3
"""Fraction of the silicon rows held out of the fit."""
SEED = 0
"""Seed of the held-out draw (and of the fit's row samples)."""


def split_rows(rows: pd.DataFrame, holdout: float = HOLDOUT, seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training, held-out) rows: a seeded random `holdout` fraction held out, both in file order."""
    held = rows.sample(frac=holdout, random_state=seed).sort_index()
    return rows.drop(held.index), held
