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

Each recipe's front end comes from the recipe file in NVIDIA's srt-slurm, which InferenceX's multi-node jobs
run: ten Dynamo frontends behind nginx unless the file turns that off (`DisaggRecipe.front_ends`).

Regenerate the CSV from clones of https://github.com/SemiAnalysisAI/InferenceX and
https://github.com/NVIDIA/srt-slurm (their histories are read):
`python -m gpusim.validate.disagg_recipes PATH/TO/InferenceX PATH/TO/srt-slurm`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

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
    front_ends: int | None = None
    """Dynamo frontends the recipe stood up (srt-slurm: ten behind nginx unless `enable_multiple_frontends` is
    false), where the recipe file was read, else None."""
    file_decode_cap: int | None = None
    """Sequences one decode worker holds at most by the recipe file's engine settings (TensorRT-LLM's
    max_batch_size per attention-DP rank times the ranks; SGLang's max-running-requests, which it splits over
    its DP ranks), where the file was read and states one, else None."""
    file_read: bool = False
    """Whether srt-slurm had the recipe file when InferenceX listed it (a file read that states no decode cap
    leaves the engine's default)."""

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
        """Sequences one decode worker holds at most: the batch per rank its name gives (`batch32`) times its
        attention-DP ranks, else the recipe file's (`file_decode_cap`: SGLang's files name no batch), else None.
        The name comes first: InferenceX lists it with the concurrencies it ran, while a file may have changed
        under one name (`ctx1_gen8_tp8_batch64_eplb0_mtp0_12` on B300 read max_batch_size 1 at concurrency 10 in
        March 2026, where rows measured at 12 show no request waiting for a slot)."""
        if self.decode_batch is not None:
            return self.decode_batch * (self.decode_tp if self.decode_dp_attn else 1)
        return self.file_decode_cap

    @property
    def serving(self) -> dict[str, int]:
        """Deployment fields the recipe file settles: its front ends, where it was read."""
        return {"front_ends": self.front_ends} if self.front_ends is not None else {}

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
                         "" if pd.isna(r.recipe) else str(r.recipe), str(r.revision), str(r.listed_from),
                         _opt(getattr(r, "front_ends", None)), _opt(getattr(r, "file_decode_cap", None)),
                         bool(getattr(r, "file_read", False)))
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


class RecipeFile(NamedTuple):
    """What a recipe file of srt-slurm says beyond InferenceX's listing of it."""

    front_ends: int | None
    decode_cap: int | None
    read: bool = True


def read_recipe_file(srt_slurm: Path, recipe: str, before: str) -> RecipeFile:
    """`recipe` as srt-slurm's last revision before `before` has it (or, where that revision had deleted it, the one
    before the deletion). Front ends: one where its `frontend` section
    sets `enable_multiple_frontends: false`, else `num_additional_frontends` + 1 (srt-slurm's defaults: true and 9,
    `srtctl/core/schema.py` FrontendConfig); None where the front end is not Dynamo's. Decode cap: TensorRT-LLM's
    decode `max_batch_size` (per rank under `enable_attention_dp`), SGLang's decode `max-running-requests`. Both
    None (and `read` false) where the file is absent then."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(srt_slurm), *args], capture_output=True, text=True)

    revision = git("rev-list", "-1", f"--before={before}", "HEAD").stdout.strip()
    shown = git("show", f"{revision}:{recipe}")
    if recipe and revision and shown.returncode:  # deleted before then: as the revision before its deletion had it
        deleted = git("rev-list", "-1", f"--before={before}", "HEAD", "--", recipe).stdout.strip()
        shown = git("show", f"{deleted}^:{recipe}") if deleted else shown
    if not recipe or not revision or shown.returncode:
        return RecipeFile(None, None, read=False)
    doc = yaml.safe_load(shown.stdout) or {}
    front = doc.get("frontend") or {}
    if front.get("type", "dynamo") != "dynamo":
        ends = None
    elif front.get("enable_multiple_frontends", True) is False:
        ends = 1
    else:
        ends = int(front.get("num_additional_frontends", 9)) + 1
    backend = doc.get("backend") or {}
    trt = (backend.get("trtllm_config") or {}).get("decode") or {}
    sgl = (backend.get("sglang_config") or {}).get("decode") or {}
    cap = None
    if trt.get("max_batch_size"):
        ranks = int(trt.get("tensor_parallel_size", 1)) if trt.get("enable_attention_dp") else 1
        cap = int(trt["max_batch_size"]) * ranks
    elif sgl.get("max-running-requests") or sgl.get("max_running_requests"):
        cap = int(sgl.get("max-running-requests") or sgl["max_running_requests"])
    return RecipeFile(ends, cap)


def with_recipe_files(table: pd.DataFrame, srt_slurm: Path, until: str = UNTIL) -> pd.DataFrame:
    """`table` with each recipe file's `front_ends` and `file_decode_cap` as srt-slurm had them when InferenceX
    last listed the recipe."""
    keys = list(zip(table.recipe.fillna(""), table.listed_until.fillna(until), strict=True))
    read = {key: read_recipe_file(srt_slurm, *key) for key in set(keys)}
    out = table.copy()
    out["front_ends"] = pd.array([read[k].front_ends for k in keys], dtype="Int64")
    out["file_decode_cap"] = pd.array([read[k].decode_cap for k in keys], dtype="Int64")
    out["file_read"] = [read[k].read for k in keys]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inferencex", type=Path, help="a git clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("srt_slurm", type=Path, help="a git clone of NVIDIA/srt-slurm (its recipes)")
    parser.add_argument("--out", type=Path, default=RECIPES_CSV)
    args = parser.parse_args(argv)
    table = with_recipe_files(extract(args.inferencex), args.srt_slurm)
    table.to_csv(args.out, index=False)
    print(f"{len(table)} recipes written to {args.out}")


if __name__ == "__main__":
    main()
