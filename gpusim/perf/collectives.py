"""Alpha-beta costs of the collectives of a serving step (docs/design.md: Formulas).

Ring all-reduce (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005), all-to-all for MoE
dispatch/combine (DeepEP), point-to-point for pipeline stages. `bw` is the per-GPU, per-direction
link bandwidth already multiplied by the achievable fraction; `alpha` the per-hop latency, seconds.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

Num = TypeVar("Num", float, np.ndarray)


def allreduce_time(size_bytes: float, n: int, bw: float, alpha: float, sharp: bool = False,
                   small_bw: float | None = None, knee_bytes: float = 0.0) -> float:
    """Ring all-reduce of `size_bytes` over `n` GPUs: 2(n-1)/n · S / B + 2(n-1)·α; with `small_bw` and
    `knee_bytes`, small messages move at their own rate (`allreduce_seconds`).

    With in-network reduction (NVLink SHARP / NVLS, InfiniBand SHARP) the bandwidth term halves:
    each GPU sends its data once and receives the reduced result once. n <= 1 costs nothing.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0
    return allreduce_seconds(size_bytes, n, bw, alpha, sharp, small_bw, knee_bytes)


def allreduce_seconds(size: Num, n: Num, bw: float, alpha: float, sharp: bool = False,
                      small_bw: float | None = None, knee_bytes: float = 0.0) -> Num:
    """The all-reduce time for n >= 2, on floats or numpy arrays alike (the kernel-table fit uses arrays).

    Messages well below `knee_bytes` move at `small_bw`, well above it at `bw`: the bandwidth term is
    2(n-1)/n · (S/B + (1/B_small − 1/B) · K·S/(K + S)). Serving's all-reduce kernels switch protocols
    with the size (one-shot and two-shot kernels for small messages, NCCL-like rings for large), and the
    measured tables rise smoothly from one rate to the other. Without `small_bw` (or with K = 0) it is
    the plain ring.
    """
    per_byte = 1.0 / bw
    beta = size * per_byte
    if small_bw is not None and knee_bytes > 0:
        beta = beta + (1.0 / small_bw - per_byte) * knee_bytes * size / (knee_bytes + size)
    beta = 2 * (n - 1) / n * beta
    return beta * (0.5 if sharp else 1.0) + 2 * (n - 1) * alpha


def alltoall_time(
    tokens: float, top_k: int, hidden: int, dtype_bytes: float, ep: int, bw: float, alpha: float,
    imbalance: float = 1.0,
) -> float:
    """MoE dispatch (or combine) over `ep` ranks: tokens·k·hidden·bytes·(EP-1)/EP / B · imbalance + α·log2(EP).

    `tokens` are the tokens one rank holds; the busiest rank sends `imbalance` times the mean. EP <= 1: 0.
    """
    if ep <= 1 or tokens <= 0:
        return 0.0
    sent = tokens * top_k * hidden * dtype_bytes * (ep - 1) / ep
    return sent / bw * imbalance + alpha * math.log2(ep)


def p2p_time(size_bytes: float, bw: float, alpha: float) -> float:
    """Send/recv of `size_bytes` between two pipeline stages: S / B + α."""
    if size_bytes <= 0:
        return 0.0
    return size_bytes / bw + alpha


__all__ = ["allreduce_seconds", "allreduce_time", "alltoall_time", "p2p_time"]
