"""Generation ratios on the silicon sample: one setup measured on two GPUs, the measured speed-up beside the
predicted one.

A setup here is what a row measured with the GPU left out: every column but the id, the source, the results and
the system, plus the concurrency (`silicon._setup_keys` with `GENERATION_BLIND`); the engine's version stays in,
so a speed-up compares the hardware on the same software.
Where the sample measured a setup on both GPUs of a `GENERATION_PAIRS` entry, the newer GPU's speed-up is
older / newer, for TTFT and for TPOT (a system's repeated measurements of the setup averaged first), and the
prediction's speed-up is the same quotient of the predictions. Per pair, and per pair × model × backend × mode,
the medians of both and the median of predicted / measured speed-up: 1 puts the generations as far apart as
the silicon does, below 1 the model compresses them, above 1 it spreads them.
"""

from __future__ import annotations

import pandas as pd

GENERATION_PAIRS: tuple[tuple[str, str], ...] = (
    ("b300_sxm", "b200_sxm"), ("gb300", "gb200"), ("b200_sxm", "h200_sxm"), ("h200_sxm", "h100_sxm"))
"""(newer, older) systems of the silicon sample compared on the setups both measured."""
GENERATION_BLIND = ("system",)
"""Columns a generation pair may differ in. Letting the engine's version differ too would pair 189 rather than 126
B300/B200 setups, but mixes software gains in: SGLang 0.5.10 on B300 against 0.5.9 on B200 reads as B300 at half
B200's prompt speed on DeepSeek-V3."""
WITHIN = 0.10
"""A setup's predicted speed-up counts as right within this share of the measured one."""
_METRICS = ("ttft", "tpot")


def paired(setups: pd.Series, systems: pd.Series) -> pd.Series:
    """Which rows (their generation-blind setup and system) belong to a setup measured on both GPUs of a pair."""
    on = {s: set(setups[systems == s]) for s in {s for pair in GENERATION_PAIRS for s in pair}}
    both = set().union(*(on[new] & on[old] for new, old in GENERATION_PAIRS))
    return setups.isin(both) & systems.isin(list(on))


_GROUP = ["model_path", "backend", "mode"]
"""What a pair's setups are summarised by, beside the pair itself (a setup determines all three)."""


def _speedups(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Per pair with a setup measured and predicted on both GPUs: one row per such setup, its measured and
    predicted speed-ups (older / newer) and their agreement."""
    cols = [f"{kind}_{m}" for kind in ("measured", "predicted") for m in _METRICS]
    per = table[table["predicted"]].groupby(["generation_setup", "system", *_GROUP], as_index=False)[cols].mean()
    out = []
    for new, old in GENERATION_PAIRS:
        both = per[per["system"] == new].merge(per[per["system"] == old], on=["generation_setup", *_GROUP],
                                               suffixes=("_new", "_old"))
        frame = both[_GROUP].copy()
        for m in _METRICS:
            for kind in ("measured", "predicted"):
                frame[f"{kind}_{m}"] = both[f"{kind}_{m}_old"] / both[f"{kind}_{m}_new"]
            frame[f"agreement_{m}"] = frame[f"predicted_{m}"] / frame[f"measured_{m}"]
        if not frame.empty:
            out.append((f"{new} / {old}", frame))
    return out


def _summary(pair: str, group: str, frame: pd.DataFrame) -> dict:
    row: dict = {"pair": pair, "group": group, "setups": len(frame)}
    for m in _METRICS:
        for kind in ("measured", "predicted", "agreement"):
            row[f"{kind}_{m}"] = float(frame[f"{kind}_{m}"].median())
        row[f"within_{m}"] = float(((frame[f"agreement_{m}"] - 1).abs() <= WITHIN).mean())
    return row


def generation_ratios(table: pd.DataFrame) -> list[dict]:
    """Per pair (group 'all') and per pair × model × backend × mode: setups, the median measured and predicted
    speed-ups and their median agreement (predicted / measured), per metric, and the share of setups whose
    agreement is within `WITHIN` of 1. `table` is `silicon.scored_table`'s."""
    rows = []
    for pair, frame in _speedups(table):
        rows.append(_summary(pair, "all", frame))
        rows += [_summary(pair, ", ".join(key), g) for key, g in frame.groupby(_GROUP)]
    return rows


__all__ = ["GENERATION_BLIND", "GENERATION_PAIRS", "WITHIN", "generation_ratios", "paired"]
