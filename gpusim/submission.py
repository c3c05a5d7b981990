"""What an MLPerf submission would report, judged by LoadGen's rules (`gpusim mlperf`, `gpusim.mlperf`), and the
best deployment for an MLPerf question (`gpusim.search`).

Offline → tokens/s; Server/Interactive → the peak valid Poisson QPS (searched at full duration,
`gpusim.search.peak_qps`) and its completed tokens/s; searching also picks the best deployment; `loadgen`
replays the result with the real MLPerf LoadGen driving the simulated system in real time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpusim.analysis.describe import batch_limits, layout_text
from gpusim.best import Found, find_best
from gpusim.build import Setup, prepare
from gpusim.errors import InputError
from gpusim.loadgen.metrics import SERVER_LIKE
from gpusim.loadgen.rules import SUBMISSION_DURATION_S
from gpusim.search import PeakResult, PeakSearch, SearchResult, peak_qps, searchable, trial
from gpusim.specs.experiment import Timing
from gpusim.specs.loading import read_yaml, validate

Log = Callable[[str], None]


class Question(BaseModel):
    """An MLPerf question: hardware, benchmark, scenario and how long and how the runs are simulated."""

    model_config = ConfigDict(extra="forbid")

    hardware: str
    systems: int = Field(1, ge=1)
    benchmark: str
    scenario: Literal["offline", "server", "interactive", "singlestream"]
    duration_s: float = Field(SUBMISSION_DURATION_S, gt=0)
    """Simulated seconds per run, also the min duration: as long as submitters run (600 is LoadGen's minimum)."""
    seed: int = 0
    timing: Timing = "roofline"
    """How kernels are timed: the fitted roofline, or NVIDIA's measured tables (`table`)."""
    software: str | None = None
    """The software profile every deployment runs (default: the deployment's own), e.g. `trtllm-v5.1`."""


class SearchRun(Question):
    """A deployment search for a question (`gpusim.search`)."""

    workers: int = Field(1, ge=1)
    """Search contenders simulated at once, in separate processes."""
    use_cache: bool = True
    """Recall this question's cached result (and the shipped searched defaults); False searches again."""


class MlperfExperiment(Question):
    """One claim in experiments/mlperf/*.yaml."""

    deployment: str | None = None
    """A deployment YAML, relative to the experiment file; `default` for the default deployment, `best` (or
    unset) for the searched best."""
    search: bool = True
    """Search the best deployment (cached, `gpusim.best`) unless a deployment is named."""
    claim: str = ""
    """What the experiment reproduces, in words."""


class MlperfRun(MlperfExperiment, SearchRun):
    """One `gpusim mlperf` result: the experiment and how to run it."""

    search: bool | None = None
    """Search the best deployment; None: search unless a deployment or a QPS is given."""
    qps: float | None = Field(None, gt=0)
    """Judge this Server/Interactive QPS instead of searching the peak."""
    loadgen: bool = False
    """Also run the real MLPerf LoadGen against the simulated system in real time."""
    min_duration_s: float = Field(600.0, gt=0)
    """LoadGen's min duration in real seconds for `loadgen`."""
    loadgen_dir: Path | None = None
    """Where `loadgen` writes LoadGen's logs (a fresh temporary folder by default)."""

    @model_validator(mode="after")
    def _search_unless_told(self) -> MlperfRun:
        if self.search is None:
            self.search = self.deployment in (None, "best") and self.qps is None
        return self


@dataclass(frozen=True)
class Submission:
    """What `gpusim mlperf` reports: `summary` is its `--json` object, `log_summary` its
    mlperf_log_summary.txt."""

    summary: dict
    log_summary: str


def question_setup(q: Question, deployment: str | None, source: str) -> Setup:
    """The setup of `q` with `deployment` (None: the default), checked to have `q`'s scenario in MLPerf."""
    setup = prepare(q.hardware, q.benchmark, q.systems, deployment, source, timing=q.timing, scenario=q.scenario,
                    software=q.software)
    if q.scenario in SERVER_LIKE and setup.bench.limits(q.scenario) is None:
        raise InputError("command line", "scenario", f"{q.benchmark} has no {q.scenario} scenario in MLPerf")
    return setup


def _find(setup: Setup, run: SearchRun, log: Log) -> tuple[Found, SearchResult | None]:
    return find_best(setup, run.scenario, run.duration_s, run.seed, workers=run.workers, log=log,
                     use_cache=run.use_cache)


def best_for(run: SearchRun, log: Log = lambda _: None) -> Found:
    """The searched best deployment for `run`'s question (cached on disk, `gpusim.best.find_best`)."""
    return _find(question_setup(run, None, "command line"), run, log)[0]


def mlperf_result(run: MlperfRun, log: Log = lambda _: None) -> tuple[dict, str]:
    """The JSON object and the mlperf_log_summary.txt text of one `gpusim mlperf` result."""
    from gpusim.analysis.mlperf import log_summary

    wanted = run.search and run.deployment in (None, "best")
    setup = question_setup(run, None if wanted else run.deployment, run.deployment or "command line")
    searching = wanted and searchable(setup, run.scenario)
    server = run.scenario in SERVER_LIKE
    if run.qps is not None and not server:
        raise InputError("command line", "qps", "only Server/Interactive take --qps (Offline and SingleStream "
                         "size themselves)")
    peak, found = None, None
    if searching:
        found, sr = _find(setup, run, log)
        if sr is not None:
            peak = sr.best
        else:  # a cached search: the confirming run of its winner, exactly as the search ran it
            best = setup.with_deployment(found.deployment, found.deployment.name)
            t = trial(best, run.scenario, found.peak_qps, run.duration_s, run.seed)
            peak = PeakResult(best, t, PeakSearch(found.peak_qps or 0.0, found.lowest_invalid_qps or 0.0), None,
                              True, 1)
        t = peak.trial if run.qps is None else trial(peak.setup, run.scenario, run.qps, run.duration_s, run.seed)
    elif server and run.qps is None:
        peak = peak_qps(setup, run.scenario, run.duration_s, run.seed, log=log)
        t = peak.trial
    else:
        t = trial(setup, run.scenario, run.qps, run.duration_s, run.seed)
    s, chosen = t.result.summary, t.result.summary["deployment"]
    samples_per_s, tokens_per_s = s["samples_per_s"], t.tokens_per_s  # the whole run's (run_length.py)
    out = {
        "hardware": run.hardware, "systems": run.systems, "benchmark": run.benchmark, "scenario": run.scenario,
        "num_gpus": s["num_gpus"],
        "result": s["result"], "result_unit": s["result_unit"],
        "result_tokens_per_s": tokens_per_s,
        "result_tokens_per_s_per_gpu": tokens_per_s / s["num_gpus"],
        "loadgen_tokens_per_s_this_draw": s["output_tokens_per_s"],
        "result_draw_range": s.get("output_tokens_per_s_draw_range"),
        "valid": t.valid, "invalid_reason": t.checks.reason,
        "peak_qps": (peak.search.peak if peak is not None and server else t.qps) if server else None,
        "samples_per_s": samples_per_s,
        "ttft_p99_s": s["ttft_p99_s"], "tpot_p99_s": s["tpot_p99_s"],
        "min_duration_s": t.checks.min_duration_s, "conformant_duration": t.checks.min_duration_s >= 600.0,
        "early_stopping": {e.metric: {"overlatency": e.overlatency, "queries_issued": e.queries_issued,
                                      "min_queries": e.min_queries, "met": e.met} for e in t.checks.early_stopping},
        "deployment": chosen, "instances": s["instances"], "timing": run.timing,
    }
    notes: dict[str, object] = {"deployment": _describe(chosen, s["instances"]),
                                "simulated s (wall s)": f"{s['simulated_s']:.1f} ({s['wall_s']:.2f})",
                                "kernel timing": run.timing}
    if (how := s.get("run_length") or {}).get("skipped_requests"):
        notes["run length"] = (f"{how['simulated_requests']:,} of {how['issued_requests']:,} samples simulated, "
                               f"{how['skipped_s']:,.0f} s of the stationary middle at its steady rate "
                               f"(±{100 * how['uncertainty']:.1f}%)")
    if (span := s.get("output_tokens_per_s_draw_range")) is not None:
        notes["expected tokens/s"] = (f"{tokens_per_s:,.1f} over the last-scheduled query's draw (this run's "
                                      f"{s['output_tokens_per_s']:,.1f}; 90% of draws {span[0]:,.0f}-{span[1]:,.0f})")
    if peak is not None and server:
        out.update(peak_search_runs=peak.runs, limited_by=peak.limit, lowest_invalid_qps=peak.search.lowest_invalid)
        notes.update({"peak QPS": f"{peak.search.peak:.3f} (VALID); {peak.search.lowest_invalid:.3f} INVALID",
                      "limited by": peak.limit, "runs": peak.runs})
    if found is not None:
        out["search"] = found.ranked
        out["search_screened"] = found.screened
        out["search_cached"] = found.cached
        out["search_shipped"] = found.shipped
        if found.shipped:
            notes["search"] = (f"{found.deployment.name}: the shipped searched default (gpusim defaults), "
                               "re-measured; --no-cache searches again")
        else:
            notes["search"] = f"{found.screened} deployments fit; simulated: " + "; ".join(
                f"{r['name']} {r['tokens_per_s']:,.0f} tok/s" for r in out["search"])
            notes["why"] = _why(out["search"])
    text = log_summary(s, t.result.requests, t.checks, notes)
    if run.loadgen:
        out["loadgen"], out["loadgen_gpusim"] = _loadgen(run, out, peak.setup if peak is not None else setup)
    return out, text


def _loadgen(run: MlperfRun, out: dict, setup: Setup) -> tuple[dict, dict]:
    """Replay the result with the real LoadGen: LoadGen's own figures and gpusim's for the same run."""
    from gpusim.loadgen.real import run_loadgen

    qps = out["peak_qps"] if run.scenario != "offline" else out["samples_per_s"]
    log_dir = run.loadgen_dir if run.loadgen_dir is not None else Path(tempfile.mkdtemp(prefix="gpusim-loadgen-"))
    lg = run_loadgen(setup, run.scenario, log_dir, qps=qps, min_duration_s=run.min_duration_s, seed=run.seed)
    mine = {"tokens_per_s": lg.summary["result_tokens_per_s"], "ttft_p99_s": lg.summary["ttft_p99_s"],
            "tpot_p99_s": lg.summary["tpot_p99_s"], "valid": lg.checks.valid, "reason": lg.checks.reason,
            "log_dir": str(log_dir)}
    return lg.loadgen, mine


def _describe(dep: dict, instances: int) -> str:
    limits = batch_limits(dep)
    return (f"{dep['name']}: {instances} × {layout_text(dep)}, weights {dep['weights']}, KV {dep['kv_cache']}, "
            f"batch {limits['max_batch_size']}, tokens {limits['max_num_tokens']}")


def _why(rows: list[dict]) -> str:
    if len(rows) < 2:
        return "only one deployment simulated"
    a, b = rows[0], rows[1]
    gain = a["tokens_per_s"] / b["tokens_per_s"] - 1 if b["tokens_per_s"] else float("inf")
    return (f"{a['name']} beats {b['name']} by {gain:+.1%} tokens/s"
            + (f"; the runner-up is limited by: {b['limited_by']}" if b.get("limited_by") else ""))


# ---- experiments -------------------------------------------------------------------------------
def load_experiment(path: Path) -> MlperfExperiment:
    """Read an experiments/mlperf YAML; a relative deployment path is relative to the file."""
    data = read_yaml(path)
    dep = data.get("deployment")
    if isinstance(dep, str) and dep not in ("best", "default") and not Path(dep).is_absolute():
        data["deployment"] = str(path.parent / dep)
    return validate(MlperfExperiment, data, str(path))


def published_for(exp: Question, num_gpus: int, csv: Path) -> dict | None:
    """The newest published row for the same hardware, benchmark and scenario (same GPU count preferred)."""
    from gpusim.analysis.published import read_published

    if not csv.is_file():
        return None
    rows = [r for r in read_published(csv)
            if r.hardware == exp.hardware and r.benchmark == exp.benchmark and r.scenario == exp.scenario]
    if not rows:
        return None
    best = max(rows, key=lambda r: (r.gpus == num_gpus, r.round, r.value))
    return {"round": best.round, "gpus": best.gpus, "tokens_per_s_per_gpu": best.tokens_per_s_per_gpu}
