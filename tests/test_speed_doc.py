"""benchmarks/speed.py --write replaces the measured table of each page and nothing else."""

from __future__ import annotations


def test_write_table_replaces_only_the_measured_table(tmp_path, benchmark_script):
    speed = benchmark_script("speed")
    doc = tmp_path / "page.md"
    doc.write_text("# Speed\n\nintro\n\n| other | table |\n|---|---|\n\n| run | wall s |\n|---|---|\n| old | 9.9 |\n\n"
                   "after\n")
    speed.write_table(doc, "| run | wall s |\n|---|---|\n| new | 1.0 |")
    text = doc.read_text()
    assert "| new | 1.0 |" in text and "| old |" not in text
    assert text.startswith("# Speed\n\nintro\n\n| other | table |") and text.endswith("\nafter\n")


def test_both_pages_it_writes_hold_a_measured_table(benchmark_script):
    speed = benchmark_script("speed")
    assert {p.name for p in speed.DOCS} == {"speed.md", "README.md"}
    assert all(any(line.startswith("| run |") for line in p.read_text().splitlines()) for p in speed.DOCS)


def test_the_table_says_whether_each_target_is_met(benchmark_script):
    speed = benchmark_script("speed")
    fast = {"target": "rack", "wall_s": 2.0, "simulated_s": 3000.0}
    slow = {"target": "rack", "wall_s": 16.0, "simulated_s": 2944.0}
    assert speed.verdict(fast).endswith("met (1,500x)")
    assert "MISSED (184x)" in speed.verdict(slow)
    assert "MISSED" in speed.verdict({"target": "azure", "wall_s": 1.2}) and speed.verdict({"target": ""}) == "-"
    assert speed.verdict({"target": "default", "wall_s": 59.0, "peak_rss_mb": 700}).endswith(": met")
    assert speed.verdict({"target": "default", "wall_s": 59.0, "peak_rss_mb": 9_900}).endswith("MISSED")


def test_a_default_run_is_measured_as_the_command_a_user_types(benchmark_script):
    runs = benchmark_script("default_runs")
    row = runs.measure("h100-hgx", "llama2-70b", "server")  # at the shipped Server peak, in its own process
    assert row["exit"] == 0 and row["requests"] > 1000 and 50 < row["peak_rss_mb"] < 2048 and row["wall_s"] > 0
    refused = runs.measure("h100-hgx", "deepseek-r1", "offline")  # DeepSeek-R1 does not fit 8x H100
    assert refused["exit"] == 2 and "GiB" in refused["message"]
    assert runs.verdict(refused).startswith("refused:") and runs.verdict(row) == "met"
    assert runs.verdict({**row, "wall_s": 61.0}) == "MISSED"
    assert runs.verdict({**row, "exit": 1, "message": "Traceback"}) == "FAILED: Traceback"


def test_default_runs_write_only_between_their_markers(tmp_path, benchmark_script):
    runs = benchmark_script("default_runs")
    doc = tmp_path / "speed.md"
    doc.write_text(f"# Speed\n\n{runs.MARKERS[0]}\nold\n{runs.MARKERS[1]}\n\nafter\n")
    rows = [{"hardware": "a", "benchmark": "b", "scenario": "offline", "wall_s": 2.0, "peak_rss_mb": 100,
             "load_before": 0.5, "exit": 0, "requests": 10},
            {"hardware": "a", "benchmark": "c", "scenario": "server", "exit": None, "message": "no peak"}]
    runs.write(doc, runs.markdown(rows))
    text = doc.read_text()
    assert "old" not in text and "| a | b | offline | 2.0 | 100 | 10 | 0.5 | met |" in text
    assert "- a c server: not run: no peak" in text and text.endswith(f"{runs.MARKERS[1]}\n\nafter\n")
    assert any(runs.MARKERS[0] in line for line in runs.DOC.read_text().splitlines())
