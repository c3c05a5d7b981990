"""The multi-node recipes InferenceX ran its disaggregated benchmarks with (gpusim/validate/disagg_recipes.csv).

Most disaggregated rows of the silicon sample leave their worker counts empty; they come from InferenceX's
result dumps (`source_file=2026-03-25.csv`, …). InferenceX names each multi-node benchmark in its search
space (`.github/configs/nvidia-master.yaml`, described in its `CONFIGS.md`): per model, runner, precision,
framework, ISL/OSL and concurrency list, the prefill and decode workers, their TP/EP and attention DP,
speculative decoding, and the engine's recipe file (`ctx1_gen4_tep8_batch1_eplb0_mtp0.yaml`: one context
worker, four TEP8 generation workers of batch 1, no MTP). A row measured at one of a recipe's concurrencies
with the same prefill and decode widths ran that recipe, read from the search space as it stood on the
dump's date (the latest revision on or before it that lists the setup). Grade B: the search space names
what was launched; the row does not say which revision ran.

Regenerate the CSV from a clone of https://github.com/SemiAnalysisAI/InferenceX (its history is read):
`python -m gpusim.validate.disagg_recipes PATH/TO/InferenceX`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
import yaml

RECIPES_CSV = Path(__file__).with_name("disagg_recipes.csv")
SEARCH_SPACES = (".github/configs/nvidia-master.yaml", "configs/nvidia-master.yaml")
"""Where the search space has lived in the InferenceX repository."""
SINCE, UNTIL = "2025-12-01", "2026-04-10"
"""Revisions read: those in force while the sample's dumps (2026-03-25, 2026-04-06) were measured."""

MODELS = {"deepseek-r1": "dsr1", "deepseek-v3": "dsr1", "kimi-k2.5": "kimik2.5", "gpt-oss-120b": "gptoss"}
"""gpusim model id → InferenceX model prefix (DeepSeek-V3 rows run DeepSeek-R1's recipes: one architecture)."""
SYSTEMS = {"gb200": "gb200", "gb300": "gb300", "b200_sxm": "b200", "b300_sxm": "b300", "h200_sxm": "h200",
           "h100_sxm": "h100"}
"""Silicon system name → InferenceX runner (its `-multinode`/`-slurm` suffixes dropped)."""
FRAMEWORKS = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang", "vllm": "dynamo-vllm"}

_BATCH = (re.compile(r"_batch(\d+)"), re.compile(r"DECODE_MAX_BATCH_SIZE=(\d+)"))
_MTP = (re.compile(r"_mtp(\d+)"), re.compile(r"DECODE_MTP_SIZE=(\d+)"))
_RECIPE = re.compile(r"CONFIG_FILE=(\S+)")
_EPLB = re.compile(r"_eplb(\d+)")


@dataclass(frozen=True)
class DisaggRecipe:
    """One multi-node benchmark of InferenceX's search space, as a disaggregated row's pools."""

    prefill_workers: int
    prefill_tp: int
    prefill_ep: int
    prefill_dp_attn: bool
    decode_workers: int
    decode_tp: int
    decode_ep: int
    decode_dp_attn: bool
    mtp: bool
    mtp_depth: int | None
    """Drafted tokens per step where the recipe names them (`mtp3`, DECODE_MTP_SIZE), else None."""
    decode_batch: int | None
    """Sequences per decode rank (per attention-DP rank under DEP) where the recipe names them, else None."""
    recipe: str
    revision: str
    date: str

    @property
    def layout(self) -> tuple:
        """The pools without speculative decoding: what several recipes of one setup may share."""
        return (self.prefill_workers, self.prefill_tp, self.prefill_ep, self.prefill_dp_attn, self.decode_workers,
                self.decode_tp, self.decode_ep, self.decode_dp_attn, self.decode_batch)

    @property
    def eplb_slots(self) -> int | None:
        """Expert slots per MoE layer of TensorRT-LLM's load balancer where the recipe's file names them (`eplb288`:
        288 slots, 32 of them replicas of DeepSeek's 256 experts; `eplb0`: no balancer), else None."""
        found = _EPLB.search(Path(self.recipe).stem) if self.recipe else None
        return int(found.group(1)) if found else None

    @property
    def decode_cap(self) -> int | None:
        """Sequences one decode worker holds at most: the batch per rank times its attention-DP ranks, where the
        recipe names a batch (`batch32`), else None."""
        if self.decode_batch is None:
            return None
        return self.decode_batch * (self.decode_tp if self.decode_dp_attn else 1)

    def label(self) -> str:
        """'ctx1_gen4_tep8_batch1_eplb0_mtp0 (InferenceX, listed from 2026-01-30)', or the pools where no file
        is named."""
        name = Path(self.recipe).stem if self.recipe else (
            f"ctx{self.prefill_workers}_gen{self.decode_workers}_{'dep' if self.decode_dp_attn else 'tep'}"
            f"{self.decode_tp}")
        return f"{name} (InferenceX, listed from {self.date})"


@cache
def recipes_table(path: Path = RECIPES_CSV) -> pd.DataFrame:
    """The shipped recipes, one row per benchmark and the dates it was listed: from `listed_from` up to, not
    including, `listed_until`."""
    return pd.read_csv(path, dtype={"revision": str}, keep_default_na=True)


def _opt(value: object) -> int | None:
    return None if pd.isna(value) else int(value)


def find_recipes(model: str, system: str, backend: str, precision: str, isl: int, osl: int, concurrency: int,
                 dump_date: str | None, prefill: tuple[int, int], decode_gpus: int,
                 table: pd.DataFrame | None = None) -> list[DisaggRecipe]:
    """The recipes a row could have run: its setup at its concurrency with prefill (GPUs, EP) and decode GPUs
    as read, listed by the revision in force on `dump_date` (else by the last revision before it that listed
    the setup; without a date, the latest revision)."""
    t = recipes_table() if table is None else table
    key = (MODELS.get(model), SYSTEMS.get(system), FRAMEWORKS.get(backend))
    if None in key:
        return []
    hit = t[(t.model == key[0]) & (t.system == key[1]) & (t.framework == key[2]) & (t.precision == precision)
            & (t.isl == isl) & (t.osl == osl) & (t.concurrency == concurrency) & (t.prefill_tp == prefill[0])
            & (t.prefill_ep == prefill[1]) & (t.decode_tp == decode_gpus)]
    if dump_date:
        hit = hit[hit.listed_from <= dump_date]
    if hit.empty:
        return []
    in_force = hit[hit.listed_until.isna() | (hit.listed_until > (dump_date or "9999"))]
    if in_force.empty:  # dropped before the dump: the last revision that listed the setup
        in_force = hit[hit.listed_until == hit.listed_until.max()]
    return [DisaggRecipe(int(r.prefill_workers), int(r.prefill_tp), int(r.prefill_ep), bool(r.prefill_dp_attn),
                         int(r.decode_workers), int(r.decode_tp), int(r.decode_ep), bool(r.decode_dp_attn),
                         r.spec == "mtp", _opt(r.mtp_depth), _opt(r.decode_batch),
                         "" if pd.isna(r.recipe) else str(r.recipe), str(r.revision), str(r.listed_from))
            for r in in_force.itertuples()]


# ---- regenerate the CSV from InferenceX's history ------------------------------------------------------
def _first(patterns: tuple[re.Pattern, ...], text: str) -> int | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m:
            return int(m.group(1))
    return None


def _benchmarks(document: dict) -> list[dict]:
    """The disaggregated benchmarks of one revision of the search space, one per concurrency."""
    out = []
    for key, entry in document.items():
        if not isinstance(entry, dict) or not entry.get("disagg"):
            continue
        for lengths in entry.get("seq-len-configs", []):
            for space in lengths.get("search-space", []):
                prefill, decode = space["prefill"], space["decode"]
                settings = " ".join(str(s) for role in (prefill, decode) for s in role.get("additional-settings") or [])
                recipe = _RECIPE.search(settings)
                spec = space.get("spec-decoding", "none")
                for concurrency in space.get("conc-list", []):
                    out.append({
                        "model": key.split("-")[0], "system": entry["runner"].split("-")[0],
                        "precision": entry["precision"], "framework": entry["framework"], "isl": lengths["isl"],
                        "osl": lengths["osl"], "concurrency": concurrency, "spec": spec,
                        "prefill_workers": prefill["num-worker"], "prefill_tp": prefill["tp"],
                        "prefill_ep": prefill["ep"], "prefill_dp_attn": bool(prefill.get("dp-attn")),
                        "decode_workers": decode["num-worker"], "decode_tp": decode["tp"], "decode_ep": decode["ep"],
                        "decode_dp_attn": bool(decode.get("dp-attn")),
                        "mtp_depth": _first(_MTP, settings) if spec == "mtp" else None,
                        "decode_batch": _first(_BATCH, settings), "recipe": recipe.group(1) if recipe else ""})
    return out


def extract(repo: Path, since: str = SINCE, until: str = UNTIL) -> pd.DataFrame:
    """Every disaggregated benchmark of the search space's revisions from `since` to `until`, one row per
    benchmark: the date of the first revision that listed it, of the first later one that did not (empty if
    the last revision read lists it) and the last revision that listed it."""
    rows = []
    for path in SEARCH_SPACES:
        log = subprocess.run(["git", "-C", str(repo), "log", "--format=%h %cs", f"--since={since}",
                              f"--before={until}", "--", path], capture_output=True, text=True, check=True)
        for line in log.stdout.splitlines():
            revision, date = line.split()
            text = subprocess.run(["git", "-C", str(repo), "show", f"{revision}:{path}"], capture_output=True,
                                  text=True, check=True).stdout
            rows += [{**b, "revision": revision, "date": date} for b in _benchmarks(yaml.safe_load(text))]
    frame = pd.DataFrame(rows)
    key = [c for c in frame.columns if c not in ("revision", "date")]
    dates = sorted(set(frame.date))
    spans = frame.sort_values("date").groupby(key, dropna=False, sort=True).agg(
        listed_from=("date", "min"), last=("date", "max"), revision=("revision", "last")).reset_index()
    later = {d: next((e for e in dates if e > d), None) for d in dates}
    spans.insert(len(key) + 1, "listed_until", spans.pop("last").map(later))
    for column in ("mtp_depth", "decode_batch"):
        spans[column] = spans[column].astype("Int64")
    return spans


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inferencex", type=Path, help="a git clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("--out", type=Path, default=RECIPES_CSV)
    args = parser.parse_args(argv)
    table = extract(args.inferencex)
    table.to_csv(args.out, index=False)
    print(f"{len(table)} recipes written to {args.out}")


if __name__ == "__main__":
    main()
