"""The roofline time of one operation (docs/design.md: Modelling decisions).

    t = max(flops / (peak_flops · eff_c), bytes / (hbm_bw · eff_m)) + launch

Williams, Waterman & Patterson, "Roofline: an insightful visual performance model", CACM 2009;
the efficiencies and the launch term are the software profile's (hardware_profiles/software/).
"""

from __future__ import annotations

from typing import Literal, TypeVar

import numpy as np

FloatOrArray = TypeVar("FloatOrArray", float, np.ndarray)
"""Floats in the step model, numpy arrays in the vectorised calibration (`gpusim.calibrate.kernels`)."""

Bound = Literal["compute", "memory"]


def op_time(
    flops: float,
    bytes_: float,
    peak_flops: float,
    hbm_bw: float,
    eff_c: float = 1.0,
    eff_m: float = 1.0,
    launch: float = 0.0,
) -> tuple[float, Bound]:
    """FloatOrArray for an op of `flops` FLOPs moving `bytes_` bytes of HBM, and which bound won.

    `peak_flops` FLOP/s and `hbm_bw` bytes/s are the hardware peaks; `eff_c`/`eff_m` the achievable
    fractions; `launch` seconds of fixed kernel overhead. A tie counts as memory-bound.
    """
    t_c = flops / (peak_flops * eff_c) if flops else 0.0
    t_m = bytes_ / (hbm_bw * eff_m) if bytes_ else 0.0
    if t_c > t_m:
        return t_c + launch, "compute"
    return t_m + launch, "memory"


def gemm_efficiency(m: float, eff_max: float, m_half: float) -> float:
    """GEMM compute efficiency for `m` rows (tokens): eff_max · m / (m + m_half), a saturating shape curve."""
    return eff_max * m / (m + m_half) if m > 0 else 0.0


def prompt_attention_seconds(flops: FloatOrArray, exps: FloatOrArray, peak: FloatOrArray,
                             exp_rate: float) -> FloatOrArray:
    """Prompt attention at full rate: its tensor-core FLOPs at `peak`, then its softmax exponentials at the
    SFUs' `exp_rate`, one after the other (NVIDIA's measured context-attention tables fit the sum better
    than the overlap: docs/design.md, Prompt attention). Floats or numpy arrays."""
    return flops / peak + exps / exp_rate


__all__ = ["Bound", "gemm_efficiency", "op_time", "prompt_attention_seconds"]
