"""What a GPU moves in a collective on a torus domain (TPU ICI), in units of one link's rate per direction.

A group of n chips occupies a sub-box of the torus, filling the first axis, then the next (`extents`). An axis
the group spans whole closes into a ring through its wraparound link; a part of an axis is a line. Both are
bidirectional: every chip has one link per direction to each neighbour (docs/design.md, *Torus domains*).

- A ring collective (all-reduce, all-gather, reduce-scatter) runs a bidirectional ring per spanned axis at
  once, so a chip drives two links per wrapped axis and one per line: the JAX scaling book's
  T = V / (2 W) for an all-gather over a wrapped axis, V / W without the wraparound.
- An all-to-all is cut by the torus' bisection, not the chip's links: across the middle of an axis of extent
  e, a·b / e² of every chip's bytes cross (a, b the chips either side), over one link per line (two with the
  wraparound), so it lasts a·b·D / (e·w·W) against (n − 1)/n · D over all the chip's links; the slower
  decides. On a wrapped ring of 4 that is 1.5 links' worth, on a whole 4x4x4 cube about 2 of its 6.
"""

from __future__ import annotations

import math


def extents(dims: list[int], group: int) -> list[int]:
    """Extent of a `group`-chip sub-box along each axis of a torus of `dims`, first axis filled first."""
    out, left = [], max(1, group)
    for d in dims:
        e = min(d, left)
        out.append(e)
        left = math.ceil(left / e)
    return out


def _wrapped(e: int, d: int) -> bool:
    return e == d and d > 2


def ring_links(dims: list[int], group: int) -> float:
    """Links a chip drives at once in a ring collective over `group` chips: 2 per wrapped axis, 1 per line."""
    return float(sum((2 if _wrapped(e, d) else 1) for e, d in zip(extents(dims, group), dims, strict=True) if e > 1))


def alltoall_links(dims: list[int], group: int) -> float:
    """A chip's all-to-all rate over `group` chips in links: its bytes sent, (n − 1)/n · D, over the time the
    busier of its injection (all `ring_links`) and each spanned axis' bisection takes."""
    ext = extents(dims, group)
    n = math.prod(ext)
    if n < 2:
        return 1.0
    times = [(n - 1) / n / ring_links(dims, group)]  # per byte D, in units of 1 / W
    for e, d in zip(ext, dims, strict=True):
        if e > 1:
            a, b = e // 2, e - e // 2
            times.append(a * b / (e * (2 if _wrapped(e, d) else 1)))
    return (n - 1) / n / max(times)


__all__ = ["alltoall_links", "extents", "ring_links"]
