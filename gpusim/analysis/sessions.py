"""What a user of agents asks of a run of agent sessions: how long a session takes, how fast each call answers at
its context length, how many sessions a rack and a megawatt carry, and where the KV of their contexts came from.

Sessions start as a process and each runs for minutes, so a run's load climbs for about a session's time before it
levels off: a service level judged over all calls of a run shorter than that judges a load the sessions never
reached, and a slower system, whose sessions last longer, sees less of its load. The summary's `steady` block judges
only the calls begun once the load is steady (`warm_up_s`) and before sessions stop starting.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from typing import TypeVar

import numpy as np
import pandas as pd

from gpusim.loadgen.metrics import add_latency_columns, loadgen_percentile, request_weights

T = TypeVar("T")

CONTEXT_BINS = (0, 32_768, 65_536, 131_072, 2**62)
"""Prompt lengths a call's TTFT is reported by (the context a call brings grows through its session)."""
STEADY_LOAD = 0.97
"""The load counts as steady once the sessions in progress are within 3% of their stationary number."""
STEADY_WINDOW_S = 300.0
"""The least span of session starts after the warm-up that a run's steady figures are judged over."""
STEADY_MARGIN = 1.25
"""A longer run's session starts last this many times what a shorter run said it needs: its sessions run longer
under the higher load it reaches."""
STEADY_TRIES = 3
"""Runs a sessions run may take to reach a steady load: an overloaded system's sessions last as long as the run,
so it never gets there."""
OVERLOAD_GROWTH = 2.0
"""A run whose starts lasted what an earlier run said it needs, and whose sessions then need more than this many
times that, is overloaded: its sessions lengthen with the run, and no longer run levels its load off."""


def next_duration_s(steady: dict, meant_s: float | None = None) -> float | None:
    """Seconds of session starts (to the next 100 s) for a run whose load would level off with a window to spare,
    from a run's `steady_figures`; None where that run had its window, or where it ran the `meant_s` of starts an
    earlier run asked for and now needs over `OVERLOAD_GROWTH` times that (overloaded)."""
    if steady["steady"] or (meant_s is not None and steady["needs_duration_s"] > OVERLOAD_GROWTH * meant_s):
        return None
    return 100.0 * math.ceil(STEADY_MARGIN * steady["needs_duration_s"] / 100.0)


def until_steady(first: tuple[dict, T], rerun: Callable[[float], tuple[dict, T]], floor_s: float = 0.0
                 ) -> tuple[dict, T, int]:
    """A sessions run (`first`: its summary and what else the caller keeps) run again by `rerun(seconds of session
    starts)` while `next_duration_s` says a longer run would level its load off, each rerun at least `floor_s`, at
    most `STEADY_TRIES` runs in all: the last run's summary, what it kept, and how many runs there were."""
    (summary, kept), meant, tried = first, None, 1
    while tried < STEADY_TRIES and (longer := next_duration_s(summary["sessions"]["steady"], meant)) is not None:
        meant = max(longer, floor_s)
        summary, kept = rerun(meant)
        tried += 1
    return summary, kept, tried


def warm_up_s(times: np.ndarray) -> float:
    """Seconds from the first session start until the sessions in progress reach `STEADY_LOAD` of their stationary
    number, given the sessions' times S: with sessions starting at a constant rate λ, λ·E[min(S, t)] are in progress
    at t and λ·E[S] in steady state, so the warm-up is the least t with E[min(S, t)] ≥ STEADY_LOAD · E[S]."""
    s = np.sort(np.asarray(times, dtype=np.float64))
    n = len(s)
    if n == 0:
        return 0.0
    left = n - np.arange(n)  # sessions at least s[k] long
    capped_mean = (np.concatenate(([0.0], np.cumsum(s)[:-1])) + left * s) / n  # E[min(S, s[k])]
    target = STEADY_LOAD * s.mean()
    k = int(np.argmax(capped_mean >= target - 1e-12))
    # E[min(S, t)] is linear between the times, rising by left[k] / n per second just below s[k]
    return float(s[k] - (capped_mean[k] - target) * n / left[k])


def steady_figures(records: pd.DataFrame, per: pd.DataFrame) -> dict:
    """The calls begun in the steady window, from the warm-up (`warm_up_s` of the completed sessions' times, after
    the first start) to the last session start: their count and rate, the output tokens they ask for per second,
    their p50/p99 TTFT and TPOT (LoadGen's definitions) and the median user's tokens/s; `steady` False, with the
    `needs_duration_s` of session starts that would give a window of `STEADY_WINDOW_S`, where the run is shorter."""
    first, last = (float(per["start_s"].min()), float(per["start_s"].max())) if len(per) else (0.0, 0.0)
    warm = warm_up_s(per["time_s"].to_numpy())
    lo, window = first + warm, last - first - warm
    out: dict = {"steady": window >= STEADY_WINDOW_S, "warm_up_s": warm, "window_s": max(window, 0.0),
                 "needs_duration_s": None if window >= STEADY_WINDOW_S else warm + STEADY_WINDOW_S}
    begun = records["scheduled_s"]
    df = add_latency_columns(records[(begun >= lo) & (begun <= last)] if out["steady"] else records.iloc[:0])
    w = request_weights(df)
    out["calls"] = len(df)
    out["calls_per_s"] = len(df) / window if out["steady"] else None
    out["output_tokens_per_s"] = float(df["output_tokens"].sum()) / window if out["steady"] else None
    out["tokens_per_s_per_user_p50"] = _per_user(df) if len(df) else None
    for col, key in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
        for p in (50, 99):
            v = loadgen_percentile(df[col], p / 100, w) if len(df) else math.nan
            out[f"{key}_p{p}_s"] = None if math.isnan(v) else v
    return out


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
        "steady": steady_figures(records, per),
    }


__all__ = ["CONTEXT_BINS", "OVERLOAD_GROWTH", "STEADY_LOAD", "STEADY_MARGIN", "STEADY_TRIES", "STEADY_WINDOW_S",
           "next_duration_s", "session_summary", "session_times", "steady_figures", "until_steady", "warm_up_s"]
