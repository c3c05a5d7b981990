"""Agent sessions at rack scale (docs/agentic.md): the session generator's calls by hand, calls that wait for earlier
ones and a tool call, KV tiers below HBM, gpusim's agent-session trace format and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpusim.analysis.sessions import STEADY_WINDOW_S, steady_figures, warm_up_s
from gpusim.build import prepare
from gpusim.cli import main
from gpusim.errors import InputError
from gpusim.loadgen.agentic import session_workload
from gpusim.loadgen.traces import read_trace
from gpusim.loadgen.workload import PREFIX_BLOCK_TOKENS, Workload
from gpusim.sim.kvtiers import Tier, TierStore
from gpusim.specs.benchmark import LengthDistribution, SecondsDistribution, SubAgents, load_benchmark
from gpusim.specs.experiment import RunSpec


def constant(v: int) -> LengthDistribution:
    return LengthDistribution(kind="constant", value=v, max=v, source="test")


def shaped(turns: int = 3, tool_s: float = 2.0, sub: bool = True, first: int = 2048, output: int = 100,
           context: int = 2**31):
    """agentic-coding with constant lengths, so every call can be worked out by hand."""
    b = load_benchmark("agentic-coding")
    subagents = SubAgents(probability=1.0, count=1, turns=2, first_prompt=constant(1024), source="test")
    a = b.agentic.model_copy(update={
        "turns": turns, "first_prompt": constant(first), "turn_tokens": constant(512), "max_context": context,
        "tool_s": SecondsDistribution(kind="constant", value=tool_s, max=tool_s, source="test"),
        "subagents": subagents if sub else None})
    return b.model_copy(update={"agentic": a, "output_tokens": constant(output)})


def one_session(bench) -> Workload:
    return session_workload(bench, 1e-9, 1.0, seed=0)  # a Poisson count of 0 still starts one session


def test_a_session_by_hand():
    wl = one_session(shaped())
    # main 0; its sub-agent's 2 calls; main 1 (waits for both); a second sub-agent; main 2 (the last starts none)
    assert wl.input_tokens.tolist() == [2048, 1024, 1636, 2760, 1024, 1636, 3472]
    assert [list(a) for a in wl.after] == [[], [0], [1], [0, 2], [3], [4], [3, 5]]
    assert wl.delay_s.tolist() == [0.0] + [2.0] * 6
    assert set(wl.session.tolist()) == {0}
    h = wl.prefix_hashes
    full = 2048 // PREFIX_BLOCK_TOKENS
    assert h[3][:full] == h[0][:full]  # the main agent's next call starts with its earlier context
    assert h[6][:2760 // PREFIX_BLOCK_TOKENS] == h[3][:2760 // PREFIX_BLOCK_TOKENS]
    assert not set(h[1]) & set(h[0]) and not set(h[4]) & set(h[1])  # every sub-agent has a context of its own
    assert h[2][:1] == h[1][:1]


def test_a_session_ends_at_the_context_window():
    wl = one_session(shaped(turns=10, sub=False, first=2000, output=500, context=5000))
    assert wl.input_tokens.tolist() == [2000, 3012, 4024]  # the next would need 5,036 tokens


def test_calls_wait_for_what_they_follow_and_a_tool_call():
    wl = one_session(shaped(tool_s=3.0))
    setup = prepare("b300-hgx", "agentic-coding", scenario="sessions")
    records, _, _ = setup.simulate(wl)
    rec = records.set_index("request_id")
    for i, waits in enumerate(wl.after):
        if waits:
            last = max(rec.loc[j, "completion_s"] for j in waits)
            assert rec.loc[i, "scheduled_s"] == pytest.approx(last + 3.0)
    assert rec.loc[0, "scheduled_s"] == 0.0


def test_tiers_evict_down_and_reload_in_turn_by_hand():
    host = Tier("host", 2 * 512, s_per_token=1e-6, latency_s=1e-3)
    disk = Tier("storage", 4 * 512, s_per_token=1e-4, latency_s=1e-2)
    store = TierStore([host, disk], 512)
    for h in (1, 2, 3):
        store.store(h)
    assert list(store.held[0]) == [2, 3] and list(store.held[1]) == [1]  # the oldest went down
    assert store.locate([2, 1, 9, 3]) == [0, 1]  # stops at the first block found nowhere
    ready = store.reload([2, 1], [0, 1], now=10.0)
    assert ready == pytest.approx(10.0 + 1e-2 + 512 * 1e-4)  # storage is the slower read
    # a second read from the host waits for nothing on its own link; one from storage queues behind the first
    assert store.reload([3], [0], now=10.0) == pytest.approx(10.0 + 1e-3 + 512 * 1e-6 + 1e-3 + 512 * 1e-6)
    assert store.reload([1], [1], now=10.0) == pytest.approx(ready + 1e-2 + 512 * 1e-4)
    assert store.counters()["storage"] == {"reloaded_tokens": 1024, "reloads": 2, "stored_blocks": 1}


def test_host_offload_brings_evicted_context_back_instead_of_prefilling_it():
    """Sessions whose contexts do not all fit in HBM while their tools run: without a lower tier every evicted
    context is prefilled again; with host memory it is read back over the host link."""
    bench = shaped(turns=4, tool_s=60.0, sub=False, first=30_000)
    wl = session_workload(bench, 1.0, 60.0, seed=0)
    base = prepare("b300-hgx", "agentic-coding", scenario="sessions").deployment
    runs = {}
    for tiers in ([], ["host"]):
        dep = base.model_copy(update={"gpu_memory_fraction": 0.04, "kv_offload": tiers})
        setup = prepare("b300-hgx", "agentic-coding", deployment=dep)
        records, stats, _ = setup.simulate(wl)
        runs[tuple(tiers)] = (stats, float((records.first_token_s - records.scheduled_s).mean()))
    (none, ttft_none), (host, ttft_host) = runs[()], runs[("host",)]
    assert none.prefix_hit_rate < 0.1 < 0.5 < host.prefix_hit_rate
    assert host.kv_tiers["host"]["reloaded_tokens"] > 0.5 * sum(wl.input_tokens)
    assert ttft_host < 0.5 * ttft_none


def test_the_next_call_finds_the_answer_of_the_last_in_the_prefix_cache_by_hand():
    """An agent's answer is the start of its next prompt: the engine keeps the full blocks the answer filled, as
    vLLM caches full blocks of generated tokens. Call 0: 1,000 prompt and 600 answer tokens, 1,600 in all, three
    full 512-token blocks; call 1: those 1,600 tokens plus 400 of a tool's output. Call 1 finds 3 blocks (1,536
    tokens) where the prompt's blocks alone would give 1 (512): a hit rate of 1,536 / (1,000 + 2,000)."""
    from gpusim.loadgen.agentic import block_hashes

    prompts, outputs = [1000, 2000], [600, 50]
    wl = Workload.create([0.0, 0.0], prompts, outputs, after=[[], [0]], delay_s=[0.0, 1.0],
                         prefix_hashes=[block_hashes(0, c, p, o)
                                        for c, (p, o) in enumerate(zip(prompts, outputs, strict=True))],
                         answer_hashed=True)
    assert wl.prefix_hashes[1][:3] == wl.prefix_hashes[0][:3] and len(wl.prefix_hashes[0]) == 4
    base = prepare("b300-hgx", "agentic-coding", scenario="sessions").deployment
    setup = prepare("b300-hgx", "agentic-coding", deployment=base.model_copy(update={"instances": 1}))
    _, stats, _ = setup.simulate(wl)
    assert stats.prefix_hit_rate == pytest.approx(3 * PREFIX_BLOCK_TOKENS / 3000)
    # a trace that hashes prompts only keeps the prompt's one full block
    prompt_only = Workload.create([0.0, 0.0], prompts, outputs, after=[[], [0]], delay_s=[0.0, 1.0],
                                  prefix_hashes=[h[:2] for h in wl.prefix_hashes])
    _, stats, _ = setup.simulate(prompt_only)
    assert stats.prefix_hit_rate == pytest.approx(PREFIX_BLOCK_TOKENS / 3000)


def test_offload_needs_the_prefix_cache_and_the_tier(tmp_path):
    base = prepare("b300-hgx", "agentic-coding", scenario="sessions").deployment
    with pytest.raises(InputError, match="prefix_cache"):
        prepare("b300-hgx", "agentic-coding", deployment=base.model_copy(
            update={"prefix_cache": False, "kv_offload": ["host"]}))
    with pytest.raises(InputError, match="no host KV tier"):
        prepare("jetson-agx-thor", "qwen3.6-27b", deployment=prepare(
            "jetson-agx-thor", "qwen3.6-27b").deployment.model_copy(update={"kv_offload": ["host"]}))



def test_network_storage_is_the_last_tier_at_the_nodes_storage_ports_share(tmp_path):
    """B300 HGX's shared-storage tier: NVIDIA's HGX reference architecture gives each 8-GPU node two 400 GbE
    storage ports, 100 GB/s, so one GPU reads its KV back at 12.5 GB/s; a tier list out of order is refused."""
    import yaml

    from gpusim.build import offload_tiers
    from gpusim.perf.memory import kv_bytes_per_token_per_gpu
    from gpusim.specs.hardware import PROFILES, load_hardware

    base = prepare("b300-hgx", "agentic-coding", scenario="sessions")
    dep = base.deployment.model_copy(update={"kv_offload": ["host", "storage", "network"]})
    setup = prepare("b300-hgx", "agentic-coding", deployment=dep)
    tiers = offload_tiers(setup.hardware, setup.model, dep)
    assert [t.name for t in tiers] == ["host", "storage", "network"]
    assert tiers[2].s_per_token == pytest.approx(kv_bytes_per_token_per_gpu(setup.model, dep) / 12.5e9)
    assert tiers[2].s_per_token < tiers[1].s_per_token  # faster than one local drive, 6.5 GB/s
    system = yaml.safe_load((PROFILES / "systems" / "b300-hgx.yaml").read_text())
    system["kv_tiers"] = system["kv_tiers"][::-1]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({**system, "id": "mine"}))
    with pytest.raises(InputError, match=r"kv_tiers.*in the order host, storage, network"):
        load_hardware(str(tmp_path / "mine.yaml"))

TRACE = [
    {"session": "a", "call": "m0", "start_s": 4.0, "new_tokens": 2000, "output_tokens": 100},
    {"session": "b", "call": 0, "start_s": 1.0, "new_tokens": 3000, "output_tokens": 50},
    {"session": "a", "call": "s0", "agent": "sub", "after": ["m0"], "delay_s": 1.0, "new_tokens": 1500,
     "output_tokens": 80},
    {"session": "a", "call": "m1", "after": ["m0", "s0"], "delay_s": 2.0, "new_tokens": 600, "output_tokens": 120},
]


def write(tmp_path: Path, rows: list) -> Path:
    p = tmp_path / "sessions.jsonl"
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return p


def test_agent_trace_by_hand(tmp_path):
    wl = read_trace(write(tmp_path, TRACE))
    # session b starts first; a's calls follow in file order, their waits renumbered
    assert wl.arrival_s.tolist() == [0.0, 3.0, 3.0, 3.0]
    assert wl.input_tokens.tolist() == [3000, 2000, 1500, 2000 + 100 + 600]
    assert [list(a) for a in wl.after] == [[], [], [1], [1, 2]]
    assert wl.delay_s.tolist() == [0.0, 0.0, 1.0, 2.0] and wl.session.tolist() == [0, 1, 1, 1]
    assert wl.prefix_hashes[3][:3] == wl.prefix_hashes[1][:3]


@pytest.mark.parametrize(("change", "field"), [
    ({1: '{"session": "b", "call": 0, '}, "file"),
    ({1: {"session": "b", "call": 0, "new_tokens": 3000, "output_tokens": 50}}, "start_s"),
    ({2: {**TRACE[2], "after": ["m9"]}}, "after"),
    ({2: {**TRACE[2], "after": []}}, "after"),
    ({3: {**TRACE[3], "call": "m0"}}, "call"),
    ({3: {**TRACE[3], "new_tokens": 0}}, "new_tokens"),
    ({3: {**TRACE[3], "delay_s": -1}}, "delay_s"),
])
def test_agent_trace_errors_name_the_field_and_line(tmp_path, change, field):
    rows = [change.get(i, r) for i, r in enumerate(TRACE)]
    with pytest.raises(InputError) as e:
        read_trace(write(tmp_path, rows))
    assert e.value.field == field and str(tmp_path) in e.value.source
    assert field == "file" or "line" in e.value.message


def test_sessions_run_from_the_command_line(capsys, tmp_path):
    code = main(["run", "--hardware", "b300-hgx", "--benchmark", "agentic-coding", "--scenario", "sessions",
                 "--session-rate", "0.1", "--duration", "30", "--json"])
    s = json.loads(capsys.readouterr().out)
    a = s["sessions"]
    assert code == 0 and a["completed_sessions"] == a["sessions"] >= 1
    assert a["session_time_p50_s"] > 0 and a["calls_per_session"] > 1
    assert s["prefix_hit_rate"] > 0.5 and s["deployment"]["router"] == "kv_aware"
    assert np.isfinite(a["context_tokens_p50"])
    code = main(["run", "--hardware", "b300-hgx", "--benchmark", "deepseek-r1", "--scenario", "sessions",
                 "--session-rate", "0.1"])
    assert code == 2 and "agentic" in capsys.readouterr().err


def test_every_rack_gets_the_same_pool_widths_whatever_its_default(experiment_script):
    """docs/agentic.md's candidates split each rack into DEP4 and DEP8 pools, whichever width its Server search
    picked (GB300 NVL72's default runs DEP4 instances, Vera Rubin NVL72's DEP8): a ratio between the two racks then
    compares hardware on the same layouts. A DEP4 pool's batch cap is its default's per rank times 4."""
    agentic = experiment_script("agentic")
    widths = {hw: sorted({d["decode"]["tp"] for d in agentic.candidates(hw).values() if d})
              for hw in ("gb300-nvl72", "vr-nvl72")}
    assert widths == {"gb300-nvl72": [4, 8], "vr-nvl72": [4, 8]}
    vr = agentic.candidates("vr-nvl72")
    default = prepare("vr-nvl72", "agentic-coding", scenario="sessions").deployment
    dep4 = next(d for d in vr.values() if d and d["decode"]["tp"] == 4)
    assert dep4["decode"]["max_batch_size"] == round(default.max_batch_size / default.tp * 4)



def test_the_warm_up_is_when_sessions_in_progress_reach_their_steady_number_by_hand():
    # half the sessions last 100 s, half 1,000 s: E[S] = 550, E[min(S, t)] = 50 + t / 2 above 100 s, which
    # reaches 0.97 · 550 = 533.5 at t = 967; sessions all T long are all in progress from T on (0.97 T)
    assert warm_up_s(np.array([1000.0, 100.0])) == pytest.approx(967.0)
    assert warm_up_s(np.full(4, 200.0)) == pytest.approx(0.97 * 200.0)


def _sessions_run(time_s: float, late_ttft: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sessions starting each second for 1,000 s, each `time_s` long, and one call a second: those of the first 50 s
    answer after 10 s, the others after `late_ttft`, each 11 tokens over 1 s more."""
    starts = np.arange(1001.0)
    per = pd.DataFrame({"start_s": starts, "time_s": time_s})
    ttft = np.where(starts < 50, 10.0, late_ttft)
    records = pd.DataFrame({"request_id": np.arange(1001), "scheduled_s": starts, "first_token_s": starts + ttft,
                            "completion_s": starts + ttft + 1.0, "output_tokens": 11})
    return records, per


def test_steady_figures_judge_only_the_calls_begun_once_the_load_is_steady():
    records, per = _sessions_run(100.0, 0.5)  # warm after 97 s: the slow first calls do not count
    steady = steady_figures(records, per)
    assert steady["steady"] and steady["warm_up_s"] == pytest.approx(97.0)
    assert steady["calls"] == 904 and steady["ttft_p99_s"] == pytest.approx(0.5)  # begun at 97 s through 1,000 s
    assert steady["tpot_p99_s"] == pytest.approx(0.1) and steady["calls_per_s"] == pytest.approx(904 / 903)
    records, per = _sessions_run(900.0, 0.5)  # warm after 873 s: 127 s of starts is no window
    short = steady_figures(records, per)
    assert not short["steady"] and short["ttft_p99_s"] is None
    assert short["needs_duration_s"] == pytest.approx(873.0 + STEADY_WINDOW_S)


def test_the_experiment_runs_a_passing_rate_again_until_its_load_is_steady(experiment_script, monkeypatch):
    agentic = experiment_script("agentic")
    calls: list[tuple[float, float]] = []

    def fake_run(hw, rate, deployment, bench=None, model=None, duration_s=agentic.DURATION_S):
        """All calls within the SLO at rates 1 and 3 (at rate 2: TTFT p99 9 s); at rate 1 steady once starts last
        1,000 s, at rate 3 (overloaded) never: its sessions last as long as the run."""
        calls.append((rate, duration_s))
        ttft = 9.0 if rate == 2 else 1.0
        done = rate == 1 and duration_s >= 1000
        steady = {"steady": done, "ttft_p99_s": 1.0 if done else None, "tpot_p99_s": 0.01,
                  "needs_duration_s": None if done else 750.0 if rate == 1 else duration_s}
        return {"ttft_p99_s": ttft, "tpot_p99_s": 0.01,
                "sessions": {"sessions": 5, "completed_sessions": 5, "steady": steady}}, {}

    monkeypatch.setattr(agentic, "run", fake_run)
    durations = [agentic.DURATION_S]
    s, _ = agentic.judge("hw", 1.0, None, durations)
    assert agentic.meets(s) and calls == [(1.0, 600.0), (1.0, 1000.0)]  # 1.25 × 750 s, to the next 100 s
    assert durations[-1] == 1000.0
    calls.clear()
    s, _ = agentic.judge("hw", 2.0, None, durations)  # fails in the short run: not run longer
    assert not agentic.meets(s) and calls == [(2.0, 600.0)]
    calls.clear()
    s, _ = agentic.judge("hw", 3.0, None, durations)  # never steady: it stops after STEADY_TRIES runs, failed
    assert not agentic.meets(s) and calls == [(3.0, 600.0), (3.0, 1000.0), (3.0, 1300.0)]


@pytest.mark.parametrize("prompt,output", [(512, 0), (1000, 24), (1000, 25), (3, 0), (4096, 700)])
def test_block_hashes_index_and_slice_as_the_tuple_of_them(prompt, output):
    from gpusim.loadgen.agentic import block_hashes

    base, full = 3 << 40, (prompt + output) // PREFIX_BLOCK_TOKENS  # agent 2, call 5: full blocks, then its own
    blocks = -(-(prompt + output) // PREFIX_BLOCK_TOKENS)
    spelt = tuple(base + b if b < full else base + (6 << 24) + b for b in range(blocks))
    h = block_hashes(2, 5, prompt, output)
    assert tuple(h) == spelt and len(h) == len(spelt) and h == spelt
    assert [h[i] for i in range(-len(spelt), len(spelt))] == [*spelt, *spelt]
    for lo in range(-2, len(spelt) + 2):
        for hi in range(-2, len(spelt) + 2):
            assert tuple(h[lo:hi]) == spelt[lo:hi] and len(h[lo:hi]) == len(spelt[lo:hi])
    with pytest.raises(IndexError):
        h[len(spelt)]


def test_a_sessions_run_without_a_duration_runs_again_until_its_load_is_steady(monkeypatch):
    from types import SimpleNamespace

    from gpusim import simulation

    tried: list[float] = []

    def fake_whole_run(setup, spec, expected_qps, stop_when_invalid):
        """Steady once session starts last 2,000 s; a shorter run says it needs 400 s more than it had."""
        tried.append(spec.duration_s)
        done = spec.duration_s >= 2000
        steady = {"steady": done, "warm_up_s": 1200.0, "needs_duration_s": None if done else spec.duration_s + 400}
        return SimpleNamespace(summary={"sessions": {"steady": steady}, "issued_requests": 7})

    monkeypatch.setattr(simulation, "whole_run", fake_whole_run)
    setup = SimpleNamespace(bench=SimpleNamespace(min_duration_s=600.0))
    spec = RunSpec(hardware="b300-hgx", benchmark="agentic-coding", scenario="sessions", session_rate=1.0)
    result = simulation.run_setup(setup, spec, lambda: 1.0)
    assert tried == [600.0, 1300.0, 2200.0]  # 1.25 × 1,000 s and 1.25 × 1,700 s, each to the next 100 s
    assert "sessions started for 2,200 s, the load steady from 1,200 s" in result.summary["run_length"]["decided_by"]


def test_the_next_duration_grows_with_what_a_run_needs_and_stops_at_an_overload():
    from gpusim.analysis.sessions import next_duration_s

    short = {"steady": False, "needs_duration_s": 2300.0}
    assert next_duration_s({"steady": True, "needs_duration_s": None}) is None
    assert next_duration_s(short) == 2900.0  # 1.25 × 2,300 s, to the next 100 s
    assert next_duration_s({"steady": False, "needs_duration_s": 3000.0}, meant_s=2900.0) == 3800.0
    # a run of the 2,900 s asked for whose sessions now need 36,000 s: they lengthen with the run
    assert next_duration_s({"steady": False, "needs_duration_s": 36000.0}, meant_s=2900.0) is None
