"""MLPerf benchmark specs: YAML validity, fitted length distributions, latency limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpusim.fit_lengths import (
    TARGETS,
    clipped_lognormal_mean,
    clipped_lognormal_std,
    fit_lognormal,
    fit_lognormal_mean_std,
    fit_target,
)
from gpusim.specs.benchmark import load_benchmark
from gpusim.specs.model import load_model

BENCHMARKS = ["deepseek-r1", "gpt-oss-120b", "llama2-70b", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b"]
N = 200_000


def _stat(x: np.ndarray, key: str) -> float:
    return {"mean": np.mean, "median": np.median, "std": np.std}[key](x)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_and_model_load(name):
    b = load_benchmark(name)
    assert b.id == name
    assert load_model(b.model).id == b.model
    assert b.dataset_samples > 0
    assert b.offline_min_query_count == b.dataset_samples  # LLMs: Offline minimum = dataset size
    assert b.server_min_query_count == 100
    assert b.min_duration_s == 600.0
    assert set(b.mtp_allowed_in) <= {"server", "interactive"}


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("which", ["input_tokens", "output_tokens"])
def test_sampled_lengths_match_fitted_to(name, which):
    d = getattr(load_benchmark(name), which)
    assert d.kind == "lognormal"
    assert d.fitted_to and set(d.fitted_to) <= {"mean", "median", "std"}
    x = d.sample(N, np.random.default_rng(12345))
    assert x.min() >= d.min and x.max() <= d.max
    for key, target in d.fitted_to.items():
        assert _stat(x, key) == pytest.approx(target, rel=0.03), key


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("which", ["input", "output"])
def test_yaml_parameters_reproduce_from_fit_script(name, which):
    d = getattr(load_benchmark(name), f"{which}_tokens")
    t = TARGETS[(name, which)]
    mu, sigma = fit_target(t)
    assert (d.mu, d.sigma) == pytest.approx((mu, sigma), abs=1e-4)
    assert (d.min, d.max) == (t["lo"], t["hi"])


def test_fit_lognormal_recovers_known_parameters():
    mu, sigma, lo, hi = math.log(1500.0), 0.9, 50.0, 8000.0
    mean = clipped_lognormal_mean(mu, sigma, lo, hi)
    assert fit_lognormal(1500.0, mean, lo, hi) == pytest.approx((mu, sigma), rel=1e-6)
    # the clip matters: the unclipped closed form would give a different sigma
    assert math.sqrt(2 * math.log(mean / 1500.0)) != pytest.approx(sigma, rel=0.01)
    std = clipped_lognormal_std(mu, sigma, lo, hi)
    assert fit_lognormal_mean_std(mean, std, lo, hi) == pytest.approx((mu, sigma), rel=1e-5)


def test_clipped_mean_matches_monte_carlo():
    mu, sigma, lo, hi = math.log(2000.0), 1.2, 100.0, 20000.0
    x = np.clip(np.random.default_rng(0).lognormal(mu, sigma, N), lo, hi)
    assert clipped_lognormal_mean(mu, sigma, lo, hi) == pytest.approx(x.mean(), rel=0.01)
    assert clipped_lognormal_std(mu, sigma, lo, hi) == pytest.approx(x.std(), rel=0.02)


def test_fit_lognormal_rejects_median_outside_clip():
    with pytest.raises(ValueError):
        fit_lognormal(5000.0, 6000.0, 10.0, 4000.0)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_latency_limits(name):
    b = load_benchmark(name)
    assert b.server is not None
    for lim in (b.server, b.interactive):
        if lim is None:
            continue
        assert lim.ttft_s > 0 and lim.tpot_s > 0
        assert lim.ttft_s > lim.tpot_s
        assert lim.source.strip()
    if b.interactive is not None:  # Interactive is the tighter Server variant
        assert b.interactive.ttft_s < b.server.ttft_s and b.interactive.tpot_s < b.server.tpot_s
    assert b.limits("offline") is None


def test_scenario_specifics():
    assert load_benchmark("mixtral-8x7b").interactive is None
    for name in ("deepseek-r1", "gpt-oss-120b"):
        assert load_benchmark(name).mtp_allowed_in == ["interactive"]
    for name in ("llama2-70b", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b"):
        assert load_benchmark(name).mtp_allowed_in == []
    assert load_benchmark("deepseek-r1").server.tpot_s == pytest.approx(0.080)
    assert load_benchmark("gpt-oss-120b").interactive.tpot_s == pytest.approx(0.015)
