"""Winograd minimal filtering: the transform matrices and the weight transform.

``F(m, r)`` computes ``m`` outputs of an ``r``-tap correlation from ``alpha = m + r - 1``
inputs with ``alpha`` multiplications instead of ``m * r``: ``y = AT [(G g) * (BT d)]``.
Nested in 2-D, a 3x3 convolution tiled in ``m x m`` output blocks becomes ``alpha^2``
independent matrix products over channels, ``(m * r / alpha)^2`` times fewer
multiplications (2.25x for F(2, 3), 4x for F(4, 3)). The weight transform ``G g G^T``
depends only on the weights, so the compiler applies it once at build time and stores
the result (:mod:`.layouts`); the kernel does the input (``BT``) and output (``AT``)
transforms. The matrices are those of Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks" (2016), interpolation points 0, +-1 (and +-2, +-1/2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Winograd:
    """The three matrices of ``F(m, r)``, as nested tuples (exact in float32)."""

    m: int
    r: int
    bt: tuple[tuple[float, ...], ...]  # alpha x alpha: input transform
    g: tuple[tuple[float, ...], ...]  # alpha x r: weight transform
    at: tuple[tuple[float, ...], ...]  # m x alpha: output transform

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1


F2_3 = Winograd(
    2, 3,
    bt=((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
    g=((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
    at=((1, 1, 1, 0), (0, 1, -1, -1)),
)

F4_3 = Winograd(
    4, 3,
    bt=((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
        (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
    g=((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
       (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1)),
    at=((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1)),
)

#: Weight transforms by the name a kernel's layout gives them.
TRANSFORMS = {"winograd_f2_3": F2_3, "winograd_f4_3": F4_3}


def transformed_shape(shape: tuple[int, ...], transform: str) -> tuple[int, ...]:
    """``[O, C, r, r]`` -> ``[alpha, alpha, C, O]``."""
    w = TRANSFORMS[transform]
    o, c, kh, kw = shape
    if (kh, kw) != (w.r, w.r):
        raise ValueError(f"{transform} transforms {w.r}x{w.r} weights, not {kh}x{kw}")
    return (w.alpha, w.alpha, c, o)


def transform_weight(weight: np.ndarray, transform: str) -> np.ndarray:
    """``U[e, n, c, o] = (G g[o, c] G^T)[e, n]``, computed in float64 and stored in the
    weight's dtype: ``alpha x alpha`` matrices of ``[C, O]``, output channels
    contiguous (the vector axis of the kernel's products)."""
    w = TRANSFORMS[transform]
    transformed_shape(weight.shape, transform)  # checks the kernel size
    g = np.asarray(w.g, dtype=np.float64)
    u = np.einsum("ek,ocku,nu->enco", g, weight.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(weight.dtype))
