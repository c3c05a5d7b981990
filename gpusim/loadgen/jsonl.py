"""JSON-lines files as the traces read them: one JSON object per line, blank lines skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from gpusim.errors import InputError


def json_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; InputError naming the line on invalid JSON or a non-object."""
    src = str(path)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(src, "file", f"line {lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise InputError(src, "file", f"line {lineno}: expected a JSON object per line")
            yield lineno, rec


__all__ = ["json_objects"]
