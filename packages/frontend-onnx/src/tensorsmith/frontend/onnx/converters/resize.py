"""Resize (opset 11+) and the deprecated Upsample: one constant weight matrix per resized
axis (see :mod:`..resize_weights`), applied as a gather when every output takes exactly
one input (nearest), as a few gathers and multiply-adds when each takes a few (linear,
cubic), and as a matrix product otherwise.

``roi``, ``scales`` and ``sizes`` decide the output shape, so they must be constants.
The arithmetic runs in float32 (float64 for float64 data); float16 data is widened for it.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import math_prod

from .. import resize_weights as rw
from ..context import NodeContext
from ..registry import converter
from .common import normalize_axes, reshape

#: An axis whose outputs each read at most this many inputs (linear: 2, cubic: 4) is
#: resized by gathers and multiply-adds; wider ones (antialiased downscaling) by a
#: product with the weight matrix, which reads every input for every output (a 2x linear
#: upscale of UNet's 21 x 112 x 112 head as products: 8 ms on 2 cores, AVX2).
GATHER_TAPS_MAX = 4

MAX_RESIZE_POSITIONS = 2**18
"""The most output positions along one resized axis. The weights are computed position
by position in Python (a few microseconds each, as ONNX's reference does it), so this
bounds the import of one axis to seconds (1 s for a linear one); it is 34 times the width
of an 8K image, where scales of 1e6 would keep the import busy for minutes."""


def _along_axis(ctx: NodeContext, x: Value, axis: int, weights: rw.AxisWeights,
                fill: float) -> Value:
    m = weights.matrix
    out_len = m.shape[0]
    one_hot = bool(np.all(np.isin(m, (0.0, 1.0))) and np.all(m.sum(axis=1) == 1))
    if one_hot and weights.extrapolated is None:
        picked = np.argmax(m, axis=1).astype(np.int64)
        return ctx.add("gather", [x, ctx.const(picked, hint="picked")], {"axis": axis})
    taps = int(np.count_nonzero(m, axis=1).max(initial=0))
    if 0 < taps <= GATHER_TAPS_MAX:
        y = _taps(ctx, x, axis, m, taps)
    else:
        y = _product(ctx, x, axis, m)
    if weights.extrapolated is not None:
        mask = weights.extrapolated.reshape([out_len if d == axis else 1
                                             for d in range(len(x.shape))])
        y = ctx.add("where", [ctx.const(mask, hint="outside"),
                              ctx.const(np.asarray(fill, x.dtype), hint="fill"), y])
    return y


def _taps(ctx: NodeContext, x: Value, axis: int, m: np.ndarray, taps: int) -> Value:
    """``sum_t gather(x, index[:, t]) * weight[:, t]``: each output reads its ``taps``
    inputs, one elementwise kernel after fusion. A row with fewer nonzero weights
    repeats its last input with weight 0."""
    out_len = m.shape[0]
    index = np.zeros((out_len, taps), np.int64)
    weight = np.zeros((out_len, taps), m.dtype)
    for i, row in enumerate(m):
        (nonzero,) = np.nonzero(row)
        index[i, :len(nonzero)], weight[i, :len(nonzero)] = nonzero, row[nonzero]
        index[i, len(nonzero):] = nonzero[-1] if len(nonzero) else 0
    along = [out_len if d == axis else 1 for d in range(len(x.shape))]
    y: Value | None = None
    for t in range(taps):
        picked = ctx.add("gather", [x, ctx.const(index[:, t], hint="taps")], {"axis": axis})
        w = ctx.const(weight[:, t].astype(x.dtype).reshape(along), hint="tap_weights")
        term = ctx.add("mul", [picked, w])
        y = term if y is None else ctx.add("add", [y, term])
    assert y is not None
    return y


def _product(ctx: NodeContext, x: Value, axis: int, m: np.ndarray) -> Value:
    """The resized axis as a product with the whole weight matrix (many taps)."""
    out_len, in_len = m.shape
    pre, post = math_prod(x.shape[:axis]), math_prod(x.shape[axis + 1:])
    view = reshape(ctx, x, (pre, in_len, post))
    y = ctx.add("matmul", [ctx.const(m.astype(x.dtype), hint="weights"), view])
    return reshape(ctx, y, (*x.shape[:axis], out_len, *x.shape[axis + 1:]))


def _check_axis(ctx: NodeContext, axis: int, in_len: int, out_len: int) -> None:
    """Refuse an axis whose weights would take too long or too much memory to compute."""
    if out_len > MAX_RESIZE_POSITIONS:
        raise ctx.error(f"axis {axis} resized from {in_len} to {out_len} positions, over the "
                        f"import limit of {MAX_RESIZE_POSITIONS} output positions per axis")
    ctx.check_constant((out_len, in_len), "float64", f"the weights of axis {axis}")


def resize(ctx: NodeContext, x: Value, scales: list[float] | None, sizes: list[int] | None,
           roi: list[float] | None, axes: list[int] | None) -> Value:
    rank = len(x.shape)
    mode = str(ctx.attr("mode", "nearest"))
    transform = str(ctx.attr("coordinate_transformation_mode", "half_pixel"))
    antialias = bool(ctx.attr("antialias", 0))
    if mode == "nearest" and antialias:
        raise ctx.error("antialias is not defined for mode 'nearest'")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, axes, rank)
    full_scales = full_sizes = None
    if scales is not None:
        full_scales = [1.0] * rank
        for i, a in enumerate(axes):
            full_scales[a] = scales[i]
    if sizes is not None:
        full_sizes = list(x.shape)
        for i, a in enumerate(axes):
            full_sizes[a] = sizes[i]
    full_roi = None
    if roi is not None and len(roi):
        full_roi = [0.0] * rank + [1.0] * rank
        for i, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = roi[i], roi[len(axes) + i]
    policy = str(ctx.attr("keep_aspect_ratio_policy", "stretch"))
    try:
        factors, out_shape = rw.output_geometry(x.shape, full_scales, full_sizes, policy, axes)
        coeffs = rw.coefficient_fn(mode, str(ctx.attr("nearest_mode", "round_prefer_floor")),
                                   float(ctx.attr("cubic_coeff_a", -0.75)), antialias)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    dtype = x.dtype
    y = x
    if dtype not in ("float32", "float64") and mode != "nearest":
        y = ctx.add("cast", [x], {"dtype": "float32"})
    for a in axes:
        axis_roi = None if full_roi is None else [full_roi[a], full_roi[rank + a]]
        if (math.isclose(factors[a], 1.0) and out_shape[a] == x.shape[a]
                and (axis_roi is None or (math.isclose(axis_roi[0], 0.0)
                                          and math.isclose(axis_roi[1], 1.0)))):
            continue
        _check_axis(ctx, a, x.shape[a], out_shape[a])
        try:
            weights = rw.axis_weights(x.shape[a], out_shape[a], factors[a], coeffs, transform,
                                      axis_roi, bool(ctx.attr("exclude_outside", 0)))
        except ValueError as e:
            raise ctx.error(str(e)) from None
        y = _along_axis(ctx, y, a, weights, float(ctx.attr("extrapolation_value", 0.0)))
    if y.dtype != dtype:
        if not dtype.startswith("float"):
            y = ctx.add("round", [y])  # saturate_cast rounds to nearest
        y = ctx.add("cast", [y], {"dtype": dtype})
    return y


def _floats(a: np.ndarray | None) -> list[float] | None:
    return None if a is None or a.size == 0 else [float(v) for v in a.reshape(-1)]


@converter("Resize", since=11)
def convert_resize(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    roi = _floats(ctx.optional_constant(1, "roi"))
    scales = _floats(ctx.optional_constant(2, "scales"))
    given = ctx.optional_constant(3, "sizes")
    sizes = None if given is None or given.size == 0 else [int(v) for v in given.reshape(-1)]
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of scales and sizes must be given")
    axes = ctx.attr("axes") if ctx.opset >= 18 else None
    return resize(ctx, x, scales, sizes, roi, None if axes is None else list(axes))


@converter("Upsample", since=9)
def convert_upsample(ctx: NodeContext) -> Value:
    """Deprecated since opset 10; nearest with integer factors repeats elements."""
    scales = _floats(ctx.constant(1, "scales"))
    if ctx.attr("mode", "nearest") == "nearest" and scales is not None and \
            any(s != int(s) for s in scales):
        raise ctx.error(f"nearest Upsample needs integer scales, got {scales}")
    ctx.attrs.setdefault("coordinate_transformation_mode", "asymmetric")
    ctx.attrs.setdefault("nearest_mode", "floor")
    return resize(ctx, ctx.input(0), scales, None, None, None)
