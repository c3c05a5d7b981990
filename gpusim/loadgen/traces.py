"""Request traces as open-loop `Workload`s, format detected from the content.

Formats (column sets):
- Azure LLM inference trace CSV: TIMESTAMP (naive datetime), ContextTokens, GeneratedTokens.
- Vidur CSV: arrived_at (seconds), num_prefill_tokens, num_decode_tokens.
- Mooncake JSONL: timestamp (ms), input_length, output_length, optional hash_ids (512-token blocks).
- gpusim's agent-session JSONL: one LLM call per line, calls waiting for earlier ones (`agent_trace`).

Decisions: arrivals are made relative to the first row (the trace starts at t=0); rows must already be
in time order (a decreasing arrival is an error, not silently sorted); a zero output length is clamped
to 1 token (such a request still costs a prefill and one step; LoadGen itself rejects n_tokens < 1),
while a zero or negative input length and a negative output length are errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gpusim.errors import InputError
from gpusim.loadgen.agent_trace import FIELDS as AGENT_FIELDS
from gpusim.loadgen.agent_trace import is_agent_trace, read_agent_trace
from gpusim.loadgen.jsonl import json_objects
from gpusim.loadgen.workload import Workload

AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
VIDUR = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
MOONCAKE = ("timestamp", "input_length", "output_length")
MAX_TOKENS = 10**9
"""Most tokens one request may have: past it a count is a typo (and would overflow an int64 sum)."""
FORMATS = (
    "Azure CSV (TIMESTAMP, ContextTokens, GeneratedTokens), "
    "Vidur CSV (arrived_at, num_prefill_tokens, num_decode_tokens), "
    "Mooncake JSONL (timestamp, input_length, output_length[, hash_ids]), "
    f"agent-session JSONL ({AGENT_FIELDS})"
)


def read_trace(path: str | Path, limit: int | None = None) -> Workload:
    """Read a trace file (first `limit` requests if given) into a `Workload` named after the file."""
    path = Path(path)
    src = str(path)
    if limit is not None and limit < 1:
        raise InputError("command line", "limit", f"must be > 0, got {limit}")
    try:
        with path.open("rb") as f:
            head = f.read(4096).lstrip()
    except OSError as e:
        raise InputError(src, "path", f"cannot read trace: {e.strerror or e}") from None
    if not head:
        raise InputError(src, "file", "empty trace: no requests")
    if head.startswith(b"{") and _first_is_agent_call(path):
        return read_agent_trace(path, limit)
    if head.startswith(b"{"):
        arrival, isl, osl, hashes = _read_mooncake(path, limit)
    else:
        arrival, isl, osl, hashes = _read_csv(path, limit)
    return Workload.create(arrival, isl, osl, prefix_hashes=hashes, name=path.stem, source=src)


def _first_is_agent_call(path: Path) -> bool:
    first = next(json_objects(path), None)
    return first is not None and is_agent_trace(first[1])


def _missing(src: str, columns: set[str], candidates: tuple[tuple[str, ...], ...]) -> InputError:
    best = max(candidates, key=lambda cols: sum(c in columns for c in cols))
    col = next(c for c in best if c not in columns)
    return InputError(src, col, f"missing column; a trace needs one of: {FORMATS}")


def _read_csv(path: Path, limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, None]:
    src = str(path)
    try:
        df = pd.read_csv(path, nrows=limit, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(src, "file", "empty trace: no requests") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise InputError(src, "file", f"cannot parse as CSV: {e}") from None
    df.columns = [str(c).strip() for c in df.columns]
    columns = set(df.columns)
    fmt = next((cols for cols in (AZURE, VIDUR) if set(cols) <= columns), None)
    if fmt is None:
        raise _missing(src, columns, (AZURE, VIDUR, MOONCAKE))
    if df.empty:
        raise InputError(src, "file", "empty trace: a header but no requests")
    time_col, in_col, out_col = fmt
    if fmt is AZURE:
        raw = df[time_col].astype(str).str.strip()
        t = pd.to_datetime(raw, format="ISO8601", errors="coerce")
        _check_parsed(src, time_col, raw, t.isna().to_numpy(), "a datetime")
        ns = t.to_numpy().astype("datetime64[ns]").astype(np.int64)
        arrival = (ns - ns[0]) / 1e9
    else:
        secs = pd.to_numeric(df[time_col], errors="coerce").to_numpy(dtype=np.float64)
        _check_parsed(src, time_col, df[time_col], ~np.isfinite(secs), "a finite number of seconds")
        arrival = secs - secs[0]
    isl = _tokens(src, in_col, df[in_col], clamp_zero=False)
    osl = _tokens(src, out_col, df[out_col], clamp_zero=True)
    return arrival, isl, osl, None


def _check_parsed(
    src: str, col: str, raw: pd.Series, bad: np.ndarray, what: str, lines: np.ndarray | None = None
) -> None:
    """Raise naming the first row that did not parse (`lines`: file line per row; default CSV rows)."""
    idx = np.flatnonzero(bad)
    if idx.size:
        i = int(idx[0])
        line = i + 2 if lines is None else int(lines[i])
        raise InputError(src, col, f"line {line}: cannot parse {raw.iloc[i]!r} as {what}")


def _tokens(src: str, col: str, raw: pd.Series, clamp_zero: bool, lines: np.ndarray | None = None) -> np.ndarray:
    v = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(v) | (v != np.rint(v)) | (v < 0) | ((v == 0) & (not clamp_zero)) | (v > MAX_TOKENS)
    _check_parsed(src, col, raw, bad, f"a token count (a whole number from 1 to {MAX_TOKENS:.0e})", lines)
    return np.maximum(v.astype(np.int64), 1)


def _read_mooncake(
    path: Path, limit: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]] | None]:
    src = str(path)
    rows: list[dict] = []
    lines: list[int] = []
    for lineno, rec in json_objects(path):
        rows.append(rec)
        lines.append(lineno)
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise InputError(src, "file", "empty trace: no requests")
    with_hashes = "hash_ids" in rows[0]
    for rec, lineno in zip(rows, lines, strict=True):
        for col in (*MOONCAKE, *(("hash_ids",) if with_hashes else ())):
            if col not in rec:
                err = _missing(src, set(rec), (MOONCAKE,))
                raise InputError(src, col, f"line {lineno}: {err.message}")
    df = pd.DataFrame({c: [r[c] for r in rows] for c in MOONCAKE})
    line_of = np.asarray(lines)
    t = pd.to_numeric(df["timestamp"], errors="coerce")
    _check_parsed(src, "timestamp", df["timestamp"], t.isna().to_numpy(), "milliseconds", line_of)
    ms = t.to_numpy(dtype=np.float64)
    arrival = (ms - ms[0]) / 1e3
    isl = _tokens(src, "input_length", df["input_length"], False, line_of)
    osl = _tokens(src, "output_length", df["output_length"], True, line_of)
    hashes = None
    if with_hashes:
        hashes = []
        for rec, lineno in zip(rows, lines, strict=True):
            h = rec["hash_ids"]
            if not isinstance(h, list) or not set(map(type, h)) <= {int}:
                raise InputError(src, "hash_ids", f"line {lineno}: expected a list of integers")
            hashes.append(tuple(h))
    return arrival, isl, osl, hashes
