"""Small building blocks several converter families share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import Dim, Sym, is_static

from ..context import NodeContext


def normalize_axis(ctx: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    """ONNX axes may count from the end; ours never do."""
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for an input of rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(ctx: NodeContext, axes: Sequence[int], rank: int, what: str = "axes"
                   ) -> list[int]:
    out = [normalize_axis(ctx, int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {list(axes)} name an axis twice")
    return out


def reshape(ctx: NodeContext, x: Value, shape: Sequence[Dim]) -> Value:
    shape = [d if isinstance(d, Sym) else int(d) for d in shape]
    if tuple(shape) == x.shape:
        return x
    return ctx.add("reshape", [x], {"shape": shape})


def transpose(ctx: NodeContext, x: Value, perm: Sequence[int]) -> Value:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    return ctx.add("transpose", [x], {"perm": perm})


def slice_axis(ctx: NodeContext, x: Value, axis: int, begin: Dim, end: Dim) -> Value:
    """``x[..., begin:end, ...]`` on one axis with step 1 (bounds already in range)."""
    if begin == 0 and end == x.shape[axis]:
        return x
    rank = len(x.shape)
    starts = [begin if d == axis else 0 for d in range(rank)]
    ends = [end if d == axis else x.shape[d] for d in range(rank)]
    return ctx.add("slice", [x], {"begin": starts, "end": ends, "step": [1] * rank})


def ints(array: np.ndarray | Sequence[int]) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def filled(ctx: NodeContext, shape: Sequence[Dim], value: float | int | bool, dtype: str,
           hint: str = "filled") -> Value:
    """A tensor of ``shape`` holding ``value``: a constant, or for a shape of symbolic
    sizes a 0-d constant expanded at run time (no constant of a run-time size exists)."""
    if is_static(shape):
        return ctx.const(np.full(tuple(int(d) for d in shape), value, dtype=dtype), hint=hint)
    return ctx.add("expand", [ctx.const(np.asarray(value, dtype=dtype), hint=hint)],
                   {"shape": list(shape)})


def positions(ctx: NodeContext, count: Dim, dtype: str = "int64", axis: int = 0,
              rank: int = 1) -> Value:
    """``[0, 1, ..., count - 1]`` along ``axis`` of a tensor of ``rank`` (1 elsewhere): a
    constant, or for a symbolic count the exclusive running sum of ones, computed at run
    time."""
    shape = [count if d == axis else 1 for d in range(rank)]
    if isinstance(count, int):
        return ctx.const(np.arange(count, dtype=dtype).reshape(shape), hint="positions")
    ones = filled(ctx, [count], 1, dtype, hint="one")
    counted = ctx.add("cumsum", [ones], {"axis": 0, "exclusive": 1, "reverse": 0})
    return reshape(ctx, counted, shape)


def parts(ctx: NodeContext, x: Value, axis: int, sizes: list[Dim]) -> list[Value]:
    """``x`` cut along ``axis`` into consecutive parts of ``sizes``."""
    outs: list[Value] = []
    start: Dim = 0
    for size in sizes:
        outs.append(slice_axis(ctx, x, axis, start, start + size))
        start += size
    return outs


def pad_node(ctx: NodeContext, x: Value, before: list[Dim], after: list[Dim], mode: str,
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


def fill_value(ctx: NodeContext) -> float:
    fill = ctx.optional_constant(2, "constant_value")
    return 0.0 if fill is None or fill.size == 0 else fill.reshape(-1)[0].item()
