"""Ops that make tensors from attributes or from constant inputs: Constant,
ConstantOfShape, Range, NonZero, and Trilu (whose mask is a constant)."""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..registry import converter
from .common import ints


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
    return ctx.const(np.full(shape, fill[0], dtype=fill.dtype), hint="filled")


@converter("Range", since=11)
def convert_range(ctx: NodeContext) -> Value:
    start, limit, delta = (ctx.constant(i, n) for i, n in enumerate(("start", "limit", "delta")))
    s, l, d = (v.reshape(-1)[0] for v in (start, limit, delta))
    if d == 0:
        raise ctx.error("delta is 0")
    count = max(int(np.ceil((float(l) - float(s)) / float(d))), 0)
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
    ones = np.ones((rows, cols), dtype=bool)
    mask = np.triu(ones, k) if int(ctx.attr("upper", 1)) else np.tril(ones, k)
    if mask.all():
        return x
    zero = ctx.const(np.zeros((), dtype=x.dtype), hint="zero")
    return ctx.add("where", [ctx.const(mask, hint="mask"), x, zero])
