"""MLPerf datasets as length distributions, and LoadGen's equal-issue sample order."""

from __future__ import annotations

import numpy as np

from gpusim.specs.benchmark import BenchmarkSpec


def dataset_lengths(bench: BenchmarkSpec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(input, output) token lengths of the `bench.dataset_samples` samples of the performance dataset.

    A stand-in for the real dataset: each length is drawn from the benchmark's distribution.
    Input and output lengths are drawn independently (the specs give marginals only). The same seed
    gives the same dataset, whatever the scenario.
    """
    rng = np.random.default_rng(seed)
    isl = bench.input_tokens.sample(bench.dataset_samples, rng)
    osl = bench.output_tokens.sample(bench.dataset_samples, rng)
    return isl, osl


def equal_issue_order(n_dataset: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Sample indices in LoadGen's equal-issue mode (`sample_concatenate_permutation = 1`).

    The issued stream is a concatenation of full random permutations of `range(n_dataset)`,
    truncated to `count`: every index appears once in each complete permutation.
    """
    if n_dataset < 1:
        raise ValueError(f"n_dataset must be >= 1, got {n_dataset}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    n_perm = -(-count // n_dataset)
    if n_perm == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([rng.permutation(n_dataset) for _ in range(n_perm)])[:count].astype(np.int64)
