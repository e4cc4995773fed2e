"""NumPy-style broadcasting for shapes and for tensor-expression indices."""

from __future__ import annotations

from collections.abc import Sequence

from ..op_registry import check
from ..te.expr import Expr, const


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        dims = {s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0}
        dims.discard(1)
        check(len(dims) <= 1, f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_index(shape: Sequence[int], out_index: Sequence[Expr]) -> tuple[Expr, ...]:
    """Index into a tensor of ``shape`` for an element of the (larger) broadcast output."""
    offset = len(out_index) - len(shape)
    return tuple(const(0) if n == 1 else out_index[offset + d] for d, n in enumerate(shape))
