"""Small building blocks several converter families share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorsmith.ir.graph import Value

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


def reshape(ctx: NodeContext, x: Value, shape: Sequence[int]) -> Value:
    shape = [int(d) for d in shape]
    if tuple(shape) == x.shape:
        return x
    return ctx.add("reshape", [x], {"shape": shape})


def transpose(ctx: NodeContext, x: Value, perm: Sequence[int]) -> Value:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    return ctx.add("transpose", [x], {"perm": perm})


def slice_axis(ctx: NodeContext, x: Value, axis: int, begin: int, end: int) -> Value:
    """``x[..., begin:end, ...]`` on one axis with step 1 (bounds already in range)."""
    if begin == 0 and end == x.shape[axis]:
        return x
    rank = len(x.shape)
    starts = [begin if d == axis else 0 for d in range(rank)]
    ends = [end if d == axis else x.shape[d] for d in range(rank)]
    return ctx.add("slice", [x], {"begin": starts, "end": ends, "step": [1] * rank})


def ints(array: np.ndarray | Sequence[int]) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]

