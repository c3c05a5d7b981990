"""Load generator: equal-issue order, scenario builders, workload validation, trace readers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gpusim.errors import InputError
from gpusim.loadgen.datasets import dataset_lengths, equal_issue_order
from gpusim.loadgen.scenarios import closed_loop, offline, server, single_stream
from gpusim.loadgen.traces import read_trace
from gpusim.loadgen.workload import Workload
from gpusim.specs.benchmark import BenchmarkSpec, LengthDistribution


def make_bench(dataset_samples: int = 100) -> BenchmarkSpec:
    return BenchmarkSpec(
        id="toy",
        model="toy-model",
        dataset="toy-set",
        dataset_samples=dataset_samples,
        input_tokens=LengthDistribution(kind="lognormal", mu=6.0, sigma=0.8, min=16, max=4096, source="test"),
        output_tokens=LengthDistribution(kind="lognormal", mu=5.0, sigma=0.6, min=2, max=2048, source="test"),
        offline_min_query_count=250,
        server_min_query_count=100,
        source="test",
    )


# --- equal-issue order and dataset -------------------------------------------------------------


def test_equal_issue_order_is_concatenated_permutations() -> None:
    n, full = 7, 5
    order = equal_issue_order(n, n * full + 3, np.random.default_rng(3))
    assert len(order) == n * full + 3
    blocks = order[: n * full].reshape(full, n)
    for block in blocks:
        assert sorted(block.tolist()) == list(range(n))
    tail = order[n * full :]
    assert len(set(tail.tolist())) == 3 and set(tail.tolist()) <= set(range(n))
    assert any(block.tolist() != list(range(n)) for block in blocks), "order is not shuffled"
    assert len(equal_issue_order(n, 0, np.random.default_rng(3))) == 0


def test_dataset_lengths_follow_the_spec() -> None:
    bench = make_bench(500)
    isl, osl = dataset_lengths(bench, seed=1)
    assert len(isl) == len(osl) == 500
    assert isl.min() >= 16 and isl.max() <= 4096 and osl.min() >= 2
    # log-normal median is exp(mu)
    assert abs(np.median(isl) / math.exp(6.0) - 1) < 0.15
    assert np.array_equal(isl, dataset_lengths(bench, seed=1)[0])


# --- scenarios ---------------------------------------------------------------------------------


def test_offline_all_at_zero_with_default_count() -> None:
    bench = make_bench()
    w = offline(bench, seed=0)
    assert len(w) == 250
    assert np.all(w.arrival_s == 0.0) and w.concurrency is None
    isl, _ = dataset_lengths(bench, seed=0)
    assert set(w.input_tokens.tolist()) <= set(isl.tolist())
    assert len(offline(bench, seed=0, samples=37)) == 37


def test_server_poisson_mean_and_dispersion() -> None:
    qps = 5.0
    w = server(make_bench(), qps=qps, seed=11, samples=20_000)
    assert len(w) == 20_000
    gaps = np.diff(w.arrival_s)
    assert abs(gaps.mean() * qps - 1) < 0.03
    # exponential inter-arrivals: coefficient of variation 1 (a constant period would give 0)
    assert abs(gaps.std() / gaps.mean() - 1) < 0.05
    assert np.all(gaps >= 0)


def test_server_is_deterministic_per_seed() -> None:
    bench = make_bench()
    a, b, c = (server(bench, qps=3.0, seed=s, samples=500) for s in (7, 7, 8))
    for field in ("arrival_s", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert not np.array_equal(a.input_tokens, c.input_tokens)


def test_server_runs_past_duration_with_min_count() -> None:
    bench = make_bench()
    w = server(bench, qps=10.0, seed=2, duration_s=60.0)
    assert w.arrival_s[-1] >= 60.0 > w.arrival_s[-2]
    assert 450 < len(w) < 750  # ~ 10 qps x 60 s
    slow = server(bench, qps=0.01, seed=2, duration_s=60.0)
    assert len(slow) == bench.server_min_query_count


def test_closed_loop_builders() -> None:
    w = single_stream(make_bench(), seed=0, samples=20)
    assert w.concurrency == 1 and len(w) == 20 and w.closed_loop
    c = closed_loop(concurrency=64, isl=1024, osl=256, samples=300)
    assert c.concurrency == 64 and len(c) == 300
    assert np.all(c.input_tokens == 1024) and np.all(c.output_tokens == 256)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: server(make_bench(), qps=-1.0, seed=0), "qps"),
        (lambda: server(make_bench(), qps=0.0, seed=0), "qps"),
        (lambda: closed_loop(concurrency=0, isl=10, osl=10, samples=5), "concurrency"),
        (lambda: closed_loop(concurrency=4, isl=0, osl=10, samples=5), "isl"),
        (lambda: closed_loop(concurrency=4, isl=10, osl=-3, samples=5), "osl"),
    ],
)
def test_bad_command_line_values_raise(build, field: str) -> None:
    with pytest.raises(InputError) as e:
        build()
    assert e.value.source == "command line" and e.value.field == field
    assert "must be > 0" in e.value.message


def test_workload_validation() -> None:
    ok = Workload.create([0.0, 1.0], [10, 20], [5, 6], name="ok")
    assert len(ok) == 2 and ok.input_tokens.dtype == np.int64
    with pytest.raises(InputError, match="arrival_s"):
        Workload.create([0.0, 2.0, 1.0], [1, 1, 1], [1, 1, 1])
    with pytest.raises(InputError, match="output_tokens"):
        Workload.create([0.0, 1.0], [10, 20], [5, 0])
    with pytest.raises(InputError, match="input_tokens"):
        Workload.create([0.0, 1.0], [-1, 20], [5, 5])


# --- traces ------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_read_azure_csv(tmp_path: Path) -> None:
    p = write(
        tmp_path / "az.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:48.1805900,396,0\n"
        "2023-11-16 18:16:47.9305900,879,55",  # no trailing newline, like the real trace
    )
    w = read_trace(p)
    assert np.allclose(w.arrival_s, [0.0, 1.5, 61.25])
    assert w.input_tokens.tolist() == [374, 396, 879]
    assert w.output_tokens.tolist() == [44, 1, 55]  # zero output clamped to 1
    assert w.prefix_hashes is None and w.concurrency is None
    assert len(read_trace(p, limit=2)) == 2


def test_read_vidur_csv(tmp_path: Path) -> None:
    p = write(
        tmp_path / "vidur.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n10.0,100,20\n10.25,200,30\n12.0,300,40\n",
    )
    w = read_trace(p)
    assert np.allclose(w.arrival_s, [0.0, 0.25, 2.0])
    assert w.input_tokens.tolist() == [100, 200, 300] and w.output_tokens.tolist() == [20, 30, 40]


def test_read_mooncake_jsonl(tmp_path: Path) -> None:
    p = write(
        tmp_path / "mc.jsonl",
        '{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [0, 1]}\n'
        '{"timestamp": 1500, "input_length": 100, "output_length": 3, "hash_ids": [0]}\n',
    )
    w = read_trace(p)
    assert np.allclose(w.arrival_s, [0.0, 1.5])
    assert w.input_tokens.tolist() == [600, 100] and w.output_tokens.tolist() == [10, 3]
    assert w.prefix_hashes == [(0, 1), (0,)]


@pytest.mark.parametrize(
    ("name", "text", "column"),
    [
        ("a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n", "GeneratedTokens"),
        ("v.csv", "arrived_at,num_prefill_tokens\n0.0,100\n", "num_decode_tokens"),
        ("m.jsonl", '{"timestamp": 0, "input_length": 600}\n', "output_length"),
    ],
)
def test_missing_column_names_it(tmp_path: Path, name: str, text: str, column: str) -> None:
    with pytest.raises(InputError) as e:
        read_trace(write(tmp_path / name, text))
    assert e.value.field == column
    assert "missing column" in e.value.message and "arrived_at" in e.value.message
    assert str(tmp_path / name) == e.value.source


def test_bad_trace_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="empty"):
        read_trace(write(tmp_path / "empty.csv", ""))
    with pytest.raises(InputError, match="empty"):
        read_trace(write(tmp_path / "header.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n"))
    bad_row = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n1.0,abc,20\n"
    with pytest.raises(InputError, match="line 3") as e:
        read_trace(write(tmp_path / "bad.csv", bad_row))
    assert e.value.field == "num_prefill_tokens"
    with pytest.raises(InputError, match="line 2"):
        read_trace(write(tmp_path / "bad.jsonl", '{"timestamp": 0, "input_length": 6, "output_length": 1}\n{oops\n'))
    backwards = "arrived_at,num_prefill_tokens,num_decode_tokens\n5.0,100,20\n1.0,100,20\n"
    with pytest.raises(InputError, match="decrease"):
        read_trace(write(tmp_path / "back.csv", backwards))


def test_real_azure_conv_trace(shared_dir: Path) -> None:
    w = read_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv")
    assert len(w) == 19_366
    assert w.arrival_s[0] == 0.0 and np.all(np.diff(w.arrival_s) >= 0)
    assert w.input_tokens.min() >= 1 and w.output_tokens.min() >= 1


def test_real_mooncake_hash_blocks(shared_dir: Path) -> None:
    w = read_trace(shared_dir / "traces" / "conversation_trace.jsonl")
    assert w.prefix_hashes is not None and len(w.prefix_hashes) == len(w) > 1000
    blocks = [math.ceil(n / 512) for n in w.input_tokens.tolist()]
    assert [len(h) for h in w.prefix_hashes] == blocks


def test_closed_loop_range_ratio_draws_lengths_from_the_upper_band():
    from gpusim.loadgen.scenarios import closed_loop

    wl = closed_loop(8, 1000, 200, 4000, range_ratio=0.8, seed=3)
    assert wl.input_tokens.min() >= 800 and wl.input_tokens.max() <= 1000
    assert wl.output_tokens.min() >= 160 and wl.output_tokens.max() <= 200
    assert abs(wl.input_tokens.mean() - 900) < 5  # uniform over [0.8 L, L]
    fixed = closed_loop(8, 1000, 200, 10)
    assert set(fixed.input_tokens) == {1000} and set(fixed.output_tokens) == {200}
    with pytest.raises(InputError, match="range_ratio"):
        closed_loop(8, 1000, 200, 10, range_ratio=0.0)



def test_an_offline_run_is_sized_for_its_duration() -> None:
    import gpusim
    from gpusim.build import prepare
    from gpusim.loadgen.scenarios import offline_sample_count

    setup = prepare("b300-hgx", "deepseek-r1")  # ~14 QPS: LoadGen's count is above the 4,388-sample floor
    qps = setup.expected_qps()
    assert offline_sample_count(setup.bench, qps, 2400.0) == math.ceil(1.1 * 2400.0 * qps)
    assert offline_sample_count(setup.bench, qps) == offline_sample_count(setup.bench, qps, 600.0)
    got = gpusim.run("b300-hgx", "deepseek-r1", "offline", duration_s=2400.0).summary["issued_requests"]
    assert got == offline_sample_count(setup.bench, qps, 2400.0)
