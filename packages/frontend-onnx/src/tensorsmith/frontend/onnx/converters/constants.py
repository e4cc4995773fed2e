"""Ops that make tensors from attributes, constant inputs or static shapes: Constant,
ConstantOfShape, Range, NonZero, EyeLike, and the masks of Trilu and OneHot."""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import ints, normalize_axis, reshape, slice_axis


@converter("Constant", since=1)
def convert_constant(ctx: NodeContext) -> Value:
    a = ctx.attrs
    if "value" in a:
        return ctx.const(a["value"], hint="value")
    if "value_float" in a:
        return ctx.const(np.float32(a["value_float"]), hint="value")
    if "value_floats" in a:
        return ctx.const(np.asarray(a["value_floats"], dtype=np.float32), hint="value")
    if "value_int" in a:
        return ctx.const(np.int64(a["value_int"]), hint="value")
    if "value_ints" in a:
        return ctx.const(np.asarray(a["value_ints"], dtype=np.int64), hint="value")
    kinds = ", ".join(sorted(a)) or "no value attribute"
    raise ctx.error(f"only tensor, float(s) and int(s) constants are supported, got {kinds}")


@converter("ConstantOfShape", since=9)
def convert_constant_of_shape(ctx: NodeContext) -> Value:
    shape = ints(ctx.constant(0, "shape"))
    if any(d < 0 for d in shape):
        raise ctx.error(f"shape {shape} has a negative dimension")
    value = ctx.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if fill.size != 1:
        raise ctx.error(f"value must have one element, has {fill.size}")
    ctx.check_constant(shape, str(fill.dtype), "the output")
    return ctx.const(np.full(shape, fill[0], dtype=fill.dtype), hint="filled")


@converter("Range", since=11)
def convert_range(ctx: NodeContext) -> Value:
    start, limit, delta = (ctx.constant(i, n) for i, n in enumerate(("start", "limit", "delta")))
    s, l, d = (v.reshape(-1)[0] for v in (start, limit, delta))
    if d == 0:
        raise ctx.error("delta is 0")
    span = (float(l) - float(s)) / float(d)
    if not math.isfinite(span):
        raise ctx.error(f"start {s}, limit {l} and delta {d} give no finite element count")
    count = max(math.ceil(span), 0)
    ctx.check_constant((count,), str(start.dtype), "the output")
    values = s + np.arange(count, dtype=start.dtype) * d
    return ctx.const(values.astype(start.dtype), hint="range")


@converter("NonZero", since=9)
def convert_nonzero(ctx: NodeContext) -> Value:
    """Its output shape depends on the data, so only a constant input can be taken."""
    x = ctx.constant(0, "X")
    return ctx.const(np.asarray(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),
                     hint="nonzero")


@converter("Trilu", since=14)
def convert_trilu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if len(x.shape) < 2:
        raise ctx.error(f"needs an input of rank >= 2, got {list(x.shape)}")
    k_given = ctx.optional_constant(1, "k")
    k = 0 if k_given is None else int(k_given.reshape(-1)[0])
    rows, cols = x.shape[-2:]
    ctx.check_constant((rows, cols), "bool", "the mask")
    ones = np.ones((rows, cols), dtype=bool)
    mask = np.triu(ones, k) if int(ctx.attr("upper", 1)) else np.tril(ones, k)
    if mask.all():
        return x
    zero = ctx.const(np.zeros((), dtype=x.dtype), hint="zero")
    return ctx.add("where", [ctx.const(mask, hint="mask"), x, zero])


@converter("EyeLike", since=9)
def convert_eye_like(ctx: NodeContext) -> Value:
    """Its input only lends a (static) shape, so the result is a constant."""
    x = ctx.input(0)
    if len(x.shape) != 2:
        raise ctx.error(f"needs a 2-D input, got {list(x.shape)}")
    dtype = ctx.attr("dtype")
    np_dtype = x.dtype if dtype is None else to_numpy_dtype(int(dtype), f"{ctx.where}: dtype")
    ctx.check_constant(x.shape, np_dtype, "the output")
    return ctx.const(np.eye(*x.shape, k=int(ctx.attr("k", 0)), dtype=np_dtype), hint="eye")


@converter("OneHot", since=9)
def convert_one_hot(ctx: NodeContext) -> Value:
    """where(indices[..., None, ...] == arange(depth), on, off), the arange on ``axis``."""
    indices, values = ctx.input(0), ctx.input(2)
    depth = int(np.asarray(ctx.constant(1, "depth")).reshape(-1)[0])
    if depth <= 0 or values.shape != (2,):
        raise ctx.error(f"needs depth > 0 and two values [off, on], got depth {depth} and "
                        f"values of shape {list(values.shape)}")
    ctx.check_constant((depth,), "int64", "the positions")
    rank = len(indices.shape) + 1
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    idx = indices if indices.dtype == "int64" else ctx.add("cast", [indices],
                                                            {"dtype": "int64"})
    negative = ctx.add("lt", [idx, ctx.scalar(0, idx)])
    idx = ctx.add("where", [negative, ctx.add("add", [idx, ctx.scalar(depth, idx)]), idx])
    idx = reshape(ctx, idx, (*indices.shape[:axis], 1, *indices.shape[axis:]))
    positions = np.arange(depth, dtype=np.int64).reshape(
        [depth if d == axis else 1 for d in range(rank)])
    hot = ctx.add("eq", [idx, ctx.const(positions, hint="positions")])
    off = reshape(ctx, slice_axis(ctx, values, 0, 0, 1), ())
    on = reshape(ctx, slice_axis(ctx, values, 0, 1, 2), ())
    return ctx.add("where", [hot, on, off])
