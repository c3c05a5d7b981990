"""What a user of agents asks of a run of agent sessions: how long a session takes, how fast each call answers at
its context length, how many sessions a rack and a megawatt carry, and where the KV of their contexts came from."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd

CONTEXT_BINS = (0, 32_768, 65_536, 131_072, 2**62)
"""Prompt lengths a call's TTFT is reported by (the context a call brings grows through its session)."""


def session_times(records: pd.DataFrame, session: np.ndarray) -> pd.DataFrame:
    """Per session whose every call completed: its start (first call scheduled), end (last completion) and calls."""
    df = pd.DataFrame({"session": session[records["request_id"].to_numpy()],
                       "scheduled_s": records["scheduled_s"].to_numpy(),
                       "completion_s": records["completion_s"].to_numpy()})
    calls = np.bincount(session, minlength=int(session.max()) + 1)
    per = df.groupby("session").agg(start_s=("scheduled_s", "min"), end_s=("completion_s", "max"),
                                     done=("completion_s", "size"))
    per = per[per["done"].to_numpy() == calls[per.index.to_numpy()]]
    return per.assign(time_s=per["end_s"] - per["start_s"], calls=per["done"])


def _per_user(records: pd.DataFrame) -> float | None:
    """A user's generation speed while a call answers: the median over calls of (tokens − 1) / decode time."""
    decode = records["completion_s"] - records["first_token_s"]
    ok = (records["output_tokens"] > 1) & (decode > 0)
    return float(((records["output_tokens"][ok] - 1) / decode[ok]).median()) if ok.any() else None


def session_summary(records: pd.DataFrame, session: np.ndarray, systems: int, rack_kw: float,
                    tiers: dict | None) -> dict:
    """The `sessions` block of a run's summary (`records` of the completed calls, `session` per request)."""
    per = session_times(records, session)
    started = int(session.max()) + 1
    span = float(per["start_s"].max()) if len(per) > 1 else 0.0
    rate = (len(per) - 1) / span if span > 0 else None  # sessions begun per second, over the starts' span
    ttft = records["first_token_s"] - records["scheduled_s"]
    by_context = {}
    for lo, hi in pairwise(CONTEXT_BINS):
        sel = ttft[(records["input_tokens"] >= lo) & (records["input_tokens"] < hi)]
        if len(sel):
            by_context[f"{lo // 1024}k+"] = {"calls": len(sel), "ttft_p50_s": float(sel.quantile(0.5)),
                                             "ttft_p99_s": float(sel.quantile(0.99))}
    times = per["time_s"]
    return {
        "sessions": started,
        "completed_sessions": len(per),
        "calls_per_session": float(per["calls"].mean()) if len(per) else None,
        "session_time_p50_s": float(times.quantile(0.5)) if len(per) else None,
        "session_time_p99_s": float(times.quantile(0.99)) if len(per) else None,
        "context_tokens_p50": float(records["input_tokens"].quantile(0.5)) if len(records) else None,
        "context_tokens_p99": float(records["input_tokens"].quantile(0.99)) if len(records) else None,
        "ttft_by_context": by_context,
        "tokens_per_s_per_user_p50": _per_user(records),
        "sessions_per_s": rate,
        "sessions_per_s_per_rack": rate / systems if rate else None,
        "sessions_per_s_per_mw": rate / (systems * rack_kw / 1e3) if rate else None,
        "kv_tiers": tiers,
    }


__all__ = ["CONTEXT_BINS", "session_summary", "session_times"]
