"""Reading a validation CSV: any unreadable or column-short file is an input error naming what is missing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpusim.errors import InputError


def read_checked_csv(path: Path, need: set[str], what: str) -> pd.DataFrame:
    """Every row of the CSV at `path`, which must hold the columns `need` of `what` (e.g. "a silicon sample")."""
    try:
        table = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(str(path), "PATH", f"cannot read a CSV: {exc}") from None
    missing = sorted(need - set(table.columns))
    if missing:
        raise InputError(str(path), ", ".join(missing), f"missing columns of {what}")
    return table
