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
