"""Resize (opset 11+) and the deprecated Upsample: one constant weight matrix per resized
axis (see :mod:`..resize_weights`), applied as a gather when every output takes exactly
one input (nearest), as a few gathers and multiply-adds when each takes a few (linear,
cubic), and as a matrix product otherwise.

With constant ``roi``, ``scales`` and ``sizes`` the weights are constants. Where the run
gives ``scales`` or ``sizes`` (or ``roi``), :func:`resize_run_time` compiles once: the
output sizes are computed on the host before each run, and the taps and weights by
elementwise kernels over the output positions, from the scale as run-time data.
The arithmetic runs in float32 (float64 for float64 data); float16 data is widened for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import HostExpr, floor, host_max, host_min, lift
from tensorsmith.ir.symbolic import Dim, math_prod

from .. import resize_weights as rw
from ..context import NodeContext
from ..registry import converter
from .common import normalize_axes, positions, reshape

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


# -- scales, sizes or roi given by the run --------------------------------------------------


class _F64:
    """A float64 tensor of the graph with Python arithmetic: each operation adds an
    elementwise node (a number becomes a 0-d constant), so that the run-time path below
    reads as the formulas of :mod:`..resize_weights`, in their order and precision."""

    __slots__ = ("ctx", "v")

    def __init__(self, ctx: NodeContext, v: Value) -> None:
        self.ctx, self.v = ctx, v

    def of(self, o: _F64 | float) -> Value:
        return o.v if isinstance(o, _F64) else self.ctx.const(np.asarray(o, np.float64),
                                                              hint="k")

    def _op(self, op: str, a: _F64 | float, b: _F64 | float) -> _F64:
        return _F64(self.ctx, self.ctx.add(op, [self.of(a), self.of(b)]))

    def __add__(self, o: _F64 | float) -> _F64:
        return self._op("add", self, o)

    def __radd__(self, o: float) -> _F64:
        return self._op("add", o, self)

    def __sub__(self, o: _F64 | float) -> _F64:
        return self._op("sub", self, o)

    def __rsub__(self, o: float) -> _F64:
        return self._op("sub", o, self)

    def __mul__(self, o: _F64 | float) -> _F64:
        return self._op("mul", self, o)

    def __rmul__(self, o: float) -> _F64:
        return self._op("mul", o, self)

    def __truediv__(self, o: _F64 | float) -> _F64:
        return self._op("div", self, o)

    def __rtruediv__(self, o: float) -> _F64:
        return self._op("div", o, self)

    def minimum(self, o: _F64) -> _F64:
        return self._op("min", self, o)

    def maximum(self, o: _F64) -> _F64:
        return self._op("max", self, o)

    def floor(self) -> _F64:
        return _F64(self.ctx, self.ctx.add("floor", [self.v]))

    def compare(self, op: str, o: _F64 | float) -> Value:
        """A bool tensor: ``op`` is one of lt, le, gt, ge, eq."""
        return self.ctx.add(op, [self.v, self.of(o)])

    def flag(self, op: str, o: _F64 | float) -> _F64:
        """The comparison as 0.0 or 1.0."""
        return _F64(self.ctx, self.ctx.add("cast", [self.compare(op, o)], {"dtype": "float64"}))

    def pick(self, cond: Value, a: _F64 | float, b: _F64 | float) -> _F64:
        """``a where cond else b``."""
        return _F64(self.ctx, self.ctx.add("where", [cond, self.of(a), self.of(b)]))


def _run_time_operand(ctx: NodeContext, i: int) -> bool:
    """Whether input ``i`` is given and not a constant (the run gives it)."""
    v = ctx.optional_input(i)
    return v is not None and v.data is None


def _entries(ctx: NodeContext, i: int, what: str) -> tuple[Value, list[Any]] | None:
    """Input ``i`` (flattened) and its entries as numbers or host expressions; None where
    it is absent or empty; a ConstantRequiredError (or the error of a shape value) where
    the host cannot follow it."""
    v = ctx.optional_input(i)
    if v is None:
        return None
    entries = list(ctx.run_time_values(i, what).reshape(-1))
    if not entries:
        return None
    if not all(isinstance(e, HostExpr) or (isinstance(e, int | float)
                                           and not isinstance(e, bool)) for e in entries):
        ctx.constant(i, what)  # sizes of the graph, not run-time data: refused as before
    if len(v.shape) != 1:
        v = reshape(ctx, v, [len(entries)])
    return v, entries


def _entry(ctx: NodeContext, v: Value, entries: list[Any], k: int) -> _F64:
    """Entry ``k`` as float64 data: a constant where it is a number, else the element the
    run gives."""
    e = entries[k]
    if isinstance(e, int | float):
        return _F64(ctx, ctx.const(np.asarray(float(e), np.float64), hint="entry"))
    picked = ctx.add("gather", [v, ctx.const(np.asarray(k, np.int64), hint="entry")],
                     {"axis": 0})
    if picked.dtype != "float64":
        picked = ctx.add("cast", [picked], {"dtype": "float64"})
    return _F64(ctx, picked)


def _roi(ctx: NodeContext, i: int, count: int) -> tuple[Value, list[Any]] | None:
    """The roi (input ``i``), flattened, with its entries where it is a constant (None
    for each where the run gives it: it is only data, no size depends on it); None where
    it is absent or empty."""
    v = ctx.optional_input(i)
    if v is None or not isinstance(math_prod(v.shape), int) or math_prod(v.shape) == 0:
        return None
    n = int(math_prod(v.shape))
    if n != 2 * count:
        raise ctx.error(f"roi has {n} entries for {count} axes (2 per axis)")
    if len(v.shape) != 1:
        v = reshape(ctx, v, [n])
    entries = [None] * n if v.data is None else [float(e) for e in v.data.reshape(-1)]
    return v, entries


def _run_time_geometry(ctx: NodeContext, x: Value, axes: list[int],
                       scales: tuple[Value, list[Any]] | None,
                       sizes: tuple[Value, list[Any]] | None, policy: str
                       ) -> dict[int, tuple[Dim, _F64, Callable[[], _F64]]]:
    """Per resized axis: the output size (computed on the host), the scale as float64 data,
    and a maker of the output size as data (only half_pixel_symmetric needs it, so its
    nodes are built only when asked for).
    The host computes what :func:`rw.output_geometry` does: ``floor(in * scale)``, the
    sizes, or with a kept aspect ratio ``floor(scale * in + 0.5)`` for the min or max of
    ``size / in`` over the axes."""
    given = scales if scales is not None else sizes
    assert given is not None
    v, entries = given
    if len(entries) != len(axes):
        raise ctx.error(f"{'scales' if scales is not None else 'sizes'} has {len(entries)} "
                        f"entries for {len(axes)} axes")
    ins = {a: int(x.shape[a]) for a in axes}
    data = {a: _entry(ctx, v, entries, k) for k, a in enumerate(axes)}
    geometry: dict[int, tuple[Dim, _F64, Callable[[], _F64]]] = {}
    if scales is not None:
        for k, a in enumerate(axes):
            out = floor(lift(entries[k]) * ins[a]) if isinstance(entries[k], HostExpr) \
                else int(entries[k] * ins[a])
            geometry[a] = (ctx.size(out, f"out{a}"), data[a],
                           partial(_floor_of, data[a], float(ins[a]), 0.0))
        return geometry
    if policy == "stretch":
        for k, a in enumerate(axes):
            geometry[a] = (ctx.size(entries[k], f"out{a}"), data[a] / float(ins[a]),
                           partial(_same, data[a]))
        return geometry
    if policy not in ("not_larger", "not_smaller"):
        raise ctx.error(f"unknown keep_aspect_ratio_policy {policy!r}")
    smaller = policy == "not_larger"
    host_scale: Any = None
    scale: _F64 | None = None
    for k, a in enumerate(axes):
        h = lift(entries[k]) / ins[a] if isinstance(entries[k], HostExpr) \
            else entries[k] / ins[a]
        d = data[a] / float(ins[a])
        if scale is None:
            host_scale, scale = h, d
        elif smaller:
            host_scale, scale = host_min(host_scale, h), scale.minimum(d)
        else:
            host_scale, scale = host_max(host_scale, h), scale.maximum(d)
    assert scale is not None
    for a in axes:
        out = floor(lift(host_scale) * ins[a] + 0.5) if isinstance(host_scale, HostExpr) \
            else int(host_scale * ins[a] + 0.5)
        geometry[a] = (ctx.size(out, f"out{a}"), scale,
                       partial(_floor_of, scale, float(ins[a]), 0.5))
    return geometry


def _same(data: _F64) -> _F64:
    return data


def _floor_of(scale: _F64, in_len: float, half: float) -> _F64:
    """``floor(scale * in_len + half)``: an output size as data, as the host computes it."""
    return (scale * in_len + half).floor() if half else (scale * in_len).floor()


def _run_time_source(ctx: NodeContext, transform: str, y: _F64, in_len: int, scale: _F64,
                     out_len: Callable[[], _F64], roi: tuple[_F64, _F64] | None
                     ) -> tuple[_F64, Value | None]:
    """:func:`rw.source_coordinates` on run-time data: the input coordinate of each
    output position ``y``, and (tf_crop_and_resize) which fall outside the input."""
    n = float(in_len)
    if transform in ("half_pixel", "asymmetric"):
        return ((y + 0.5) / scale - 0.5 if transform == "half_pixel" else y / scale), None
    width = scale * n
    if transform == "align_corners":
        return y.pick(width.compare("eq", 1.0), 0.0, y * (n - 1) / (width - 1.0)), None
    if transform == "tf_crop_and_resize":
        if roi is None:
            raise ctx.error("tf_crop_and_resize needs a roi")
        lo, hi = roi
        x = y.pick(width.compare("eq", 1.0), (hi - lo) * (n - 1) / 2.0,
                   y * (hi - lo) * (n - 1) / (width - 1.0))
        x = x + lo * (n - 1)
        return x, ctx.add("or", [x.compare("lt", 0.0), x.compare("gt", n - 1)])
    if transform == "pytorch_half_pixel":
        return y.pick(width.compare("eq", 1.0), -0.5, (y + 0.5) / scale - 0.5), None
    if transform == "half_pixel_symmetric":
        offset = n / 2 * (1.0 - out_len() / width)
        return offset + (y + 0.5) / scale - 0.5, None
    raise ctx.error(f"unknown coordinate_transformation_mode {transform!r}")


def _cubic_taps(r: _F64, a: float) -> list[_F64]:
    """:func:`rw._cubic` on run-time ratios."""
    s = 1.0 - r
    return [((a * (r + 1.0) - 5 * a) * (r + 1.0) + 8 * a) * (r + 1.0) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1.0,
            ((a + 2) * s - (a + 3)) * s * s + 1.0,
            ((a * (s + 1.0) - 5 * a) * (s + 1.0) + 8 * a) * (s + 1.0) - 4 * a]


def _run_time_taps(ctx: NodeContext, x: _F64, in_len: int) -> list[tuple[_F64, _F64 | None]]:
    """The input positions each output reads and their weights (None: weight 1, a plain
    gather), as :func:`rw.axis_weights` picks them. For a coordinate ``x`` with floor
    ``f`` and fraction ``r`` the reference's neighbours are ``f + k`` weighted by the
    kernel of ``r``; at an integer ``x`` it reads ``x`` with weight 1 (its table for ratio
    1 on ``x - 1 ...``), which the same taps give with ``r = 0``."""
    mode = str(ctx.attr("mode", "nearest"))
    f = x.floor()
    r = x - f
    if mode == "nearest":
        nearest = str(ctx.attr("nearest_mode", "round_prefer_floor"))
        ups = {"round_prefer_floor": ("gt", 0.5), "round_prefer_ceil": ("ge", 0.5),
               "ceil": ("gt", 0.0)}
        if nearest == "floor":
            taps: list[tuple[_F64, _F64 | None]] = [(f, None)]
        elif nearest in ups:
            taps = [(f + r.flag(*ups[nearest]), None)]
        else:
            raise ctx.error(f"unknown nearest_mode {nearest!r}")
    elif mode == "linear":
        taps = [(f, 1.0 - r), (f + 1.0, r)]
    elif mode == "cubic":
        weights = _cubic_taps(r, float(ctx.attr("cubic_coeff_a", -0.75)))
        taps = [(f + float(k - 1), w) for k, w in enumerate(weights)]
    else:
        raise ctx.error(f"unknown resize mode {mode!r}")
    if not ctx.attr("exclude_outside", 0):
        return taps
    kept = []
    for index, w in taps:
        inside = ctx.add("and", [index.compare("ge", 0.0), index.compare("le", in_len - 1.0)])
        kept.append((index, index.pick(inside, 1.0 if w is None else w, 0.0)))
    total = kept[0][1]
    for _, w in kept[1:]:
        total = total + w
    total = total.pick(total.compare("eq", 0.0), 1.0, total)
    return [(index, w / total) for index, w in kept]


def _run_time_axis(ctx: NodeContext, y: Value, axis: int, in_len: int, out: Dim,
                   taps: list[tuple[_F64, _F64 | None]], outside: Value | None) -> Value:
    """Axis ``axis`` of ``y`` resized to ``out`` positions: each tap gathers (indices
    clamped into the input, as the reference clamps its neighbours) and weights; no taps:
    an axis of one input position, which every output copies."""
    along = [out if d == axis else 1 for d in range(len(y.shape))]
    result: Value | None = None
    if not taps:
        result = ctx.add("expand", [y], {"shape": [out if d == axis else n
                                                   for d, n in enumerate(y.shape)]})
    for index, w in taps:
        clamped = ctx.add("clip", [index.v], {"min": 0.0, "max": float(in_len - 1)})
        picked = ctx.add("gather", [y, ctx.add("cast", [clamped], {"dtype": "int64"})],
                         {"axis": axis})
        if w is not None:
            weight = w.v if y.dtype == "float64" else ctx.add("cast", [w.v], {"dtype": y.dtype})
            picked = ctx.add("mul", [picked, reshape(ctx, weight, along)])
        result = picked if result is None else ctx.add("add", [result, picked])
    assert result is not None
    if outside is not None:
        fill = ctx.const(np.asarray(float(ctx.attr("extrapolation_value", 0.0)), y.dtype),
                         hint="fill")
        result = ctx.add("where", [reshape(ctx, outside, along), fill, result])
    return result


def resize_run_time(ctx: NodeContext, x: Value, scales_at: int, sizes_at: int | None,
                    roi_at: int | None, axes: list[int] | None) -> Value:
    """Resize where the run gives ``scales`` or ``sizes`` (inputs ``scales_at``,
    ``sizes_at``) or ``roi``: compiled once for all their values. Each resized axis gets
    an output size the host computes from them before the run, and its source
    coordinates, taps and weights are computed by kernels over the output positions, with
    the scale (and the roi) read as data: the arithmetic of :mod:`..resize_weights`, at
    run time. Antialiasing (variable-width filters) stays with the constant path."""
    rank = len(x.shape)
    mode = str(ctx.attr("mode", "nearest"))
    transform = str(ctx.attr("coordinate_transformation_mode", "half_pixel"))
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, axes, rank)
    static_axes = all(isinstance(x.shape[a], int) and x.shape[a] > 0 for a in axes)
    scales = _entries(ctx, scales_at, "scales") if static_axes else None
    sizes = (_entries(ctx, sizes_at, "sizes")
             if static_axes and sizes_at is not None and scales is None else None)
    if not static_axes or (scales is None and sizes is None):
        # input sizes known only at run time, or an empty operand: the constant path
        for i in (scales_at, sizes_at, roi_at):
            if i is not None and _run_time_operand(ctx, i):
                ctx.constant(i, "scales" if i == scales_at else "sizes" if i == sizes_at
                             else "roi")
        raise ctx.error("exactly one of scales and sizes must be given")
    geometry = _run_time_geometry(ctx, x, axes, scales, sizes,
                                  str(ctx.attr("keep_aspect_ratio_policy", "stretch")))
    roi = _roi(ctx, roi_at, len(axes)) if (roi_at is not None
                                            and transform == "tf_crop_and_resize") else None
    dtype = x.dtype
    y = x
    if dtype not in ("float32", "float64") and mode != "nearest":
        y = ctx.add("cast", [x], {"dtype": "float32"})
    for k, a in enumerate(axes):
        out, scale, out_len = geometry[a]
        in_len = int(x.shape[a])
        axis_roi = None
        if roi is not None:
            axis_roi = (_entry(ctx, roi[0], roi[1], k),
                        _entry(ctx, roi[0], roi[1], len(axes) + k))
        # one input position: every tap is clamped onto it, and the weights of each kernel
        # sum to 1 (exclude_outside may leave a nearest output none: the full path)
        one_input = in_len == 1 and not ctx.attr("exclude_outside", 0)
        if one_input and axis_roi is None:
            y = _run_time_axis(ctx, y, a, in_len, out, [], None)
            continue
        where_to = _F64(ctx, ctx.add("cast", [positions(ctx, out)], {"dtype": "float64"}))
        source, outside = _run_time_source(ctx, transform, where_to, in_len, scale, out_len,
                                           axis_roi)
        taps = [] if one_input else _run_time_taps(ctx, source, in_len)
        y = _run_time_axis(ctx, y, a, in_len, out, taps, outside)
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
    axes = ctx.attr("axes") if ctx.opset >= 18 else None
    if not ctx.attr("antialias", 0) and any(_run_time_operand(ctx, i) for i in (1, 2, 3)):
        return resize_run_time(ctx, x, 2, 3, 1, None if axes is None else list(axes))
    roi = _floats(ctx.optional_constant(1, "roi"))
    scales = _floats(ctx.optional_constant(2, "scales"))
    given = ctx.optional_constant(3, "sizes")
    sizes = None if given is None or given.size == 0 else [int(v) for v in given.reshape(-1)]
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of scales and sizes must be given")
    return resize(ctx, x, scales, sizes, roi, None if axes is None else list(axes))


@converter("Upsample", since=9)
def convert_upsample(ctx: NodeContext) -> Value:
    """Deprecated since opset 10; nearest with integer factors repeats elements."""
    ctx.attrs.setdefault("coordinate_transformation_mode", "asymmetric")
    ctx.attrs.setdefault("nearest_mode", "floor")
    if _run_time_operand(ctx, 1):
        return resize_run_time(ctx, ctx.input(0), 1, None, None, None)
    scales = _floats(ctx.constant(1, "scales"))
    if ctx.attr("mode", "nearest") == "nearest" and scales is not None and \
            any(s != int(s) for s in scales):
        raise ctx.error(f"nearest Upsample needs integer scales, got {scales}")
    return resize(ctx, ctx.input(0), scales, None, None, None)
