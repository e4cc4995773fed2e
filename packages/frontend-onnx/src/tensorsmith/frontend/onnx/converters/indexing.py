"""Indexing ops with run-time indices: GatherElements, GatherND, the scatters
(ScatterElements, Scatter, ScatterND, TensorScatter), running sums and products (CumSum,
CumProd), TopK and ReverseSequence (Compress: detection.py).

The data and the indices are run-time tensors. What decides an output *shape* or the
axis a kernel runs along (TopK's k, CumSum's axis) is a constant, or a small graph
input whose value the run gives: then
the sizes it decides are computed on the host before each run (host_sizes.py), and the
model compiles once for every value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import HostExpr, is_run_time, where
from tensorsmith.ir.symbolic import Dim, shape_text

from ..context import NodeContext
from ..registry import converter
from .common import filled, normalize_axis, positions, reshape


def _index(ctx: NodeContext, v: Value) -> Value:
    return v if v.dtype in ("int64", "int32") else ctx.add("cast", [v], {"dtype": "int64"})


@converter("GatherElements", since=11)
def convert_gather_elements(ctx: NodeContext) -> Value:
    data, indices = ctx.input(0), _index(ctx, ctx.input(1))
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(data.shape))
    return ctx.add("gather_elements", [data, indices], {"axis": axis})


@converter("GatherND", since=11)
def convert_gather_nd(ctx: NodeContext) -> Value:
    data, indices = ctx.input(0), _index(ctx, ctx.input(1))
    return ctx.add("gather_nd", [data, indices],
                   {"batch_dims": int(ctx.attr("batch_dims", 0)) if ctx.opset >= 12 else 0})


def _reduction(ctx: NodeContext) -> str:
    reduction = str(ctx.attr("reduction", "none"))
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ctx.error(f"unknown reduction {reduction!r}")
    return reduction


@converter(["ScatterElements", "Scatter"], since=9)
def convert_scatter_elements(ctx: NodeContext) -> Value:
    data, indices, updates = ctx.input(0), _index(ctx, ctx.input(1)), ctx.input(2)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(data.shape))
    return ctx.add("scatter_elements", [data, indices, updates],
                   {"axis": axis, "reduction": _reduction(ctx)})


@converter("ScatterND", since=11)
def convert_scatter_nd(ctx: NodeContext) -> Value:
    data, indices, updates = ctx.input(0), _index(ctx, ctx.input(1)), ctx.input(2)
    return ctx.add("scatter_nd", [data, indices, updates], {"reduction": _reduction(ctx)})


@converter("TensorScatter", since=24)
def convert_tensor_scatter(ctx: NodeContext) -> Value:
    """A KV-cache write: ``update`` lands in ``past`` at ``write_indices[b]`` along
    ``axis`` (wrapping around with mode="circular"). Computed from the cache's side:
    position p takes update[p - w[b]] where that is inside the update."""
    past, update = ctx.input(0), ctx.input(1)
    given = ctx.optional_input(2)
    rank = len(past.shape)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -2)), rank)
    same = all(u == p for d, (u, p) in enumerate(zip(update.shape, past.shape)) if d != axis)
    if axis == 0 or len(update.shape) != rank or not same:
        raise ctx.error(f"needs an update shaped like the cache {shape_text(past.shape)} but on "
                        f"axis {axis} (after the batch), got {shape_text(update.shape)}")
    size, length = past.shape[axis], update.shape[axis]
    batch = past.shape[0]
    w = filled(ctx, [batch], 0, "int64", hint="write") if given is None else \
        _index(ctx, given)
    if w.dtype != "int64":
        w = ctx.add("cast", [w], {"dtype": "int64"})
    w = reshape(ctx, w, [batch] + [1] * (rank - 1))
    offset = ctx.add("sub", [positions(ctx, size, axis=axis, rank=rank), w])
    if ctx.attr("mode", "linear") == "circular":
        size_c = ctx.const(np.int64(size), hint="size")
        offset = ctx.add("mod", [ctx.add("add", [offset, size_c]), size_c], {"fmod": 0})
    zero = ctx.const(np.int64(0), hint="zero")
    inside = ctx.add("and", [ctx.add("ge", [offset, zero]),
                             ctx.add("lt", [offset, ctx.const(np.int64(length))])])
    clamped = ctx.add("min", [ctx.add("max", [offset, zero]),
                              ctx.const(np.int64(max(length - 1, 0)))])
    index = ctx.add("expand", [clamped], {"shape": list(past.shape)})
    picked = ctx.add("gather_elements", [update, index], {"axis": axis})
    return ctx.add("where", [inside, picked, past])


def _run_time_scalar(ctx: NodeContext, i: int, what: str) -> HostExpr | None:
    """Input ``i``'s single value where the run gives it (a graph input, or small
    arithmetic on one), else None: a constant keeps the static path, and anything else
    is refused there as before."""
    if ctx.input(i).data is not None:
        return None
    entries = ctx.run_time_values(i, what).reshape(-1)
    return entries[0] if entries.size == 1 and is_run_time(entries[0]) else None


def _product(factors: Sequence[Any]) -> Any:
    """The product of sizes and host expressions; 1 for none."""
    out: Any = 1
    for f in factors:
        out = f if isinstance(out, int) and out == 1 else out * f
    return out


def _cumulative(op: str) -> Callable[[NodeContext], Value]:
    def convert(ctx: NodeContext) -> Value:
        x = ctx.input(0)
        attrs = {"exclusive": int(ctx.attr("exclusive", 0)),
                 "reverse": int(ctx.attr("reverse", 0))}
        axis_value = _run_time_scalar(ctx, 1, "axis")
        if axis_value is not None and x.shape and 0 not in x.shape:
            return _cumulative_run_time_axis(ctx, op, x, axis_value, attrs)
        axis = normalize_axis(ctx, int(np.asarray(ctx.constant(1, "axis")).reshape(-1)[0]),
                              len(x.shape))
        return ctx.add(op, [x], {"axis": axis, **attrs})

    return convert


def _cumulative_run_time_axis(ctx: NodeContext, op: str, x: Value, axis: HostExpr,
                              attrs: dict[str, int]) -> Value:
    """A running sum or product along an axis the run gives. The contiguous input is
    viewed as [outer, n, inner] (the dims before the axis, the axis, the dims after:
    sizes the host computes from the axis's value, so the view reads the same elements)
    and the kernel always runs along axis 1 of that view. An axis out of range gives
    n = 0, which the run refuses (a computed size is at least 1), naming this node."""
    rank = len(x.shape)
    a = where(axis < 0, axis + rank, axis)
    outer = _product([where(a > i, d, 1) for i, d in enumerate(x.shape[:-1]) if d != 1])
    inner = _product([where(a < i, d, 1) for i, d in enumerate(x.shape) if i and d != 1])
    n: Any = 0
    for i in reversed(range(rank)):
        n = where(a == i, x.shape[i], n)
    view: list[Dim] = [ctx.size(outer, "outer"), ctx.size(n, "axis_size"),
                       ctx.size(inner, "inner")]
    return reshape(ctx, ctx.add(op, [reshape(ctx, x, view)], {"axis": 1, **attrs}), x.shape)


converter("CumSum", since=11)(_cumulative("cumsum"))
converter("CumProd", since=26)(_cumulative("cumprod"))


@converter("TopK", since=10)
def convert_topk(ctx: NodeContext) -> list[Value]:
    """K may be a graph input: the output's axis is then a size the host computes from
    its value before each run (at least 1, and the run checks it is at most the axis's
    length, as topk's shape inference records)."""
    x = ctx.input(0)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), len(x.shape))
    largest = int(ctx.attr("largest", 1)) if ctx.opset >= 11 else 1
    k_value = _run_time_scalar(ctx, 1, "K")
    if k_value is not None and 0 not in x.shape:
        k: Dim = ctx.size(k_value, "k")
        return ctx.add_multi("topk", [x], {"k": k, "axis": axis, "largest": largest})
    k = int(np.asarray(ctx.constant(1, "K")).reshape(-1)[0])
    if not 0 <= k <= x.shape[axis]:
        raise ctx.error(f"K={k} for an axis of {x.shape[axis]}")
    return ctx.add_multi("topk", [x], {"k": k, "axis": axis, "largest": largest})


@converter("ReverseSequence", since=10)
def convert_reverse_sequence(ctx: NodeContext) -> Value:
    """out[t] = x[len - 1 - t] for t < len (per batch entry), x[t] beyond: a
    GatherElements with indices computed from the run-time lengths."""
    x, lengths = ctx.input(0), _index(ctx, ctx.input(1))
    if len(x.shape) < 2:
        raise ctx.error(f"needs an input of rank >= 2, got {shape_text(x.shape)}")
    batch_axis = int(ctx.attr("batch_axis", 1))
    time_axis = int(ctx.attr("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1}:
        raise ctx.error(f"batch_axis and time_axis must be 0 and 1, got {batch_axis}, "
                        f"{time_axis}")
    rank = len(x.shape)
    t = positions(ctx, x.shape[time_axis], axis=time_axis, rank=rank)
    n = lengths if lengths.dtype == "int64" else ctx.add("cast", [lengths], {"dtype": "int64"})
    n = reshape(ctx, n, [x.shape[batch_axis] if d == batch_axis else 1 for d in range(rank)])
    flipped = ctx.add("sub", [ctx.add("sub", [n, ctx.const(np.int64(1))]), t])
    index = ctx.add("where", [ctx.add("lt", [t, n]), flipped, t])
    index = ctx.add("expand", [index], {"shape": list(x.shape)})
    return ctx.add("gather_elements", [x, index], {"axis": time_axis})


def hardmax_mask(ctx: NodeContext, x: Value, axis: int) -> Value:
    """True at the first maximum along ``axis``."""
    first = ctx.add("argmax", [x], {"axis": axis, "keepdims": True})
    return ctx.add("eq", [first, positions(ctx, x.shape[axis], axis=axis, rank=len(x.shape))])


@converter("Hardmax", since=13)
def convert_hardmax(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), len(x.shape))
    return ctx.add("cast", [hardmax_mask(ctx, x, axis)], {"dtype": x.dtype})

