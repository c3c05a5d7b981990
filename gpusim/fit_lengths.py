"""Fit the clipped log-normal token-length distributions of workloads/benchmarks/*.yaml.

`LengthDistribution` samples exp(N(mu, sigma)) and clips it to [min, max]. Given a published median
and mean, mu = ln(median) (clipping keeps the median when it lies inside [min, max]) and sigma is
solved so that the mean of the *clipped* variable equals the published mean. Where only mean and
standard deviation are published, both parameters are solved from the clipped moments.

Reproduce the numbers in the YAML files with:  python -m gpusim.fit_lengths
"""

from __future__ import annotations

import math
from itertools import pairwise

from scipy.optimize import brentq, fsolve
from scipy.stats import norm


def clipped_lognormal_moment(mu: float, sigma: float, lo: float, hi: float, k: int = 1) -> float:
    """E[clip(X, lo, hi)^k] for X = exp(N(mu, sigma^2))."""
    if sigma <= 0:
        return min(max(math.exp(mu), lo), hi) ** k
    a = (math.log(lo) - mu) / sigma
    b = (math.log(hi) - mu) / sigma
    body = norm.cdf(b - k * sigma) - norm.cdf(a - k * sigma)
    inner = math.exp(k * mu + 0.5 * k * k * sigma * sigma) * body
    return lo**k * norm.cdf(a) + hi**k * norm.sf(b) + inner


def clipped_lognormal_mean(mu: float, sigma: float, lo: float, hi: float) -> float:
    return clipped_lognormal_moment(mu, sigma, lo, hi, 1)


def clipped_lognormal_std(mu: float, sigma: float, lo: float, hi: float) -> float:
    m1 = clipped_lognormal_mean(mu, sigma, lo, hi)
    return math.sqrt(max(clipped_lognormal_moment(mu, sigma, lo, hi, 2) - m1 * m1, 0.0))


def fit_lognormal(median: float, mean: float, lo: float, hi: float) -> tuple[float, float]:
    """(mu, sigma) of a log-normal clipped to [lo, hi] with the given median and clipped mean."""
    if not lo < median < hi:
        raise ValueError(f"median {median} must lie strictly inside [{lo}, {hi}]")
    mu = math.log(median)
    f = lambda s: clipped_lognormal_mean(mu, s, lo, hi) - mean  # noqa: E731
    # The clipped mean moves monotonically from the median (sigma -> 0) towards the clip bound
    # that holds more mass; bracket the root on a wide grid.
    grid = [1e-6, *(0.01 * 1.3**i for i in range(25))]  # up to sigma ~5.4
    for s0, s1 in pairwise(grid):
        if f(s0) * f(s1) <= 0:
            return mu, brentq(f, s0, s1, xtol=1e-12)
    raise ValueError(f"no sigma gives mean {mean} with median {median} clipped to [{lo}, {hi}]")


def fit_lognormal_mean_std(mean: float, std: float, lo: float, hi: float) -> tuple[float, float]:
    """(mu, sigma) of a log-normal clipped to [lo, hi] whose clipped mean and std match."""
    s2 = math.log1p((std / mean) ** 2)  # unclipped closed form as the starting point
    x0 = [math.log(mean) - s2 / 2, math.sqrt(s2)]

    def resid(p: list[float]) -> list[float]:
        mu, sigma = p
        sigma = abs(sigma)
        return [
            clipped_lognormal_mean(mu, sigma, lo, hi) / mean - 1,
            clipped_lognormal_std(mu, sigma, lo, hi) / std - 1,
        ]

    mu, sigma = fsolve(resid, x0, xtol=1e-12)
    return float(mu), float(abs(sigma))


# Published (or, where marked in the YAML, assumed) statistics each benchmark's lengths are fitted to.
# (benchmark, "input"|"output"): dict(median=..., mean=..., std=..., lo=..., hi=...)
TARGETS: dict[tuple[str, str], dict[str, float]] = {
    ("deepseek-r1", "input"): dict(median=500, mean=800, lo=32, hi=3136),
    ("deepseek-r1", "output"): dict(median=2108, mean=3789.9, lo=125, hi=20000),
    ("gpt-oss-120b", "input"): dict(median=4593, mean=5011, lo=600, hi=15330),
    ("gpt-oss-120b", "output"): dict(mean=1278.2, std=247.0, lo=518, hi=3154),
    ("llama3.1-405b", "input"): dict(median=7000, mean=9400, lo=256, hi=20000),
    ("llama3.1-405b", "output"): dict(median=400, mean=684.68, lo=2, hi=2000),
    ("llama3.1-8b", "input"): dict(median=900, mean=1000, lo=100, hi=8000),
    ("llama3.1-8b", "output"): dict(median=126, mean=122, lo=2, hi=128),
    ("llama2-70b", "input"): dict(median=400, mean=480, lo=10, hi=1023),
    ("llama2-70b", "output"): dict(median=220, mean=294.45, lo=3, hi=1024),
    ("mixtral-8x7b", "input"): dict(median=350, mean=500, lo=10, hi=2048),
    ("mixtral-8x7b", "output"): dict(median=120, mean=144.84, lo=2, hi=1024),
}


def fit_target(t: dict[str, float]) -> tuple[float, float]:
    """Fit one TARGETS entry: median+mean if a median is given, else mean+std."""
    if "median" in t:
        return fit_lognormal(t["median"], t["mean"], t["lo"], t["hi"])
    return fit_lognormal_mean_std(t["mean"], t["std"], t["lo"], t["hi"])


def main() -> None:
    for (bench, which), t in TARGETS.items():
        mu, sigma = fit_target(t)
        lo, hi = t["lo"], t["hi"]
        mean = clipped_lognormal_mean(mu, sigma, lo, hi)
        std = clipped_lognormal_std(mu, sigma, lo, hi)
        print(
            f"{bench:14s} {which:6s} mu={mu:.4f} sigma={sigma:.4f}  clip=[{lo:g}, {hi:g}]  "
            f"-> median={math.exp(mu):.1f} mean={mean:.1f} std={std:.1f}  targets={t}"
        )


if __name__ == "__main__":
    main()
