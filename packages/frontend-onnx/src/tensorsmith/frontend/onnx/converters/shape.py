"""Ops that move data or compute shapes: Reshape, Flatten, Transpose, (Un)Squeeze,
Concat, Split, Slice, Gather, Expand, Tile, Pad, Shape, Size, DepthToSpace, SpaceToDepth.

Shape and Size are known when the model is compiled: constants for static shapes, shape
values holding symbols for symbolic ones, and the index arithmetic exported models do on
them folds at import either way (see :mod:`..context`). Operands that say *how* to move
data (a reshape's target, slice bounds, pads) must therefore be known at compile time;
a reshape's or expand's target, a tile's repeats, a split's sizes and a slice's starts
and ends may hold symbolic sizes.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import HostExpr, host_max, host_min, is_run_time, lift, where
from tensorsmith.ir.ops.broadcast import broadcast_shapes
from tensorsmith.ir.symbolic import Dim, Sym, SymbolicDimError, is_static, math_prod, shape_text

from ..context import NodeContext
from ..registry import converter
from ..shape_values import size_max, size_min
from .common import (
    filled,
    ints,
    normalize_axes,
    normalize_axis,
    reshape,
    slice_axis,
    transpose,
)


def _run_time_operand(ctx: NodeContext, i: int, what: str) -> list[object] | None:
    """The entries of input ``i`` (a reshape's target, axes, repeats) where the run gives
    some of them (host expressions, see tensorsmith.ir.host_sizes); None where they are
    all known now (a constant, a shape value) or cannot be sizes, which the compile-time
    path handles (refusing, so the backend specializes, what it cannot). An empty input
    ``x`` is left to that path too: the sizes the host computes are at least 1."""
    v = ctx.optional_input(i)
    if v is None or v.data is not None or 0 in ctx.input(0).shape:
        return None
    try:
        entries = list(ctx.run_time_values(i, what).reshape(-1))
    except SymbolicDimError:  # (a ConstantRequiredError: computed by kernels)
        return None
    if not any(is_run_time(e) for e in entries):
        return None
    if any(isinstance(e, float) or (is_run_time(e) and e.is_float) for e in entries):
        return None
    return entries


def _total(terms: list[object]) -> object:
    """The sum of ``terms`` (host expressions or ints), without a 0 term in its text."""
    total: object = 0
    for t in terms:
        total = t if isinstance(total, int) and total == 0 else total + t
    return total


def _named_axes(ctx: NodeContext, axes: list[object], rank: int) -> list[object]:
    """For each of ``rank`` axes, 1 where some of ``axes`` (which may count from the end)
    names it, else 0, as the host computes it. One more than the count is a size of its
    own (sizes are at least 1), so that the expressions built on it name it."""
    flags = []
    for d in range(rank):
        count = _total([hit for a in axes for hit in (lift(a) == d, lift(a) == d - rank)])
        flags.append(lift(ctx.size(1 + count, f"axis{d}_named")) >= 2)
    return flags


def _nth_dim(shape: tuple[Dim, ...] | list[Dim], index: object) -> object:
    """``shape[index]`` for an index known at run time; 0 (a size the run refuses) where
    it is out of range."""
    picked: object = 0
    for k, n in enumerate(shape):
        picked = where(index == k, n, picked)
    return picked


def _reshape_run_time(ctx: NodeContext, x: Value, target: list[object], allowzero: bool
                      ) -> Value:
    """Reshape to a target the run gives. Which entry is -1 and which are 0 is known only
    then, so every output size is a choice the host computes: entry j is the input's dim
    j where it is 0 (without allowzero), the element count over the product of the other
    entries where it is -1, else itself. A target that does not fit (a count that does
    not divide, two -1s, a negative size) gives sizes below 1 or an element count the
    reshape's run-time assumption refuses."""
    rank = len(x.shape)
    sizes: list[object] = []
    for j, s in enumerate(target):
        sizes.append(s if allowzero else where(s == 0, x.shape[j] if j < rank else 0, s))
    unknown = [s == -1 for s in target]
    known: object = 1
    for u, n in zip(unknown, sizes):
        factor = where(u, 1, n)
        known = lift(factor) if isinstance(known, int) and known == 1 else known * factor
    quotient = lift(math_prod(x.shape)) // host_max(known, 1)
    shape = [ctx.size(where(u, quotient, n), f"shape{j}")
             for j, (u, n) in enumerate(zip(unknown, sizes))]
    return reshape(ctx, x, shape)


@converter("Reshape", since=5)
def convert_reshape(ctx: NodeContext) -> Value:
    """The target may hold symbolic sizes; a -1 among them is the quotient of the sizes,
    which must divide exactly for every value of the symbols. A target the run gives is
    turned into sizes the host computes (:func:`_reshape_run_time`)."""
    x = ctx.input(0)
    allowzero = ctx.opset >= 14 and int(ctx.attr("allowzero", 0))
    given = _run_time_operand(ctx, 1, "shape")
    if given is not None:
        return _reshape_run_time(ctx, x, given, bool(allowzero))
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


def _squeeze_run_time(ctx: NodeContext, x: Value, axes: list[object]) -> Value:
    """Squeeze axes the run gives: the output has ``rank - len(axes)`` axes, output axis
    j being the j-th input axis no axis names. Its size is that axis's, chosen on the
    host; 0 (refused by the run) where the axes name an axis twice or out of range, or
    name an axis that is not 1."""
    rank = len(x.shape)
    if len(axes) > rank:
        raise ctx.error(f"{len(axes)} axes to squeeze from an input of rank {rank}")
    dropped = _named_axes(ctx, axes, rank)
    valid = lift(_total(dropped)) == len(axes)
    for i, n in enumerate(x.shape):
        if not (isinstance(n, int) and n == 1):
            valid = valid * (dropped[i] == 0)
    shape: list[Dim] = []
    for j in range(rank - len(axes)):
        picks: list[object] = []
        before: object = 0  # kept axes before axis i
        for i, n in enumerate(x.shape):
            picks.append(where(before == j, where(dropped[i], 0, n), 0))
            before = _total([before, dropped[i] == 0])
        shape.append(ctx.size(where(valid, _total(picks), 0), f"dim{j}"))
    if not shape and any(not (isinstance(n, int) and n == 1) for n in x.shape):
        raise ctx.error(f"cannot squeeze every axis of {shape_text(x.shape)}: not all are 1")
    return reshape(ctx, x, shape)


@converter("Squeeze", since=13)
def convert_squeeze_v13(ctx: NodeContext) -> Value:
    axes = _run_time_operand(ctx, 1, "axes")
    if axes is not None:
        return _squeeze_run_time(ctx, ctx.input(0), axes)
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


def _unsqueeze_run_time(ctx: NodeContext, x: Value, axes: list[object]) -> Value:
    """Insert axes the run gives: the output has ``rank + len(axes)`` axes, axis d being
    1 where an axis names it (counted against the output's rank), else the next input
    axis; the host chooses each size, 0 (refused by the run) where the axes name an axis
    twice or out of range."""
    rank = len(x.shape) + len(axes)
    inserted = _named_axes(ctx, axes, rank)
    valid = lift(_total(inserted)) == len(axes)
    shape: list[Dim] = []
    before: object = 0  # input axes placed before axis d
    for d in range(rank):
        size = where(inserted[d], 1, _nth_dim(x.shape, before))
        shape.append(ctx.size(where(valid, size, 0), f"dim{d}"))
        before = _total([before, inserted[d] == 0])
    return reshape(ctx, x, shape)


@converter("Unsqueeze", since=13)
def convert_unsqueeze_v13(ctx: NodeContext) -> Value:
    axes = _run_time_operand(ctx, 1, "axes")
    if axes is not None:
        return _unsqueeze_run_time(ctx, ctx.input(0), axes)
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
    return _parts(ctx, x, axis, _split_sizes(ctx, x.shape[axis], split))


def _parts(ctx: NodeContext, x: Value, axis: int, sizes: list[Dim]) -> list[Value]:
    """``x`` cut along ``axis`` into consecutive parts of ``sizes``."""
    outs: list[Value] = []
    start: Dim = 0
    for size in sizes:
        outs.append(slice_axis(ctx, x, axis, start, start + size))
        start += size
    return outs


@converter("Split", since=2)
def convert_split_v2(ctx: NodeContext) -> list[Value]:
    split = ctx.attr("split")
    return _split(ctx, list(split) if split else None)


@converter("Split", since=13)
def convert_split_v13(ctx: NodeContext) -> list[Value]:
    given = _run_time_operand(ctx, 1, "split")
    if given is not None:
        return _split_run_time(ctx, given)
    return _split(ctx, ctx.optional_dims(1, "split"))


def _split_run_time(ctx: NodeContext, split: list[object]) -> list[Value]:
    """Split sizes the run gives: each part's size is computed before the run (so a part
    of 0 elements is refused then), and the axis is viewed as their sum, which every run
    checks against the axis (ONNX requires the parts to cover it)."""
    x = ctx.input(0)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(x.shape))
    if len(split) != ctx.num_outputs:
        raise ctx.error(f"split has {len(split)} sizes for {ctx.num_outputs} outputs")
    sizes = [ctx.size(s, f"part{i}") for i, s in enumerate(split)]
    total: Dim = sum(sizes)
    view = reshape(ctx, x, [total if d == axis else n for d, n in enumerate(x.shape)])
    return _parts(ctx, view, axis, sizes)


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
    if any(_run_time_operand(ctx, i, w) is not None
           for i, w in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps"))):
        return _slice_run_time(ctx)
    axes = ctx.optional_constant(3, "axes")
    steps = ctx.optional_constant(4, "steps")
    return _slice(ctx, ctx.dims(1, "starts"), ctx.dims(2, "ends"),
                  None if axes is None else ints(axes), None if steps is None else ints(steps))


def _entries(ctx: NodeContext, i: int, what: str) -> list[object] | None:
    """Input ``i``'s entries as ints, sizes or host expressions; None where absent."""
    if ctx.optional_input(i) is None:
        return None
    return list(ctx.run_time_values(i, what).reshape(-1))


def _slice_run_time(ctx: NodeContext) -> Value:
    """Slice bounds (and axes, steps) the run gives. ONNX's clamping becomes host
    arithmetic per axis of ``x``: the number of elements taken (a size computed before
    the run, so an empty slice is refused then) and the lowest index read. The axis is
    then windowed to the elements from the lowest to the highest read (:func:`_windows`)
    and stepped through: by a step known now with the slice op, by one the run gives
    with :func:`_run_time_step`."""
    x = ctx.input(0)
    rank = len(x.shape)
    starts, ends = _entries(ctx, 1, "starts"), _entries(ctx, 2, "ends")
    axes, steps = _entries(ctx, 3, "axes"), _entries(ctx, 4, "steps")
    assert starts is not None and ends is not None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts, ends, axes and steps differ in length ({len(starts)}, "
                        f"{len(ends)}, {len(axes)}, {len(steps)})")
    if not any(isinstance(a, HostExpr) for a in axes):
        normalize_axes(ctx, [int(a) for a in axes], rank)  # refuses repeats, out of range
    if any(isinstance(k, int) and k == 0 for k in steps):
        raise ctx.error(f"a step is 0 (steps {steps})")
    valid = _axes_valid(axes, rank)
    ctx.require(valid, f"the axes input must name distinct axes in [{-rank}, {rank - 1}]")
    windows: dict[int, tuple[object, Dim]] = {}
    strides: dict[int, tuple[object, Dim, Dim]] = {}
    for a, n in enumerate(x.shape):
        start, end, step, picked = _axis_bounds(axes, starts, ends, steps, a, rank, n)
        if not picked:
            continue
        low, count, stride = _slice_extent(start, end, step, n)
        length = ctx.size(where(valid, count, 0), f"len{a}")
        if isinstance(stride, int):
            k: Dim = stride
            span: Dim = (length - 1) * k + 1
        else:  # a size of its own: (length - 1) * k is not provably >= 0 as a polynomial
            k = ctx.size(stride, f"step{a}")
            span = ctx.size((lift(length) - 1) * k + 1, f"span{a}")
        windows[a] = (low, span)
        strides[a] = (step, length, k)
    y = _windows(ctx, x, windows, "slice")
    for a, (step, length, k) in strides.items():
        y = _step(ctx, y, a, step, length, k)
    return y


def _axes_valid(axes: list[object], rank: int) -> object:
    """1 where every axis the run gives is in range and none is named twice (ONNX
    refuses both), else 0."""
    if not any(isinstance(a, HostExpr) for a in axes):
        return True
    ok: object = True
    for a in axes:
        if isinstance(a, HostExpr):
            ok = where(ok, (lift(a) >= -rank) * (lift(a) < rank), 0)
    for d in range(rank):
        named = _total([hit for a in axes for hit in (lift(a) == d, lift(a) == d - rank)])
        ok = where(ok, lift(named) <= 1, 0)
    return ok


def _axis_bounds(axes: list[object], starts: list[object], ends: list[object],
                 steps: list[object], a: int, rank: int, n: Dim
                 ) -> tuple[object, object, object, bool]:
    """(start, end, step) of axis ``a``: those of the entry whose axis is ``a`` (or
    ``a - rank``), else the whole axis; and whether some entry may name it."""
    start: object = 0
    end: object = n
    step: object = 1
    picked = False
    for axis, s, e, k in zip(axes, starts, ends, steps):
        hit = (lift(axis) == a) + (lift(axis) == a - rank) if isinstance(axis, HostExpr) \
            else int(axis) in (a, a - rank)
        if hit is False:
            continue
        picked = True
        start, end = where(hit, s, start), where(hit, e, end)
        if not (isinstance(k, int) and isinstance(step, int) and k == step):
            step = where(hit, k, step)
    return start, end, step, picked


def _slice_extent(start: object, end: object, step: object, n: Dim
                  ) -> tuple[object, object, object]:
    """ONNX Slice on an axis of ``n``: (the lowest index read, how many elements, the
    step's magnitude). Negative bounds count from the end; a forward slice clamps both
    into [0, n], a backward one the start into [0, n - 1] and the end into [-1, n - 1]."""
    s = where(lift(start) < 0, lift(start) + n, start)
    e = where(lift(end) < 0, lift(end) + n, end)
    s_fore = host_min(host_max(s, 0), n)
    s_back = host_min(host_max(s, 0), lift(n) - 1)
    e_back = host_min(host_max(e, -1), lift(n) - 1)
    if isinstance(step, int) and step > 0:
        return s_fore, _count(s_fore, host_min(host_max(e, 0), n), step), step
    if isinstance(step, int):
        backward = _count(e_back, s_back, -step)
        return s_back - (lift(backward) - 1) * -step, backward, -step
    positive = lift(step) > 0
    forward = _count(s_fore, host_min(host_max(e, 0), n), step)
    backward = _count(e_back, s_back, -lift(step))
    count = where(positive, forward, backward)
    low = where(positive, s_fore, s_back - (lift(backward) - 1) * -lift(step))
    return low, count, where(positive, step, -lift(step))


def _count(first: object, stop: object, step: object) -> object:
    """``len(range(first, stop, step))`` for a step > 0 (0 where the bounds cross)."""
    return host_max((lift(stop) - first + step - 1) // step, 0)


def _windows(ctx: NodeContext, x: Value, windows: dict[int, tuple[object, Dim]],
             hint: str) -> Value:
    """``x`` cut to ``length`` elements from ``offset`` on each axis of ``windows``, where
    the offset may be known only at run time. The offset becomes a size computed before
    the run (``offset + 1``, a size being at least 1) and so does what is left after the
    window (``rest``); the axis is viewed as ``offset + length + rest - 1``, which every
    run checks, so that the slice's bounds are inside the axis for every size and its
    result has exactly ``length`` elements."""
    view: list[Dim] = list(x.shape)
    begin: list[Dim] = [0] * len(x.shape)
    end: list[Dim] = list(x.shape)
    for a, (offset, length) in windows.items():
        n = x.shape[a]
        if not isinstance(offset, HostExpr) and is_static((offset, length, n)):
            begin[a], end[a] = int(offset), int(offset) + int(length)  # type: ignore[arg-type]
            continue
        first = (offset if not isinstance(offset, HostExpr)
                 else ctx.size(offset + 1, f"{hint}_from{a}") - 1)
        rest = ctx.size(lift(n) - offset - length + 1, f"{hint}_rest{a}")
        view[a] = first + length + rest - 1
        begin[a], end[a] = first, first + length
    y = reshape(ctx, x, view)
    if begin == [0] * len(x.shape) and end == list(y.shape):
        return y
    return ctx.add("slice", [y], {"begin": begin, "end": end, "step": [1] * len(x.shape)})


def _step(ctx: NodeContext, y: Value, a: int, step: object, length: Dim, k: Dim) -> Value:
    """Axis ``a`` of ``y``, the window from the lowest to the highest index a slice reads,
    stepped through to its ``length`` elements: from the end where ``step`` is negative."""
    if isinstance(step, int):
        if step == 1:
            return y
        n = y.shape[a]
        rank = len(y.shape)
        begin = [(n - 1 if step < 0 else 0) if d == a else 0 for d in range(rank)]
        end = [(-1 if step < 0 else n) if d == a else y.shape[d] for d in range(rank)]
        return ctx.add("slice", [y], {"begin": begin, "end": end,
                                      "step": [step if d == a else 1 for d in range(rank)]})
    return _run_time_step(ctx, y, a, step, length, k)


def _run_time_step(ctx: NodeContext, y: Value, a: int, step: object, length: Dim, k: Dim
                   ) -> Value:
    """A step the run gives, on an axis of ``(length - 1) * k + 1`` elements where ``k``
    is its magnitude: padded by ``k - 1`` and viewed as [length, k] (which every run
    checks, the span being a size of its own), column 0 holds the
    elements a forward slice takes; a backward one takes them reversed, so both are
    computed and the run picks one by the step's sign (a window of the two, end to end)."""
    rank = len(y.shape)
    shape = list(y.shape)
    padded = ctx.add("pad", [y], {"before": [0] * rank,
                                  "after": [k - 1 if d == a else 0 for d in range(rank)],
                                  "mode": "constant", "value": 0})
    grid = reshape(ctx, padded, [*shape[:a], length, k, *shape[a + 1:]])
    column = slice_axis(ctx, grid, a + 1, 0, 1)
    forward = reshape(ctx, column, [*shape[:a], length, *shape[a + 1:]])
    backward = ctx.add("slice", [forward], {
        "begin": [length - 1 if d == a else 0 for d in range(rank)],
        "end": [-1 if d == a else n for d, n in enumerate(forward.shape)],
        "step": [-1 if d == a else 1 for d in range(rank)]})
    both = ctx.add("concat", [forward, backward], {"axis": a})
    return _windows(ctx, both, {a: ((lift(step) < 0) * lift(length), length)}, f"sign{a}")


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


def _expand_run_time(ctx: NodeContext, x: Value, target: list[object]) -> Value:
    """Expand to a target the run gives. Where the input's dim is 1 (or missing) the
    output's is the target's, a size the host computes; elsewhere it is the input's,
    and the target's must be 1 or the same. That condition is folded into the computed
    sizes (0, which the run refuses, where it fails); with none computed, one axis of
    the input is viewed as a computed size equal to it where the condition holds."""
    rank = max(len(x.shape), len(target))
    dims: list[Dim] = [1] * (rank - len(x.shape)) + list(x.shape)
    wanted = [1] * (rank - len(target)) + target
    valid: object = True  # decided now where no dim constrains the target
    for n, s in zip(dims, wanted):
        if (isinstance(n, int) and n == 1) or (not is_run_time(s) and s in (1, n)):
            continue
        if isinstance(s, int) and isinstance(n, int):
            raise ctx.error(f"cannot expand {shape_text(x.shape)}: a target size of {s} "
                            f"for a dim of {n}")
        fits = ((lift(s) == 1) + (lift(s) == n)) >= 1
        valid = fits if valid is True else valid * fits
    free = [i for i, n in enumerate(dims) if isinstance(n, int) and n == 1]
    shape = list(dims)
    for i in free:
        shape[i] = ctx.size(where(valid, wanted[i], 0), f"dim{i}")
    if not free and rank:
        i = rank - 1
        shape[i] = ctx.size(where(valid, dims[i], 0), f"dim{i}")
        lead = rank - len(x.shape)
        x = reshape(ctx, x, [*x.shape[:i - lead], shape[i], *x.shape[i - lead + 1:]])
    return x if tuple(shape) == x.shape else ctx.add("expand", [x], {"shape": shape})


@converter("Expand", since=8)
def convert_expand(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    given = _run_time_operand(ctx, 1, "shape")
    if given is not None:
        return _expand_run_time(ctx, x, given)
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
    given = _run_time_operand(ctx, 1, "repeats")
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
    return _pad_node(ctx, x, before, after, mode, value, fill)


@converter("Pad", since=2)
def convert_pad_v2(ctx: NodeContext) -> Value:
    return _pad(ctx, list(ctx.required_attr("pads")), float(ctx.attr("value", 0.0)), None)


@converter("Pad", since=11)
def convert_pad_v11(ctx: NodeContext) -> Value:
    fill = _run_time_fill(ctx)
    if _pad_at_run_time(ctx):
        return _pad_run_time(ctx, fill)
    value = 0.0 if fill is not None else _fill_value(ctx)
    axes = ctx.optional_constant(3, "axes") if ctx.opset >= 18 else None
    return _pad(ctx, ints(ctx.constant(1, "pads")), value,
                None if axes is None else ints(axes), fill)


def _run_time_fill(ctx: NodeContext) -> Value | None:
    """The constant mode's fill value where the run gives it (it is then data), else
    None."""
    fill = ctx.optional_input(2)
    if (ctx.attr("mode", "constant") != "constant" or fill is None or fill.data is not None
            or fill.uid in ctx.state.shape_values or 0 in fill.shape
            or 0 in ctx.input(0).shape):
        return None
    return fill


def _pad_at_run_time(ctx: NodeContext) -> bool:
    """Whether the pads or the axes are given only when the model runs. Reflect padding
    stays specialized on them: the pad op must know each amount below its axis, which an
    amount the run gives proves only through views whose checks grow with every axis."""
    if ctx.attr("mode", "constant") == "reflect":
        return False
    return any(_run_time_operand(ctx, i, w) is not None
               for i, w in ((1, "pads"), (3, "axes")) if i < 3 or ctx.opset >= 18)


def _pad_run_time(ctx: NodeContext, fill: Value | None) -> Value:
    """Pad by amounts (over axes) the run gives: each amount ``p`` becomes the size
    ``p + 1`` computed before the run (a negative amount, ONNX's cropping, is refused
    then) and the pad op places the input at offset ``p``. A fill value the run gives is
    data: the input is padded with 0 and the padding replaced by the value."""
    x = ctx.input(0)
    rank = len(x.shape)
    mode = ctx.attr("mode", "constant")
    pads = _entries(ctx, 1, "pads")
    assert pads is not None
    axes = _entries(ctx, 3, "axes") if ctx.opset >= 18 else None
    axes = list(range(rank)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads has {len(pads)} values for {len(axes)} axes; it needs 2 "
                        "per padded axis")
    if not any(isinstance(a, HostExpr) for a in axes):
        normalize_axes(ctx, [int(a) for a in axes], rank)
    valid = _axes_valid(axes, rank)
    ctx.require(valid, f"the axes input must name distinct axes in [{-rank}, {rank - 1}]")
    before: list[Dim] = [0] * rank
    after: list[Dim] = [0] * rank
    for a in range(rank):
        b, e, _, picked = _axis_bounds(axes, pads[:len(axes)], pads[len(axes):],
                                       [1] * len(axes), a, rank, 0)
        if picked:
            before[a] = _amount(ctx, where(valid, b, -1), f"before{a}")
            after[a] = _amount(ctx, where(valid, e, -1), f"after{a}")
    value = _fill_value(ctx) if mode == "constant" and fill is None else 0.0
    return _pad_node(ctx, x, before, after, mode, value, fill)


def _amount(ctx: NodeContext, p: object, hint: str) -> Dim:
    """A pad amount as a dim: itself where known now, else ``p + 1`` as a size computed
    before the run, less 1 (so the run refuses a negative amount, naming the node)."""
    if isinstance(p, HostExpr | Sym):
        return ctx.size(lift(p) + 1, hint) - 1
    return int(p)  # type: ignore[call-overload]


def _fill_value(ctx: NodeContext) -> float:
    fill = ctx.optional_constant(2, "constant_value")
    return 0.0 if fill is None or fill.size == 0 else fill.reshape(-1)[0].item()


def _pad_node(ctx: NodeContext, x: Value, before: list[Dim], after: list[Dim], mode: str,
              value: float | bool, fill: Value | None = None) -> Value:
    """The pad op, or ``x`` where every amount is 0. A ``fill`` value given as data (the
    run gives it): ``x`` padded with 0, and the padding then replaced by the value where a
    padded mask of ``x``'s shape says so."""
    if all(isinstance(p, int) and p == 0 for p in (*before, *after)):
        return x
    attrs = {"before": before, "after": after, "mode": mode}
    if fill is None:
        return ctx.add("pad", [x], {**attrs, "value": value})
    padded = ctx.add("pad", [x], {**attrs, "value": 0})
    inside = ctx.add("pad", [filled(ctx, x.shape, True, "bool", hint="inside")],
                     {**attrs, "value": False})
    return ctx.add("where", [inside, padded, reshape(ctx, fill, [])])


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
    if _run_time_operand(ctx, 1, "shape") is not None:
        return _center_crop_pad_run_time(ctx)
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


def _center_crop_pad_run_time(ctx: NodeContext) -> Value:
    """Sizes the run gives: each axis is zero-padded by ``max(size - n, 0)`` (amounts
    computed before the run, the extra element after) and then windowed to ``size``
    elements from ``max(n - size, 0) // 2`` (:func:`_windows`), which crops it."""
    x = ctx.input(0)
    wanted = list(ctx.run_time_values(1, "shape").reshape(-1))
    rank = len(x.shape)
    axes = ctx.attr("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, list(axes), rank)
    if len(wanted) != len(axes):
        raise ctx.error(f"shape has {len(wanted)} sizes for the axes {axes}")
    before: list[Dim] = [0] * rank
    after: list[Dim] = [0] * rank
    crops: dict[int, tuple[object, Dim]] = {}
    for a, size in zip(axes, wanted):
        n = x.shape[a]
        grow = host_max(lift(size) - n, 0)
        before[a] = _amount(ctx, grow // 2, f"before{a}")
        after[a] = _amount(ctx, grow - grow // 2, f"after{a}")
        crops[a] = (host_max(lift(n) - size, 0) // 2, ctx.size(size, f"size{a}"))
    padded = _pad_node(ctx, x, before, after, "constant", 0)
    return _windows(ctx, padded, crops, "crop")
