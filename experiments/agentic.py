"""Agentic coding traffic on GB200, GB300 and Vera Rubin NVL72 racks and a B300 HGX node.

    python experiments/agentic.py [--workers 2]

Sessions of the `agentic-coding` benchmark (workloads/benchmarks/agentic-coding.yaml) start as a Poisson process.
For each system and each candidate deployment (the searched Server default, aggregated, and disaggregated splits
of its GPUs into prefill and decode pools of DEP4 and DEP8 instances, the same widths on every system), the
session rate climbs a grid of rates (×√2 apart) from the best rate found so far until the service level fails;
the system's answer is its highest rate that meets the service level and the deployment that ran it. The service
level is judged in steady state: sessions start for as long as the load takes to level off plus a window
(`gpusim/analysis/sessions.py`, `steady_figures`), and only the calls begun in that window count; a rate that
fails already in the first 600 s of session starts, whose load is lower, is not run longer. Then, on each
system's answer: where a prefill chunk's and a decode step's time goes, and the KV-tier what-if (HBM only, host
memory, host and storage) on the same traffic with tool calls 20x longer (test suites, builds, a person reading),
where contexts wait long enough to leave HBM: 600 s of session starts, a load still climbing, whose tiers compare
on the same traffic.

Writes docs/agentic.md. Every figure comes from the model; see the benchmark file for each input's source and grade.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import yaml

import gpusim
from gpusim.analysis.describe import layout_text
from gpusim.analysis.frontier import draw_fronts, fronts
from gpusim.analysis.sessions import STEADY_WINDOW_S, until_steady
from gpusim.api import setup_for
from gpusim.build import Setup, prepare
from gpusim.perf.step import BatchShape
from gpusim.specs.experiment import RunSpec
from gpusim.specs.hardware import KV_TIER_ORDER
from gpusim.specs.model import load_model

ROOT = Path(__file__).resolve().parents[1]
BENCH = "agentic-coding"
SLO = {"ttft_p99_s": 5.0, "tpot_p99_s": 0.050}
"""The service level: every call's first token within 5 s and its tokens at 20 per second or faster, at p99."""
DURATION_S = 600.0
"""Seconds of session starts of a first, short run at a rate: a rate that fails there (its load still climbing)
fails in steady state too; one that passes runs again until its load is steady (`judge`)."""
GRID = [2**-5 * math.sqrt(2) ** k for k in range(20)]
FLOOR = 4.0
"""A candidate's climb starts at the best rate so far over this."""
SYSTEMS = ["gb200-nvl72", "gb300-nvl72", "vr-nvl72", "b300-hgx"]
PREFILL_SHARES = (0.55, 0.67, 0.78)
"""Shares of a system's instances the disaggregated candidates give to prefill."""
POOL_WIDTHS = (4, 8)
"""GPUs of each disaggregated candidate's prefill and decode instances (attention DP and EP over all of them)."""
TIER_CHOICES = {"HBM only": [], "host memory": ["host"], "host and storage": ["host", "storage"],
                "host, storage and network": ["host", "storage", "network"]}
TIER_SYSTEMS = ("gb300-nvl72", "vr-nvl72", "b300-hgx")
GQA_MODEL, GQA_SYSTEM = "llama3.1-70b", "gb300-nvl72"
"""The tier what-if also serves the same sessions with a GQA model, whose KV per token is several times
DeepSeek-R1's MLA latent, on this system's rule deployment at its DeepSeek-R1 rate."""
LONG_TOOLS = 20.0
"""The tier what-if's tool calls, this many times the benchmark's."""


def candidates(hw: str) -> dict[str, object]:
    """The searched Server default (aggregated) and disaggregated splits of a system's GPUs into DEP instances of
    each width in `POOL_WIDTHS` (and the default's own): prefill-heavy, as agent calls bring thousands of new
    tokens each over a long cached context and answer in a few hundred. Every system gets the same widths, so
    a ratio between two systems does not follow whichever width each one's Server search happened to pick."""
    setup = prepare(hw, BENCH, scenario="sessions")
    base = setup.deployment
    out: dict[str, object] = {"default (aggregated)": None}
    shared = {k: getattr(base, k) for k in ("software", "weights", "activations", "kv_cache", "frontend")}
    rank_batch, rank_tokens = base.max_batch_size / base.tp, base.max_num_tokens / base.tp
    for width in sorted({base.tp, *POOL_WIDTHS}):
        count = setup.num_gpus // width
        if width > setup.hardware.domain_gpus or count < 2:
            continue
        pool = {"tp": width, "ep": width, "attention_dp": True}
        batch, tokens = round(rank_batch * width), round(rank_tokens * width)
        for prefill in sorted({max(1, round(count * share)) for share in PREFILL_SHARES} & set(range(1, count))):
            out[f"disaggregated {prefill}P:{count - prefill}D DEP{width}"] = {
                "name": f"agentic-{prefill}p{count - prefill}d-dep{width}", "mode": "disaggregated", **shared,
                "prefix_cache": True, "router": "kv_aware",
                "prefill": {**pool, "instances": prefill, "max_batch_size": 512, "max_num_tokens": tokens},
                "decode": {**pool, "instances": count - prefill, "max_batch_size": batch, "max_num_tokens": batch}}
    return out


def setup_of(hw: str, deployment: object, model: str | None = None) -> Setup:
    """The setup a sessions run of `deployment` (None, a deployment or its fields as a dict) uses."""
    return setup_for(RunSpec(hardware=hw, benchmark=BENCH, scenario="sessions", session_rate=1.0,
                             deployment=deployment, model=model))


def run(hw: str, rate: float, deployment: object, bench: str = BENCH, model: str | None = None,
        duration_s: float = DURATION_S) -> tuple[dict, dict]:
    """A run's summary and where its typical steps' time goes (`model` serves the sessions instead of the
    benchmark's), with `duration_s` of session starts."""
    r = gpusim.run(hw, bench, "sessions", session_rate=rate, duration_s=duration_s, deployment=deployment,
                   model=model)
    return r.summary, r.steps


def within(s: dict, figures: dict) -> bool:
    """Whether every session completed and `figures` (a summary, or its steady block) have p99s within the SLO."""
    a = s["sessions"]
    return (a["completed_sessions"] == a["sessions"] and figures["ttft_p99_s"] is not None
            and figures["ttft_p99_s"] <= SLO["ttft_p99_s"] and figures["tpot_p99_s"] <= SLO["tpot_p99_s"])


def meets(s: dict) -> bool:
    """Whether a run meets the service level in steady state (its calls begun once the load levelled off)."""
    steady = s["sessions"]["steady"]
    return steady["steady"] and within(s, steady)


def judge(hw: str, rate: float, deployment: object, durations: list[float]) -> tuple[dict, dict]:
    """The run that decides `rate`: the short run where it already fails over all its calls, else a run with
    session starts until its load is steady (`meets`), from the longest duration a run of this system needed
    so far (`durations`, which it extends; `analysis.sessions.until_steady`)."""
    first = run(hw, rate, deployment)
    if not within(first[0], first[0]):
        return first

    def longer(duration: float) -> tuple[dict, dict]:
        durations.append(duration)
        return run(hw, rate, deployment, duration_s=duration)

    s, steps, _ = until_steady(first, longer, max(durations))  # not steady, or overloaded: it fails (`meets`)
    return s, steps


def best_of(hw: str) -> dict:
    """The highest grid rate any candidate serves at the service level, the candidate and its run, and every run as
    a point of the throughput–interactivity front. Each candidate climbs from a quarter of the best rate so far
    (the first from the grid's lowest), so the front has points below every candidate's capacity too."""
    started = time.perf_counter()
    best: dict = {"rate": 0.0, "candidate": None, "summary": None, "tried": {}, "points": [], "durations": [DURATION_S]}
    for label, dep in candidates(hw).items():
        reached = 0.0
        for rate in (r for r in GRID if r >= best["rate"] / FLOOR):
            s, steps = judge(hw, rate, dep, best["durations"])
            best["points"].append(point(hw, label, rate, s))
            if not meets(s):
                break
            reached = rate
            if rate > best["rate"] or best["summary"] is None:
                best.update(rate=rate, candidate=label, deployment=dep, summary=s, steps=steps)
        best["tried"][label] = reached
    refine(hw, best)
    best["wall_s"] = time.perf_counter() - started
    return {"hw": hw, **best}


BISECTIONS = 3
"""Halvings of the best candidate's last grid step (×√2) in log rate: its rate is known to within 2^(1/16), 4.4%."""


def refine(hw: str, best: dict) -> None:
    """Bisect the best candidate's rate between the highest grid rate it met and the next (`BISECTIONS` times), so
    that a system's answer, and a ratio of two systems, is not quantised to the grid's ×√2."""
    if best["summary"] is None:
        return
    lo, hi = best["rate"], best["rate"] * math.sqrt(2)
    for _ in range(BISECTIONS):
        rate = math.sqrt(lo * hi)
        s, steps = judge(hw, rate, best["deployment"], best["durations"])
        best["points"].append(point(hw, best["candidate"], rate, s))
        if meets(s):
            lo = rate
            best.update(rate=rate, summary=s, steps=steps)
        else:
            hi = rate


def point(hw: str, label: str, rate: float, s: dict) -> dict:
    """One run as a front point (the columns `analysis.frontier.draw_fronts` reads): output tokens/s per GPU against
    the median user's tokens/s while generating, of the calls begun in its steady window; it may stand on the front
    where it meets the service level there. A short run that failed is a point off the front, at its whole run's
    figures."""
    steady = s["sessions"]["steady"]
    if not steady["steady"]:
        return {"hardware": hw, "deployment": label, "session_rate": rate, "meets_limits": False,
                "tokens_per_s_per_user": s["sessions"]["tokens_per_s_per_user_p50"],
                "tokens_per_s_per_gpu": s["steady_output_tokens_per_s_per_gpu"]}
    return {"hardware": hw, "deployment": label, "session_rate": rate, "meets_limits": meets(s),
            "tokens_per_s_per_user": steady["tokens_per_s_per_user_p50"],
            "tokens_per_s_per_gpu": steady["output_tokens_per_s"] / s["num_gpus"]}


def front_points(bests: list[dict]) -> pd.DataFrame:
    """Every run's point, with `on_front` per system."""
    points = pd.DataFrame([p for b in bests for p in b.get("points", [])])
    return points.assign(on_front=fronts(points)) if not points.empty else points


def front_lines(points: pd.DataFrame) -> list[str]:
    """The front's section: its figure and, per system, the ends of its front."""
    lines = ["", "## Throughput against interactivity", "",
             "Every run of the climbs above as a point: steady output tokens/s per GPU against the median user's "
             "tokens/s while generating, filled where it meets the service level in a steady state, each system's "
             "front joining those no other beats on both (`python experiments/agentic.py` draws it; the front of "
             "docs/frontier.md, for agent sessions):", "", f"![Agentic front](figures/{FRONT_FIGURE})", "",
             "| system | runs | on the front | most tokens/s/GPU on it (tokens/s/user, deployment) | "
             "most tokens/s/user on it (tokens/s/GPU, deployment) |", "|---|---|---|---|---|"]
    for hw, g in points.groupby("hardware", sort=False):
        f = g[g["on_front"]]
        if f.empty:
            lines.append(f"| {hw} | {len(g)} | 0 | - | - |")
            continue
        top, fast = f.loc[f["tokens_per_s_per_gpu"].idxmax()], f.loc[f["tokens_per_s_per_user"].idxmax()]
        lines.append(f"| {hw} | {len(g)} | {len(f)} | {top['tokens_per_s_per_gpu']:,.0f} "
                     f"({top['tokens_per_s_per_user']:.0f}, {top['deployment']}) | "
                     f"{fast['tokens_per_s_per_user']:.0f} ({fast['tokens_per_s_per_gpu']:,.0f}, "
                     f"{fast['deployment']}) |")
    return lines


FRONT_FIGURE = "agentic-frontier.png"


CONTEXTS = (16_384, 32_768, 65_536, 131_072)
NEW_TOKENS = 3_000
"""A call's uncached tokens (a tool result, and what of the previous answer did not fill a whole cached block),
prefilled over its cached context."""
DECODE_SEQS = 64


def context_growth(best: dict) -> dict[int, tuple[float, float]]:
    """On a system's best deployment, per context length: the prefill of one call's new tokens after that much
    cached context, and a decode step of `DECODE_SEQS` sequences at that context (seconds, from the cost model)."""
    setup = setup_of(best["hw"], best["deployment"])
    prefill_cost, decode_cost = setup.pools[0].cost, setup.pools[-1].cost
    c = NEW_TOKENS
    return {ctx: (prefill_cost.step_time(BatchShape(prefill_tokens=c, prefill_attn_pairs=c * ctx + c * (c + 1) / 2,
                                                    prefill_seqs=1)),
                  decode_cost.step_time(BatchShape(decode_seqs=DECODE_SEQS, decode_context=DECODE_SEQS * ctx)))
            for ctx in CONTEXTS}


def long_tools_benchmark(folder: Path) -> str:
    """agentic-coding with tool calls `LONG_TOOLS` times longer, as a benchmark file in `folder`."""
    spec = yaml.safe_load((ROOT / "workloads" / "benchmarks" / f"{BENCH}.yaml").read_text())
    tool = spec["agentic"]["tool_s"]
    tool.update(mu=tool["mu"] + math.log(LONG_TOOLS), max=tool["max"] * LONG_TOOLS,
                fitted_to={k: v * LONG_TOOLS for k, v in tool["fitted_to"].items()},
                source=f"{LONG_TOOLS:g}x the tool time of {BENCH} (a what-if)")
    spec["id"] = f"{BENCH}-long-tools"
    path = folder / f"{spec['id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def tiers(best: dict, bench: str, model: str | None = None) -> list[dict]:
    """The best deployment of a system at its rate, on long-tool traffic, with each choice of KV tiers; with
    `model`, that model on its rule deployment at the same rate."""
    base = setup_of(best["hw"], None if model else best["deployment"], model).deployment
    rows = []
    for label, offload in TIER_CHOICES.items():
        dep = base.model_copy(update={"kv_offload": offload})
        s, _ = run(best["hw"], best["rate"], dep, bench, model)
        rows.append({"hw": best["hw"], "model": s["model"], "tiers": label, "summary": s})
    return rows


def kv_text(model: str) -> str:
    """A model's KV cache per token at FP8, over all layers."""
    return f"{load_model(model).kv_bytes(1, 1) / 1024:,.0f} KB"


def _session_cells(s: dict, steady: bool = False) -> str:
    """Session times, p99 TTFT and TPOT, the median user's tokens/s and prefix hits: of the calls begun in the
    steady window with `steady`, else of every call."""
    a = s["sessions"]
    f = a["steady"] if steady else {**s, "tokens_per_s_per_user_p50": a["tokens_per_s_per_user_p50"]}
    return (f"{a['session_time_p50_s']:,.0f} | {a['session_time_p99_s']:,.0f} | {f['ttft_p99_s']:.2f} | "
            f"{f['tpot_p99_s'] * 1e3:.0f} | {f['tokens_per_s_per_user_p50']:.0f} | {s['prefix_hit_rate']:.0%}")


def _share(step: dict, ops: tuple[str, ...]) -> str:
    part = sum(step["by_op"].get(op, 0.0) for op in ops)
    return f"{step['total_s'] * 1e3:,.1f} ms, {part / step['total_s']:.0%} attention"


def growth_lines(growth: dict[str, dict[int, tuple[float, float]]]) -> list[str]:
    """The context-growth table, with each system's time over GB300's where both are there."""
    ref = growth.get("gb300-nvl72")
    lines = ["", f"How a call's cost grows with its context, on each system's best deployment (the cost model's step "
             f"time: the prefill of a call's {NEW_TOKENS:,} new tokens after the cached context, and a decode step "
             f"of {DECODE_SEQS} sequences at that context; in brackets, GB300 NVL72's time over the system's):", "",
             "| system | " + " | ".join(f"{c // 1024}k prefill ms | {c // 1024}k decode ms" for c in CONTEXTS) + " |",
             "|---|" + "---|---|" * len(CONTEXTS)]
    for hw, g in growth.items():
        cells = []
        for c in CONTEXTS:
            for k in (0, 1):
                ratio = f" ({ref[c][k] / g[c][k]:.2f}x)" if ref and hw != "gb300-nvl72" else ""
                cells.append(f"{g[c][k] * 1e3:,.1f}{ratio}")
        lines.append(f"| {hw} | " + " | ".join(cells) + " |")
    return lines


def page(bests: list[dict], tier_rows: list[dict], steps: dict[str, dict], growth: dict, wall_s: float) -> str:
    by_hw = {b["hw"]: b for b in bests}
    lines = [
        "# Agentic traffic: coding-agent sessions on racks",
        "",
        f"Generated by `python experiments/agentic.py` ({wall_s / 60:,.0f} min on 2 cores). Every figure is the "
        "model's; the traffic's inputs, their sources and grades are in `workloads/benchmarks/agentic-coding.yaml`.",
        "",
        "## The traffic",
        "",
        "A session is a coding agent at work: a main agent's calls (about 31 per session, GitHub Copilot's coding-"
        "agent dataset, grade B), each prompt the agent's whole context so far (a 20k-token system prompt and tools, "
        "then every earlier call, answer and tool result: contexts reach DeepSeek-R1's 128k window, where the session"
        " ends), answers of about 530 tokens, a tool call of about 5 s between calls (grade D: no measured tool times"
        " are published as text), and now and then three sub-agents of 8 calls each over contexts of their own, whose"
        " answers the main agent's next call waits for (SemiAnalysis AgentX, grade C). Sessions start as a Poisson "
        "process. The engine keeps each call's full blocks, its prompt's and its answer's, in its prefix cache (as "
        "vLLM caches generated tokens' blocks too); the router sends a call where its context lives unless that "
        "instance is busier than the context is worth (`kv_aware`).",
        "",
        "Run it yourself: a few seconds of sessions on one rack, then a trace of two sessions written by hand "
        "(gpusim's session trace format: one JSON object per LLM call, `session`, `call`, `agent` (default 0; an "
        "agent's calls share one growing context), `new_tokens` (what the call adds to its agent's context; the "
        "first call's whole prompt), `output_tokens`, `start_s` for a session's first call, and `after` (calls of "
        "the session on earlier lines) with `delay_s` (the tool call's time) for every other call; a bad line is "
        "refused with its field and line number):",
        "",
        "```bash",
        "gpusim run --hardware gb300-nvl72 --benchmark agentic-coding --scenario sessions --session-rate 0.5 "
        "--duration 120",
        "cat > sessions.jsonl <<'EOF'",
        '{"session": "s1", "call": "m0", "start_s": 0, "new_tokens": 20000, "output_tokens": 400}',
        '{"session": "s1", "call": "e0", "agent": "explore", "after": ["m0"], "delay_s": 1.5, "new_tokens": 11000, '
        '"output_tokens": 300}',
        '{"session": "s1", "call": "m1", "after": ["m0", "e0"], "delay_s": 0.5, "new_tokens": 2600, '
        '"output_tokens": 500}',
        '{"session": "s2", "call": "m0", "start_s": 3, "new_tokens": 18000, "output_tokens": 350}',
        "EOF",
        "gpusim run --hardware b300-hgx --benchmark agentic-coding --scenario trace --trace sessions.jsonl",
        "```",
        "",
        "## Sessions per rack at a service level",
        "",
        f"Service level: every call's TTFT within {SLO['ttft_p99_s']:g} s and TPOT within "
        f"{SLO['tpot_p99_s'] * 1e3:g} ms (20 tokens/s per user), at p99, with the load steady, and every session "
        "completed. A session runs for minutes, so the sessions in progress, and the load, climb for about a "
        "session's time after the first starts; a slower system's sessions last longer and take longer to load it. "
        f"So each rate runs first with {DURATION_S:,.0f} s of session starts, and where it passes over all its calls, "
        "again with starts for as long as its load takes to level off (the warm-up: until the sessions in progress "
        "are within 3% of their steady number, from the run's own session times) and "
        f"{STEADY_WINDOW_S:,.0f} s more; the service level is judged on the calls begun in that window. Each "
        f"candidate climbs a grid of rates ×√2 apart while it meets it; the best candidate's rate is then bisected "
        f"{BISECTIONS} times between its last grid rate met and the next, so a system's rate, and a ratio of two, is "
        "known to 4.4% rather than to the grid's 41%.",
        "",
        "| system | GPUs | best deployment | sessions/s | per MW | warm-up s | window s | calls/s | session p50 s | "
        "session p99 s | TTFT p99 s | TPOT p99 ms | tokens/s/user p50 | prefix hits | other candidates: highest rate "
        "met, tried from a quarter of the best so far (0: none) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in bests:
        s = b["summary"]
        if s is None:
            lines.append(f"| {b['hw']} | | none meets the service level at {GRID[0]:g} sessions/s |"
                         + " |" * 12)
            continue
        others = ", ".join(f"{k} {v:.2f}" for k, v in b["tried"].items() if k != b["candidate"]) or "-"
        st = s["sessions"]["steady"]
        lines.append(f"| {b['hw']} | {s['num_gpus']} | {b['candidate']}: {layout_text(s['deployment'])} | "
                     f"{s['sessions']['sessions_per_s']:.2f} | {s['sessions']['sessions_per_s_per_mw']:.1f} | "
                     f"{st['warm_up_s']:,.0f} | {st['window_s']:,.0f} | {st['calls_per_s']:,.1f} | "
                     f"{_session_cells(s, steady=True)} | {others} |")
    gb300, vr = by_hw.get("gb300-nvl72"), by_hw.get("vr-nvl72")
    if gb300 and vr and gb300["summary"] and vr["summary"]:
        ratio = vr["summary"]["sessions"]["sessions_per_s"] / gb300["summary"]["sessions"]["sessions_per_s"]
        lines += ["", f"**Vera Rubin NVL72 / GB300 NVL72: {ratio:.1f}x sessions per rack at the service level** "
                  f"(each on its best deployment above: {vr['candidate']} and {gb300['candidate']})."]
    lines += ["", "A typical decode step on each system's best deployment at its rate (of the decode pool, or of the "
              "aggregated instances), and the share of it spent in attention:", "",
              "| system | decode step |", "|---|---|"]
    for hw, st in steps.items():
        dec = st.get("decode")
        lines.append(f"| {hw} | {_share(dec, ('attention_decode',)) if dec else '-'} |")
    lines += growth_lines(growth)
    lines += front_lines(front_points(bests))
    lines += [
        "",
        "## KV memory tiers: HBM only, host memory, local and network storage",
        "",
        f"The same traffic with tool calls {LONG_TOOLS:g}x longer (median 60 s: a test suite, a build, a person "
        f"reading), at each system's rate and best deployment above, with {DURATION_S:,.0f} s of session starts: "
        "these sessions take far longer to load a system, so the figures below are of a load still climbing, the "
        "same traffic for every choice of tiers, and all calls count. A prefix block the HBM cache evicts goes to "
        "the host tier (Grace or Vera LPDDR5X over NVLink-C2C on the racks, CPU DRAM over PCIe on HGX), then to "
        "local NVMe, then to shared storage over the node's storage network; a call whose context is there waits "
        "for it to be read back instead of prefilling it again. Capacities and bandwidths per GPU are in "
        "`hardware_profiles/systems/*.yaml` (`kv_tiers`, grades B-D). "
        f"On {GQA_SYSTEM} the same sessions also run on {GQA_MODEL}, a GQA model whose KV cache takes "
        f"{kv_text(GQA_MODEL)} per token at FP8 against DeepSeek-R1's {kv_text('deepseek-r1')} (MLA), on its rule "
        "deployment at the same rate.",
        "",
        "| system | model | tiers | session p50 s | session p99 s | TTFT p99 s | TPOT p99 ms | tokens/s/user p50 | "
        "prefix hits | read back from host | from storage | from the network |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in tier_rows:
        s, t = r["summary"], r["summary"]["sessions"]["kv_tiers"] or {}
        back = [f"{t[n]['reloaded_share']:.1%}" if n in t else "-" for n in KV_TIER_ORDER]
        lines.append(f"| {r['hw']} | {r['model']} | {r['tiers']} | {_session_cells(s)} | " + " | ".join(back) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--save", type=Path, help="also keep the measured results here (pickle), for --page-from")
    p.add_argument("--page-from", type=Path, help="write the page from results kept by --save, without running")
    args = p.parse_args(argv)
    if args.page_from is not None:
        write_page(*pickle.loads(args.page_from.read_bytes()))
        return
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        bests = list(pool.map(best_of, SYSTEMS))
        with tempfile.TemporaryDirectory() as tmp:
            bench = long_tools_benchmark(Path(tmp))
            racks = [b for b in bests if b["summary"] is not None and b["hw"] in TIER_SYSTEMS]
            jobs = [(b, None) for b in racks] + [(b, GQA_MODEL) for b in racks if b["hw"] == GQA_SYSTEM]
            tier_rows = [row for rows in pool.map(tiers, [b for b, _ in jobs], [bench] * len(jobs),
                                                  [m for _, m in jobs]) for row in rows]
    steps = {b["hw"]: b["steps"] for b in bests if b["summary"] is not None}
    growth = {b["hw"]: context_growth(b) for b in bests if b["summary"] is not None}
    results = (bests, tier_rows, steps, growth, time.perf_counter() - started)
    if args.save is not None:
        args.save.write_bytes(pickle.dumps(results))
    write_page(*results)


def write_page(*results: object) -> None:
    points = front_points(results[0])
    if not points.empty:
        draw_fronts(points, f"agentic-coding sessions: TTFT p99 ≤ {SLO['ttft_p99_s']:g} s, TPOT p99 ≤ "
                    f"{SLO['tpot_p99_s'] * 1e3:g} ms, every session completed").savefig(
            ROOT / "docs" / "figures" / FRONT_FIGURE, dpi=110)
    text = page(*results)
    (ROOT / "docs" / "agentic.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
