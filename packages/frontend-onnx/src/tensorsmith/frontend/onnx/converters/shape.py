"""Ops that move data or compute shapes: Reshape, Flatten, Transpose, (Un)Squeeze,
Concat, Split, Slice, Gather, Expand, Tile, Pad, Shape, Size, DepthToSpace, SpaceToDepth.

Shape and Size are known when the model is compiled: constants for static shapes, shape
values holding symbols for symbolic ones, and the index arithmetic exported models do on
them folds at import either way (see :mod:`..context`). Operands that say *how* to move
data (a reshape's target, slice bounds, pads) are constants or such shape values here: a
reshape's or expand's target, a tile's repeats, a split's sizes and a slice's starts
and ends may hold symbolic sizes. Where the run gives them instead (a graph input), the
converters hand over to :mod:`.run_time_shape`, which computes what they decide on the
host before each run.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.graph import Value
from tensorsmith.ir.ops.broadcast import broadcast_shapes
from tensorsmith.ir.symbolic import Dim, Sym, SymbolicDimError, is_static, math_prod, shape_text

from ..context import NodeContext
from ..registry import converter
from ..shape_values import size_max, size_min
from .common import (
    fill_value,
    ints,
    normalize_axes,
    normalize_axis,
    pad_node,
    parts,
    reshape,
    slice_axis,
    transpose,
)
from .run_time_shape import (
    center_crop_pad_run_time,
    expand_run_time,
    pad_at_run_time,
    pad_run_time,
    reshape_run_time,
    run_time_fill,
    run_time_operand,
    slice_run_time,
    split_run_time,
    squeeze_run_time,
    unsqueeze_run_time,
)


@converter("Reshape", since=5)
def convert_reshape(ctx: NodeContext) -> Value:
    """The target may hold symbolic sizes; a -1 among them is the quotient of the sizes,
    which must divide exactly for every value of the symbols. A target the run gives is
    turned into sizes the host computes (:func:`reshape_run_time`)."""
    x = ctx.input(0)
    allowzero = ctx.opset >= 14 and int(ctx.attr("allowzero", 0))
    given = run_time_operand(ctx, 1, "shape")
    if given is not None:
        return reshape_run_time(ctx, x, given, bool(allowzero))
    target = ctx.dims(1, "shape")
    shape: list[Dim] = []
    for i, d in enumerate(target):
        if isinstance(d, int) and d == 0 and not allowzero:
            if i >= len(x.shape):
                raise ctx.error(f"shape {shape_text(target)} copies dim {i} (0) of an input "
                                f"of rank {len(x.shape)}")
            d = x.shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise ctx.error(f"shape {shape_text(target)} has more than one -1")
    if -1 in shape:
        known = math_prod(d for d in shape if not (isinstance(d, int) and d == -1))
        total = math_prod(x.shape)
        quotient = total // known if known != 0 else 0
        if known == 0 or quotient * known != total:
            raise ctx.error(f"cannot reshape {shape_text(x.shape)} ({total} elements) to "
                            f"{shape_text(target)}")
        shape[shape.index(-1)] = quotient
    if any(d < 0 for d in shape):
        raise ctx.error(f"shape {shape_text(target)} has a negative dimension other than -1")
    return reshape(ctx, x, shape)


@converter("Flatten", since=1)
def convert_flatten(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    rank = len(x.shape)
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise ctx.error(f"axis {axis} is out of range for an input of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return reshape(ctx, x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@converter("Transpose", since=1)
def convert_transpose(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    rank = len(x.shape)
    perm = ctx.attr("perm") or list(range(rank - 1, -1, -1))
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {perm} is not a permutation of the {rank} axes")
    return transpose(ctx, x, perm)


def _squeeze(ctx: NodeContext, axes: list[int] | None) -> Value:
    x = ctx.input(0)
    if axes is None:
        if not is_static(x.shape):
            raise SymbolicDimError(f"squeezing every axis of size 1 of {shape_text(x.shape)} "
                                   "depends on sizes known only at run time; give the axes")
        drop = [d for d, n in enumerate(x.shape) if n == 1]
    else:
        drop = normalize_axes(ctx, axes, len(x.shape))
        for d in drop:
            if x.shape[d] != 1:
                raise ctx.error(f"cannot squeeze axis {d} of shape {shape_text(x.shape)}: "
                                f"its size is {x.shape[d]}, not 1")
    return reshape(ctx, x, [n for d, n in enumerate(x.shape) if d not in drop])


@converter("Squeeze", since=1)
def convert_squeeze_v1(ctx: NodeContext) -> Value:
    axes = ctx.attr("axes")
    return _squeeze(ctx, axes if axes else None)


@converter("Squeeze", since=13)
def convert_squeeze_v13(ctx: NodeContext) -> Value:
    axes = run_time_operand(ctx, 1, "axes")
    if axes is not None:
        return squeeze_run_time(ctx, ctx.input(0), axes)
    given = ctx.optional_constant(1, "axes")
    return _squeeze(ctx, None if given is None else ints(given))


def _unsqueeze(ctx: NodeContext, axes: list[int]) -> Value:
    x = ctx.input(0)
    rank = len(x.shape) + len(axes)
    inserted = set(normalize_axes(ctx, axes, rank))
    dims = iter(x.shape)
    return reshape(ctx, x, [1 if d in inserted else next(dims) for d in range(rank)])


@converter("Unsqueeze", since=1)
def convert_unsqueeze_v1(ctx: NodeContext) -> Value:
    return _unsqueeze(ctx, list(ctx.required_attr("axes")))


@converter("Unsqueeze", since=13)
def convert_unsqueeze_v13(ctx: NodeContext) -> Value:
    axes = run_time_operand(ctx, 1, "axes")
    if axes is not None:
        return unsqueeze_run_time(ctx, ctx.input(0), axes)
    return _unsqueeze(ctx, ints(ctx.constant(1, "axes")))


@converter("Concat", since=4)
def convert_concat(ctx: NodeContext) -> Value:
    values = [v for v in ctx.inputs if v is not None]
    if not values:
        raise ctx.error("takes at least one input")
    rank = len(values[0].shape)
    axis = normalize_axis(ctx, int(ctx.required_attr("axis")), rank)
    if len(values) == 1:
        return values[0]
    return ctx.add("concat", values, {"axis": axis})


def _split_sizes(ctx: NodeContext, dim: Dim, split: list[Dim] | None) -> list[Dim]:
    n = ctx.num_outputs
    if split is not None:
        if len(split) != n or sum(split) != dim or any(s < 0 for s in split):
            raise ctx.error(f"split {shape_text(split)} does not divide an axis of {dim} "
                            f"into {n} parts")
        return split
    parts = ctx.attr("num_outputs") if ctx.opset >= 18 else None
    if parts is not None:  # opset 18: equal chunks of ceil(dim / n), the last smaller
        chunk = -(-dim // int(parts))
        return [max(0, min(chunk, dim - i * chunk)) for i in range(n)]
    if dim % n:
        raise ctx.error(f"cannot split an axis of {dim} into {n} equal parts")
    return [dim // n] * n


def _split(ctx: NodeContext, split: list[Dim] | None) -> list[Value]:
    x = ctx.input(0)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(x.shape))
    return parts(ctx, x, axis, _split_sizes(ctx, x.shape[axis], split))


@converter("Split", since=2)
def convert_split_v2(ctx: NodeContext) -> list[Value]:
    split = ctx.attr("split")
    return _split(ctx, list(split) if split else None)


@converter("Split", since=13)
def convert_split_v13(ctx: NodeContext) -> list[Value]:
    given = run_time_operand(ctx, 1, "split")
    if given is not None:
        return split_run_time(ctx, given)
    return _split(ctx, ctx.optional_dims(1, "split"))


PAST_END = 2**48
"""No dim reaches this (a tensor holds at most 2**48 bytes), so a slice bound beyond it
(exporters write INT64_MAX for "to the end") is past the end of any axis, symbolic or not."""


def slice_bounds(dim: Dim, start: Dim, end: Dim, step: int) -> tuple[Dim, Dim]:
    """ONNX Slice's clamping: negative indices count from the end; a forward slice clamps
    to [0, dim], a backward one to [0, dim - 1] for the start and [-1, dim - 1] for the
    end (-1 meaning "through index 0"). With symbolic sizes the clamps are decided where
    every size agrees (``-1`` is ``seq - 1``), else kept as ``min``/``max`` of sizes."""
    if isinstance(dim, int) and isinstance(start, int) and isinstance(end, int):
        if start < 0:
            start += dim
        if end < 0:
            end += dim
        if step > 0:
            return min(max(start, 0), dim), min(max(end, 0), dim)
        if dim == 0:
            return 0, 0
        return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    if step > 0:
        return _clamp(start, dim, 0, dim), _clamp(end, dim, 0, dim)
    if isinstance(dim, int) and dim == 0:
        return 0, 0
    return _clamp(start, dim, 0, dim - 1), _clamp(end, dim, -1, dim - 1)


def _clamp(index: Dim, dim: Dim, lo: Dim, hi: Dim) -> Dim:
    """``index`` (negative counts from the end of ``dim``) clamped to [lo, hi]."""
    if isinstance(index, int) and abs(index) >= PAST_END:
        return hi if index > 0 else lo
    if index < 0:
        index = index + dim
    return size_min(size_max(index, lo), hi)


def _slice(ctx: NodeContext, starts: list[Dim], ends: list[Dim], axes: list[int] | None,
           steps: list[int] | None) -> Value:
    x = ctx.input(0)
    rank = len(x.shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts {shape_text(starts)}, ends {shape_text(ends)}, axes {axes} "
                        f"and steps {steps} differ in length")
    begin: list[Dim] = [0] * rank
    end: list[Dim] = list(x.shape)
    step = [1] * rank
    for a, s, e, k in zip(normalize_axes(ctx, axes, rank), starts, ends, steps):
        if k == 0:
            raise ctx.error(f"step 0 on axis {a}")
        begin[a], end[a] = slice_bounds(x.shape[a], s, e, k)
        step[a] = k
    if begin == [0] * rank and end == list(x.shape) and step == [1] * rank:
        return x
    return ctx.add("slice", [x], {"begin": begin, "end": end, "step": step})


@converter("Slice", since=1)
def convert_slice_v1(ctx: NodeContext) -> Value:
    axes = ctx.attr("axes")
    return _slice(ctx, list(ctx.required_attr("starts")), list(ctx.required_attr("ends")),
                  list(axes) if axes else None, None)


@converter("Slice", since=10)
def convert_slice_v10(ctx: NodeContext) -> Value:
    if any(run_time_operand(ctx, i, w) is not None
           for i, w in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps"))):
        return slice_run_time(ctx)
    axes = ctx.optional_constant(3, "axes")
    steps = ctx.optional_constant(4, "steps")
    return _slice(ctx, ctx.dims(1, "starts"), ctx.dims(2, "ends"),
                  None if axes is None else ints(axes), None if steps is None else ints(steps))


@converter("Gather", since=1)
def convert_gather(ctx: NodeContext) -> Value:
    data, indices = ctx.input(0), ctx.input(1)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(data.shape))
    n = data.shape[axis]
    if indices.data is not None and isinstance(n, Sym):
        return _gather_symbolic_axis(ctx, data, indices.data.astype(np.int64), axis)
    if indices.data is not None:
        idx = indices.data.astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ctx.error(f"indices {idx.reshape(-1).tolist()[:8]} are out of range for "
                            f"axis {axis} of size {n}")
        indices = ctx.const(np.where(idx < 0, idx + n, idx), hint="indices")
    return ctx.add("gather", [data, indices], {"axis": axis})


def _gather_symbolic_axis(ctx: NodeContext, data: Value, idx: np.ndarray, axis: int) -> Value:
    """Constant indices into an axis of symbolic size ``n``: a negative one is ``n + i``,
    known only at run time, so one index (``x[:, -1]``, the last token) becomes a slice;
    non-negative ones stay a gather, whose range the run-time index checks test."""
    n = data.shape[axis]
    if idx.size == 0 or idx.min() >= 0:
        return ctx.add("gather", [data, ctx.const(idx, hint="indices")], {"axis": axis})
    if idx.size != 1:
        raise SymbolicDimError(f"negative indices {idx.reshape(-1).tolist()[:8]} into axis "
                               f"{axis} of size {n}, known only at run time, are taken one "
                               "at a time only")
    i = int(idx.reshape(-1)[0])
    begin = i + n
    try:
        inside = bool(begin >= 0)
    except SymbolicDimError:
        inside = False
    if not inside:
        raise SymbolicDimError(f"index {i} is inside axis {axis} of size {n} only for some "
                               "sizes known at run time")
    picked = slice_axis(ctx, data, axis, begin, begin + 1)
    shape = [*data.shape[:axis], *idx.shape, *data.shape[axis + 1:]]
    return reshape(ctx, picked, shape)


@converter("Expand", since=8)
def convert_expand(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    given = run_time_operand(ctx, 1, "shape")
    if given is not None:
        return expand_run_time(ctx, x, given)
    target = ctx.dims(1, "shape")
    try:  # not np.broadcast_shapes: it allocates, and fails on sizes no array can have
        shape = broadcast_shapes(x.shape, target)
    except SymbolicDimError as e:
        raise SymbolicDimError(f"{ctx.where}: cannot expand {shape_text(x.shape)} to "
                               f"{shape_text(target)}: {e}") from None
    except ShapeError as e:
        raise ctx.error(f"cannot expand {shape_text(x.shape)} to {target}: {e}") from None
    return x if shape == x.shape else ctx.add("expand", [x], {"shape": list(shape)})


@converter("Tile", since=6)
def convert_tile(ctx: NodeContext) -> Value:
    """Tiling is an expand of an interleaved view: [a, b] by [r, s] is
    reshape([1, a, 1, b]) -> expand([r, a, s, b]) -> reshape([r*a, s*b])."""
    x = ctx.input(0)
    given = run_time_operand(ctx, 1, "repeats")
    repeats = (ctx.dims(1, "repeats") if given is None
               else [ctx.size(r, f"repeats{i}") for i, r in enumerate(given)])
    if len(repeats) != len(x.shape) or any(r < 0 for r in repeats):
        raise ctx.error(f"repeats {shape_text(repeats)} do not fit an input of shape "
                        f"{shape_text(x.shape)}")
    if all(r == 1 for r in repeats):
        return x
    view = reshape(ctx, x, [d for n in x.shape for d in (1, n)])
    big = ctx.add("expand", [view], {"shape": [d for r, n in zip(repeats, x.shape)
                                               for d in (r, n)]})
    return reshape(ctx, big, [r * n for r, n in zip(repeats, x.shape)])


def _pad(ctx: NodeContext, pads: list[int], value: float, axes: list[int] | None,
         fill: Value | None = None) -> Value:
    x = ctx.input(0)
    rank = len(x.shape)
    mode = ctx.attr("mode", "constant")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, axes, rank)
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} need 2 values per padded axis ({len(axes)} axes)")
    before, after = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[i + len(axes)]
    # negative pads crop: slice those first, then pad by the positive amounts
    if any(p < 0 for p in (*before, *after)):
        begin = [max(-b, 0) for b in before]
        end = [n - max(-a, 0) for n, a in zip(x.shape, after)]
        if any(e < b for b, e in zip(begin, end)):
            raise ctx.error(f"pads {pads} crop more than the input {shape_text(x.shape)} has")
        x = ctx.add("slice", [x], {"begin": begin, "end": end, "step": [1] * rank})
        before, after = [max(b, 0) for b in before], [max(a, 0) for a in after]
    return pad_node(ctx, x, before, after, mode, value, fill)


@converter("Pad", since=2)
def convert_pad_v2(ctx: NodeContext) -> Value:
    return _pad(ctx, list(ctx.required_attr("pads")), float(ctx.attr("value", 0.0)), None)


@converter("Pad", since=11)
def convert_pad_v11(ctx: NodeContext) -> Value:
    fill = run_time_fill(ctx)
    if pad_at_run_time(ctx):
        return pad_run_time(ctx, fill)
    value = 0.0 if fill is not None else fill_value(ctx)
    axes = ctx.optional_constant(3, "axes") if ctx.opset >= 18 else None
    return _pad(ctx, ints(ctx.constant(1, "pads")), value,
                None if axes is None else ints(axes), fill)


@converter("Shape", since=1)
def convert_shape(ctx: NodeContext) -> Value:
    """A constant, or a shape value where the shape holds symbolic sizes."""
    dims = list(ctx.input(0).shape)
    if ctx.opset >= 15:  # start/end slice the shape, clamped like Python slicing
        dims = dims[int(ctx.attr("start", 0)):ctx.attr("end")]
    if is_static(dims):
        return ctx.const(np.asarray(dims, dtype=np.int64), hint="shape")
    entries = np.empty(len(dims), dtype=object)
    entries[:] = dims
    return ctx.shape_value(entries, "int64", hint="shape")


@converter("Size", since=1)
def convert_size(ctx: NodeContext) -> Value:
    size = math_prod(ctx.input(0).shape)
    if isinstance(size, int):
        return ctx.const(np.int64(size), hint="size")
    entries = np.empty((), dtype=object)
    entries[()] = size
    return ctx.shape_value(entries, "int64", hint="size")


@converter("DepthToSpace", since=1)
def convert_depth_to_space(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    b = int(ctx.required_attr("blocksize"))
    if len(x.shape) != 4 or x.shape[1] % (b * b):
        raise ctx.error(f"needs [N, C, H, W] with C divisible by {b * b}, got "
                        f"{shape_text(x.shape)}")
    n, c, h, w = x.shape
    if ctx.attr("mode", "DCR") == "CRD":
        y = reshape(ctx, x, (n, c // (b * b), b, b, h, w))
        y = transpose(ctx, y, (0, 1, 4, 2, 5, 3))
    else:
        y = reshape(ctx, x, (n, b, b, c // (b * b), h, w))
        y = transpose(ctx, y, (0, 3, 4, 1, 5, 2))
    return reshape(ctx, y, (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth", since=1)
def convert_space_to_depth(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    b = int(ctx.required_attr("blocksize"))
    if len(x.shape) != 4 or x.shape[2] % b or x.shape[3] % b:
        raise ctx.error(f"needs [N, C, H, W] with H and W divisible by {b}, got "
                        f"{shape_text(x.shape)}")
    n, c, h, w = x.shape
    y = reshape(ctx, x, (n, c, h // b, b, w // b, b))
    if ctx.attr("mode", "DCR") == "CRD":  # the attribute exists from opset 28
        y = transpose(ctx, y, (0, 1, 3, 5, 2, 4))
    else:
        y = transpose(ctx, y, (0, 3, 5, 1, 2, 4))
    return reshape(ctx, y, (n, c * b * b, h // b, w // b))


@converter("CenterCropPad", since=18)
def convert_center_crop_pad(ctx: NodeContext) -> Value:
    """Crop or zero-pad each listed axis to the wanted size around its centre (an odd
    difference leaves the extra element at the end)."""
    x = ctx.input(0)
    if run_time_operand(ctx, 1, "shape") is not None:
        return center_crop_pad_run_time(ctx)
    wanted = ints(ctx.constant(1, "shape"))
    rank = len(x.shape)
    axes = ctx.attr("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, list(axes), rank)
    if len(wanted) != len(axes):
        raise ctx.error(f"shape {wanted} needs one size per axis {axes}")
    begin, end = [0] * rank, list(x.shape)
    before, after = [0] * rank, [0] * rank
    for a, size in zip(axes, wanted):
        dim = x.shape[a]
        if size < dim:
            begin[a] = (dim - size) // 2
            end[a] = begin[a] + size
        elif size > dim:
            before[a] = (size - dim) // 2
            after[a] = size - dim - before[a]
    if begin != [0] * rank or end != list(x.shape):
        x = ctx.add("slice", [x], {"begin": begin, "end": end, "step": [1] * rank})
    if any(before) or any(after):
        x = ctx.add("pad", [x], {"before": before, "after": after, "mode": "constant",
                                 "value": 0})
    return x

