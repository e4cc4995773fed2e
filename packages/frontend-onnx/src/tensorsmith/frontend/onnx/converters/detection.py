"""Ops whose output sizes depend on the data: NonMaxSuppression, NonZero, Unique, and
Compress with a condition the run gives.

Their kernels count what they keep while they run (ops/detection.py). The converter
names a counted size for that count (builder.counted_size): the executor places the
buffers for its bound (every box of every class kept, every element nonzero) and learns
the count after the kernel, so what follows runs on the kept rows only. A constant input
still folds to a constant.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import host_max, is_run_time
from tensorsmith.ir.op_registry import get_op
from tensorsmith.ir.symbolic import Dim, dim_min, math_prod

from ..context import NodeContext
from ..registry import converter
from .common import normalize_axis, reshape, transpose


@converter("NonMaxSuppression", since=10)
def convert_non_max_suppression(ctx: NodeContext) -> Value:
    """``[kept, 3]`` rows of (batch, class, box), as ONNX Runtime orders them. Any input
    may be given at run time; the most boxes a class keeps then is a size computed from
    its value before the run (it bounds the buffers)."""
    boxes, scores = _float32(ctx, ctx.input(0)), _float32(ctx, ctx.input(1))
    if len(boxes.shape) != 3 or boxes.shape[2] != 4:
        raise ctx.error(f"boxes must be [batch, boxes, 4], got {list(map(str, boxes.shape))}")
    if len(scores.shape) != 3:
        raise ctx.error(f"scores must be [batch, classes, boxes], got "
                        f"{list(map(str, scores.shape))}")
    batch, count, _ = boxes.shape
    classes = scores.shape[1]
    most = _most_per_class(ctx)
    iou = _threshold(ctx, 3, 0.0, "iou_threshold")
    score = _threshold(ctx, 4, float("-inf"), "score_threshold")
    center = int(ctx.attr("center_point_box", 0))
    if center not in (0, 1):
        raise ctx.error(f"center_point_box must be 0 or 1, got {center}")
    kept = ctx.counted_symbol("kept")
    per_class = dim_min(count, most)
    selected, total = ctx.add_multi(
        "non_max_suppression", [boxes, scores, iou, score],
        {"center_point_box": center, "max_output": most, "rows": kept - 1})
    ctx.counted(kept, total, batch * classes * per_class)
    return selected


@converter("NonZero", since=9)
def convert_nonzero(ctx: NodeContext) -> Value:
    """``[rank, found]``: a constant input folds; else the kernel writes one row of
    indices per element it finds, and a transpose gives ONNX's layout."""
    x = ctx.input(0)
    if x.data is not None:
        return ctx.const(np.asarray(np.nonzero(x.data), dtype=np.int64).reshape(x.data.ndim, -1),
                         hint="nonzero")
    if not x.shape:
        raise ctx.error("the input is a scalar; NonZero takes a tensor of rank >= 1")
    return transpose(ctx, _found(ctx, x, "found"), [1, 0])


@converter("Unique", since=11)
def convert_unique(ctx: NodeContext) -> list[Value]:
    """Y, indices, inverse_indices and counts (all four are computed, whichever the node
    asks for): the distinct slices of the op unique (ops/unique.py) along axis 0 of the
    input flattened (no ``axis``) or with ``axis`` moved first, Y's rows moved back.
    Y, indices and counts have one entry per distinct slice, counted by the kernel; a
    constant input folds."""
    x = ctx.input(0)
    order = int(ctx.attr("sorted", 1))
    if order not in (0, 1):
        raise ctx.error(f"sorted must be 0 or 1, got {order}")
    axis, rank = ctx.attr("axis"), len(x.shape)
    if axis is None:
        x, axis = reshape(ctx, x, (math_prod(x.shape),)), 0
    else:
        axis = normalize_axis(ctx, int(axis), rank)
    moved = [axis, *(d for d in range(rank) if d != axis)]
    if axis:
        x = transpose(ctx, x, moved)
    if x.data is not None:
        *found, total = get_op("unique").reference([x.data], {"sorted": order})
        outputs = [ctx.const(a if k == 2 else a[:int(total)], hint=name) for k, (a, name) in
                   enumerate(zip(found, ("unique", "indices", "inverse_indices", "counts")))]
    else:
        distinct = ctx.counted_symbol("distinct")
        *outputs, total = ctx.add_multi("unique", [x], {"sorted": order,
                                                        "rows": distinct - 1})
        ctx.counted(distinct, total, x.shape[0])
    if axis:
        outputs[0] = transpose(ctx, outputs[0], [moved.index(d) for d in range(rank)])
    return outputs


@converter("Compress", since=9)
def convert_compress(ctx: NodeContext) -> Value:
    """The entries of ``axis`` (of the flattened input without one) where the condition
    holds: a Gather of the positions the condition selects, known at compile time for a
    constant condition, counted by a kernel otherwise."""
    x = ctx.input(0)
    axis = ctx.attr("axis")
    if axis is None:
        x = reshape(ctx, x, (math_prod(x.shape),))
        axis = 0
    axis = normalize_axis(ctx, int(axis), len(x.shape))
    condition = ctx.input(1)
    if len(condition.shape) != 1:
        raise ctx.error(f"condition must be 1-D, got {list(map(str, condition.shape))}")
    if condition.data is not None:
        flags = condition.data.reshape(-1).astype(bool)
        if flags.size > x.shape[axis]:
            raise ctx.error(f"condition has {flags.size} entries for an axis of "
                            f"{x.shape[axis]}")
        picked = np.nonzero(flags)[0].astype(np.int64)
        return ctx.add("gather", [x, ctx.const(picked, hint="picked")], {"axis": axis})
    # (ONNX Runtime refuses a condition longer than the axis; entries past it are never
    # picked here, since a picked index past the axis would fail the gather's check)
    rows = _found(ctx, condition, "picked")
    picked = reshape(ctx, rows, (rows.shape[0],))
    return ctx.add("gather", [x, picked], {"axis": axis})


def _most_per_class(ctx: NodeContext) -> Dim:
    """max_output_boxes_per_class (absent: 0; below 0: 0): a constant, or a size the host
    computes from the value the run gives (computed as one more, since it may be 0)."""
    if ctx.optional_input(2) is None:
        return 0
    given = ctx.run_time_values(2, "max_output_boxes_per_class").reshape(-1)
    if not given.size:
        return 0
    if is_run_time(given[0]):
        return ctx.size(host_max(given[0], 0) + 1, "most") - 1
    return max(int(given[0]), 0)


def _found(ctx: NodeContext, x: Value, hint: str) -> Value:
    """``[found, rank]``: the indices of ``x``'s nonzero elements, one row each."""
    found = ctx.counted_symbol(hint)
    rows, total = ctx.add_multi("nonzero", [x], {"rows": found - 1})
    ctx.counted(found, total, math_prod(x.shape))
    return rows


def _threshold(ctx: NodeContext, i: int, default: float, what: str) -> Value:
    """Optional input ``i`` as a float32 scalar, ``default`` where it is absent."""
    v = ctx.optional_input(i)
    if v is None:
        return ctx.const(np.float32(default), hint=what)
    if math_prod(v.shape) != 1:
        raise ctx.error(f"{what} must hold one value, got {list(map(str, v.shape))}")
    return reshape(ctx, _float32(ctx, v), ())


def _float32(ctx: NodeContext, v: Value) -> Value:
    return v if v.dtype == "float32" else ctx.add("cast", [v], {"dtype": "float32"})
