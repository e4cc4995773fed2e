"""``grid_sample``: ONNX GridSample (1-3 spatial dimensions) -- sample the input at the
run-time coordinates of ``grid`` with nearest, linear or cubic interpolation.

``grid[n, *out, :]`` holds normalized coordinates in [-1, 1], innermost dimension first
(x, y, z). Each is mapped to a pixel coordinate (``align_corners`` decides whether -1
and 1 are the centres or the outer edges of the corner pixels), brought back inside by
``padding_mode`` (``border`` clamps, ``reflection`` mirrors; ``zeros`` reads zeros
outside), then interpolated from 1, 2**D or 4**D neighbours. Interpolation is separable:
each neighbour's weight is the product of per-dimension weights. This follows ONNX's
reference implementation (PyTorch's semantics), rounding half to even for ``nearest``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import te
from ..dtypes import accumulator, is_float
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..symbolic import shape_text, static_dim
from ..te.expr import Expr, call, cast, const, maximum, minimum, select

MODES = ("nearest", "linear", "cubic")
PADDING = ("zeros", "border", "reflection")
_A = -0.75  # cubic convolution coefficient (Keys)


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x, grid = inputs
    d = len(x.shape) - 2
    check(1 <= d <= 3 and len(grid.shape) == d + 2 and grid.shape[-1] == d
          and grid.shape[0] == x.shape[0],
          f"grid_sample takes [N, C, *spatial] data and an [N, *out, {max(d, 1)}] grid, got "
          f"{shape_text(x.shape)} and {shape_text(grid.shape)}")
    check(attrs.get("mode", "linear") in MODES and attrs.get("padding_mode", "zeros") in PADDING,
          f"grid_sample mode {attrs.get('mode')!r} / padding {attrs.get('padding_mode')!r}")
    check(is_float(x.dtype) and grid.dtype == x.dtype,
          f"grid_sample takes float data and a grid of its dtype, got {x.dtype}, {grid.dtype}")
    return [TensorType((x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype)]


def _cubic_weights(t: Any) -> list[Any]:
    """Weights of the taps at floor-1 .. floor+2 for fraction ``t`` (works on floats,
    arrays and tensor expressions alike)."""
    a = _A
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


# -- NumPy reference ------------------------------------------------------------------

def _np_reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, x - hi)
    n = np.trunc(d / span)
    r = d - n * span
    even = np.mod(n, 2) == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(below, low_side, np.where(above, high_side, x))


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, grid = arrays
    mode, padding = attrs.get("mode", "linear"), attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    dims = x.shape[2:]
    nd = len(dims)
    g = grid.astype(np.float32)
    coords = []
    for i in range(nd):
        v = g[..., nd - 1 - i]
        size = dims[i]
        c = (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
        c = c.astype(np.float32)
        if mode == "nearest":
            c = np.rint(c)
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border":
            c = np.where((c < lo) | (c > hi), np.clip(c, 0, size - 1), c)
        elif padding == "reflection":
            c = _np_reflect(c, lo, hi)
        coords.append((c, lo, hi))
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (g.ndim - 2))

    def pixel(idx: list[np.ndarray]) -> np.ndarray:
        """x[n, :, *idx] with the padding rule, as [N, *out, C]."""
        inside = np.ones(idx[0].shape, dtype=bool)
        fixed = []
        for i, (k, (_, lo, hi)) in enumerate(zip(idx, coords)):
            size = dims[i]
            if padding == "zeros":
                inside &= (k >= 0) & (k < size)
                k = np.clip(k, 0, size - 1)
            elif padding == "border":
                k = np.clip(k, 0, size - 1)
            else:
                k = np.clip(_np_reflect(k.astype(np.float64), lo, hi).astype(np.int64), 0,
                            size - 1)
            fixed.append(k)
        values = np.moveaxis(x, 1, -1)[(n_idx, *fixed)]
        return np.where(inside[..., None], values, 0)

    if mode == "nearest":
        out = pixel([c.astype(np.int64) for c, _, _ in coords])
    else:
        taps = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
        bases = [np.floor(c).astype(np.int64) for c, _, _ in coords]
        fracs = [c - np.floor(c) for c, _, _ in coords]
        weights = [[1 - f, f] if mode == "linear" else _cubic_weights(f) for f in fracs]
        out = np.zeros((*g.shape[:-1], x.shape[1]), dtype=np.float64)
        for combo in itertools.product(range(len(taps)), repeat=nd):
            w = np.ones(g.shape[:-1], dtype=np.float64)
            for i, t in enumerate(combo):
                w = w * weights[i][t]
            out += w[..., None] * pixel([b + taps[t] for b, t in zip(bases, combo)])
    return [np.moveaxis(out, -1, 1).astype(x.dtype)]


# -- compute ---------------------------------------------------------------------------

def _reflect(x: Expr, lo: float, hi: float) -> Expr:
    f = x.dtype
    span = const(hi - lo, f)
    below, above = x < const(lo, f), x > const(hi, f)
    d = select(below, const(lo, f) - x, x - const(hi, f))
    n = cast("int64", d / span)  # truncation, as the reference's int()
    r = d - cast(f, n) * span
    even = (n % 2).eq(const(0))
    low_side = select(even, const(lo, f) + r, const(hi, f) - r)
    high_side = select(even, const(hi, f) - r, const(lo, f) + r)
    return select(below, low_side, select(above, high_side, x))


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x, grid = inputs
    mode, padding = attrs.get("mode", "linear"), attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    # (the image's size sets constants of the coordinate arithmetic: it must be static)
    dims = [static_dim(d, "grid_sample's input image size") for d in x.shape[2:]]
    nd = len(dims)
    f = accumulator(x.dtype)

    def coordinate(n: Expr, *rest: Expr) -> Expr:
        """Stage 1: the pixel coordinate along dimension ``i`` (after the padding rule),
        computed once per output position rather than inline in every tap."""
        *o, i_var = rest
        result: Expr | None = None
        for i in range(nd):
            v = cast(f, grid[(n, *o, const(nd - 1 - i))])
            size = dims[i]
            if align:
                p = (v + const(1.0, f)) / const(2.0, f) * const(size - 1.0, f)
            else:
                p = ((v + const(1.0, f)) * const(float(size), f) - const(1.0, f)) / const(2.0, f)
            if mode == "nearest":
                p = call("round", p)
            lo, hi = bounds[i]
            if padding == "border":
                clamped = minimum(maximum(p, const(0.0, f)), const(size - 1.0, f))
                p = select((p < const(lo, f)) | (p > const(hi, f)), clamped, p)
            elif padding == "reflection":
                p = _reflect(p, lo, hi)
            result = p if result is None else select(i_var.eq(const(i)), p, result)
        assert result is not None
        return result

    bounds = [(0.0, n - 1.0) if align else (-0.5, n - 0.5) for n in dims]
    where = te.compute((*grid.shape[:-1], nd), coordinate, name=tag + "_coords")

    def element(n: Expr, c: Expr, *o: Expr) -> Expr:
        coords = [(where[(n, *o, const(i))], *bounds[i]) for i in range(nd)]

        def pixel(idx: list[Expr]) -> tuple[Expr, Expr | None]:
            inside: Expr | None = None
            fixed = []
            for i, (k, (_, lo, hi)) in enumerate(zip(idx, coords)):
                size = dims[i]
                if padding == "zeros":
                    ok = (k >= const(0)) & (k < const(size))
                    inside = ok if inside is None else inside & ok
                elif padding == "reflection":
                    k = cast("int64", _reflect(cast(f, k), lo, hi))
                fixed.append(minimum(maximum(k, const(0)), const(size - 1)))
            return cast(f, x[(n, c, *fixed)]), inside

        if mode == "nearest":
            value, inside = pixel([cast("int64", p) for p, _, _ in coords])
            result = value if inside is None else select(inside, value, const(0.0, f))
            return cast(x.dtype, result)
        taps = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
        bases = [call("floor", p) for p, _, _ in coords]
        fracs = [p - b for (p, _, _), b in zip(coords, bases)]
        weights = [[const(1.0, f) - t, t] if mode == "linear" else _cubic_weights(t)
                   for t in fracs]
        total: Expr | None = None
        for combo in itertools.product(range(len(taps)), repeat=nd):
            w: Expr = weights[0][combo[0]]
            for i in range(1, nd):
                w = w * weights[i][combo[i]]
            value, inside = pixel([cast("int64", b) + taps[t] for b, t in zip(bases, combo)])
            term = w * value
            if inside is not None:
                term = select(inside, term, const(0.0, f))
            total = term if total is None else total + term
        assert total is not None
        return cast(x.dtype, total)

    return [te.compute(out[0].shape, element, name=tag, tag="grid_sample")]


register("grid_sample", Pattern.OPAQUE, _infer, _reference, _compute, num_inputs=(2, 2))
