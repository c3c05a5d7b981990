"""`deployment: best`: the deployment search's winner for a question, cached on disk.

A search result is decided by the hardware, the systems, the model, the benchmark (dataset and limits),
the scenario, the run length and seed, the GPU budget, the software profile, the starting deployment and
gpusim's own code; `search_key` hashes all of them, so a changed input (or a new version of the code)
misses the cache and searches again. The cache lives under `$GPUSIM_CACHE`, else
`$XDG_CACHE_HOME/gpusim`, else `~/.cache/gpusim`; each entry is one JSON file written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from gpusim.build import Setup
from gpusim.defaults import searched_entry
from gpusim.loadgen.rules import SERVER_LIKE, SUBMISSION_DURATION_S
from gpusim.search import SearchResult, confirm_winner, search_deployments
from gpusim.specs.deployment import AnyDeployment, deployment_type
from gpusim.specs.software import load_software

Log = Callable[[str], None]


def cache_dir() -> Path:
    """Where search results are kept (module docstring)."""
    if os.environ.get("GPUSIM_CACHE"):
        return Path(os.environ["GPUSIM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpusim"


@cache
def code_version() -> str:
    """A hash of gpusim's source: any change to the code invalidates cached searches."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def setup_key(setup: Setup, **question: object) -> str:
    """The hash of everything that decides a result about `setup`: its profiles, deployment, software and timing,
    gpusim's code, and the `question` asked of it (scenario, run length, seed, ...)."""
    parts = {
        "hardware": setup.hardware.model_dump(mode="json"), "model": setup.model.model_dump(mode="json"),
        "benchmark": setup.bench.model_dump(mode="json"), "deployment": setup.deployment.model_dump(mode="json"),
        "software": load_software(setup.deployment.software).model_dump(mode="json"), "timing": setup.timing,
        "code": code_version(), **question,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def search_key(base: Setup, scenario: str, duration_s: float, seed: int, gpus: int | None) -> str:
    """The hash of everything that decides a search's result (its starting deployment among it)."""
    return setup_key(base, scenario=scenario, duration_s=duration_s, seed=seed, gpus=gpus)


@dataclass
class Found:
    """What a search decided: the deployment, the peak it found (Server-like) and its ranking."""

    deployment: AnyDeployment
    scenario: str
    duration_s: float
    peak_qps: float | None
    lowest_invalid_qps: float | None
    tokens_per_s: float
    samples_per_s: float
    num_gpus: int
    screened: int
    ranked: list[dict] = field(default_factory=list)
    shipped: bool = False
    """The winner is the shipped searched default's (`gpusim defaults`), re-measured rather than searched."""
    cached: bool = False

    def to_json(self) -> dict:
        d = asdict(self)
        d["deployment"] = self.deployment.model_dump(mode="json")
        d.pop("cached")
        return d

    @classmethod
    def from_json(cls, d: dict) -> Found:
        dep = d["deployment"]
        return cls(**{**d, "deployment": deployment_type(dep).model_validate(dep), "cached": True})


def find_best(base: Setup, scenario: str, duration_s: float | None = None, seed: int = 0, gpus: int | None = None,
              workers: int = 1, log: Log = lambda _: None, use_cache: bool = True) -> tuple[Found, SearchResult | None]:
    """The best deployment of `base`'s question: from the cache; else, when the shipped searched defaults
    (`gpusim.defaults`) answer exactly this question, their winner re-measured with the current model (its
    peak searched at full length from the shipped one); else by `search_deployments`. The result is returned
    too, and stored. `use_cache=False` searches afresh."""
    duration = duration_s or SUBMISSION_DURATION_S
    path = cache_dir() / "search" / f"{search_key(base, scenario, duration, seed, gpus)}.json"
    if use_cache and path.is_file():
        try:
            found = Found.from_json(json.loads(path.read_text()))
            log(f"search: cached result {path}")
            return found, None
        except (ValueError, TypeError, KeyError):
            pass  # an unreadable entry is searched again and overwritten
    shipped = searched_entry(base.hardware, base.model.id, base.bench.id, scenario, base.deployment.software,
                             duration, seed, gpus) if use_cache and base.timing == "roofline" else None
    if shipped is not None:  # the shipped defaults answer this question: re-measure their winner only
        log(f"search: {shipped.deployment.name}, the shipped searched default (gpusim defaults), re-measured")
        result = confirm_winner(base.with_deployment(shipped.deployment, shipped.deployment.name), scenario,
                                duration, seed, shipped.peak_qps, log=log)
    else:
        result = search_deployments(base, scenario, duration, seed, log=log, gpus=gpus, workers=workers)
    found = from_search(result, scenario, duration)
    found.shipped = shipped is not None
    if use_cache:
        write_atomic(path, json.dumps(found.to_json(), indent=1))
    return found, result


def from_search(result: SearchResult, scenario: str, duration_s: float) -> Found:
    """A search result as the cache keeps it."""
    best, server = result.best, scenario in SERVER_LIKE
    ranked = [{"name": r.setup.deployment.name, "estimate_qps": r.estimate_qps,
               "peak_qps": r.peak.search.peak if server else None,
               "tokens_per_s": r.peak.trial.tokens_per_s,
               "tokens_per_s_per_gpu": r.peak.trial.tokens_per_s / r.peak.trial.result.summary["num_gpus"],
               "limited_by": r.peak.limit, "confirmed": r.peak.confirmed} for r in result.ranked if r.peak]
    summary = best.trial.result.summary
    return Found(best.setup.deployment, scenario, duration_s, best.search.peak if server else None,
                 best.search.lowest_invalid if server else None, best.trial.tokens_per_s,
                 float(summary["samples_per_s"]), int(summary["num_gpus"]), result.screened, ranked)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    Path(tmp).replace(path)


__all__ = ["Found", "cache_dir", "code_version", "find_best", "from_search", "search_key", "setup_key",
           "write_atomic"]
