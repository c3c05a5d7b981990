"""Every shipped system's default `gpusim run` of DeepSeek-R1, GPT-OSS-120B and Llama 2 70B, Offline and Server:
the wall time and peak memory of the command a user types (target: within a minute and 2 GB).

    python benchmarks/default_runs.py            # the table on stdout
    python benchmarks/default_runs.py --write    # and in docs/speed.md, between its `default-runs` markers
    python benchmarks/default_runs.py --json > runs.json; python benchmarks/default_runs.py --from runs.json --write

Each run is `gpusim run --hardware H --benchmark B --scenario S --json` with nothing else (Server adds `--qps`: the
shipped searched peak of the system's default deployment, `hardware_profiles/defaults/`, scaled to its GPUs as
`gpusim.defaults.replica_peak` scales it), in its own process, one at a time; its wall time includes starting
Python, and its peak resident memory is the kernel's count for that process (`os.wait4`). A pairing the command
refuses (the model does not fit the system, say) is listed with the one line it printed. A run still going after
`TIMEOUT_S` is stopped and counts as missed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "speed.md"
BENCHMARKS = ("deepseek-r1", "gpt-oss-120b", "llama2-70b")
SCENARIOS = ("offline", "server")
TARGET_S, TARGET_MB = 60.0, 2048
TIMEOUT_S = 600.0
MARKERS = ("<!-- default-runs -->", "<!-- /default-runs -->")


def systems() -> list[str]:
    """The shipped system profiles."""
    return sorted(p.stem for p in (ROOT / "hardware_profiles" / "systems").glob("*.yaml"))


def shipped_peak(hardware: str, benchmark: str) -> float | None:
    """The Server rate a default run is asked for: the shipped searched peak on the whole system, if any."""
    from gpusim.defaults import read_defaults
    from gpusim.specs.benchmark import load_benchmark
    from gpusim.specs.hardware import load_hardware

    table = read_defaults(hardware)
    entry = table.entries.get(load_benchmark(benchmark).model, {}).get("server") if table else None
    if entry is None or not entry.peak_qps:
        return None
    return entry.peak_qps * load_hardware(hardware).num_gpus / entry.searched_gpus


def measure(hardware: str, benchmark: str, scenario: str) -> dict:
    """One default run in its own process: wall seconds, peak RSS, and the refusal or failure if any."""
    cmd = [sys.executable, "-m", "gpusim.cli", "run", "--hardware", hardware, "--benchmark", benchmark,
           "--scenario", scenario, "--json"]
    if scenario == "server":
        qps = shipped_peak(hardware, benchmark)
        if qps is None:
            return {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, "exit": None,
                    "message": "no shipped Server peak (the defaults hold no Server entry for it)"}
        cmd += ["--qps", f"{qps:.2f}"]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True)
        status, usage = _wait(proc.pid, start + TIMEOUT_S)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    row = {"hardware": hardware, "benchmark": benchmark, "scenario": scenario, "wall_s": round(wall, 1),
           "peak_rss_mb": usage.ru_maxrss // 1024, "load_before": round(load, 1), "exit": code}
    if code == 0:
        row["requests"] = json.loads(stdout).get("completed_requests")
    else:
        lines = stderr.strip().splitlines()
        row["message"] = "timed out" if wall >= TIMEOUT_S else (lines[-1] if lines else f"exit {code}")
    return row


def _wait(pid: int, deadline: float) -> tuple[int, os.struct_rusage]:  # type: ignore[name-defined]
    """Reap `pid` (killing its session at `deadline`): its wait status and its own resource usage."""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage
        if time.perf_counter() > deadline:
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return status, usage
        time.sleep(0.05)


def verdict(row: dict) -> str:
    if row["exit"] is None:
        return f"not run: {row['message']}"
    if row["exit"] == 2:
        return f"refused: {row['message']}"
    if row["exit"] != 0:
        return f"FAILED: {row['message']}"
    met = row["wall_s"] <= TARGET_S and (row["peak_rss_mb"] or 0) <= TARGET_MB
    return "met" if met else "MISSED"


def markdown(rows: list[dict]) -> str:
    ran = [r for r in rows if r["exit"] == 0]
    skipped = [r for r in rows if r["exit"] in (2, None)]
    met = sum(verdict(r) == "met" for r in ran)
    slow = max(ran, key=lambda r: r["wall_s"])
    big = max(ran, key=lambda r: r["peak_rss_mb"] or 0)
    lines = [f"{len(ran)} of {len(rows)} pairings run ({len(skipped)} refused or without a Server peak); {met} of "
             f"{len(ran)} within "
             f"{TARGET_S:.0f} s and {TARGET_MB / 1024:.0f} GB. Slowest: {slow['hardware']} {slow['benchmark']} "
             f"{slow['scenario']}, {slow['wall_s']:,.1f} s; largest: {big['hardware']} {big['benchmark']} "
             f"{big['scenario']}, {big['peak_rss_mb']:,} MB.", "",
             "| system | benchmark | scenario | wall s | peak RSS MB | requests reported | load before | target |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r in skipped:
            continue
        requests = f"{r['requests']:,}" if r.get("requests") else "-"
        lines.append(f"| {r['hardware']} | {r['benchmark']} | {r['scenario']} | {r['wall_s']:,.1f} | "
                     f"{r['peak_rss_mb']:,} | {requests} | {r['load_before']} | {verdict(r)} |")
    if skipped:
        lines += ["", "Not run:", ""]
        lines += [f"- {r['hardware']} {r['benchmark']} {r['scenario']}: {verdict(r)}" for r in skipped]
    return "\n".join(lines)


def write(doc: Path, text: str) -> None:
    """Replace what lies between the `default-runs` markers of `doc` with `text`."""
    body = doc.read_text()
    head, rest = body.split(MARKERS[0], 1)
    _, tail = rest.split(MARKERS[1], 1)
    doc.write_text(f"{head}{MARKERS[0]}\n{text}\n{MARKERS[1]}{tail}")


def measure_all(names: list[str]) -> list[dict]:
    """`measure` every benchmark and scenario on each of the systems `names`, one run at a time (each row on stderr
    as it finishes)."""
    rows = []
    for hw in names:
        for bench in BENCHMARKS:
            for scenario in SCENARIOS:
                rows.append(measure(hw, bench, scenario))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true", help="also replace the table in docs/speed.md")
    parser.add_argument("--systems", help="comma-separated system profiles (default: every shipped one)")
    parser.add_argument("--from", dest="saved", type=Path, help="a saved --json measurement to write, not re-run")
    args = parser.parse_args()
    if args.saved:
        rows = json.loads(args.saved.read_text())
    else:
        rows = measure_all(args.systems.split(",") if args.systems else systems())
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    text = markdown(rows)
    print(text)
    if args.write:
        write(DOC, text)


if __name__ == "__main__":
    main()
