"""NumPy-style broadcasting for shapes and for tensor-expression indices."""

from __future__ import annotations

from collections.abc import Sequence

from ..op_registry import check
from ..symbolic import Dim, assume_equal, is_static, shape_text
from ..te.expr import Expr, const


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """NumPy's broadcast of ``shapes``. Symbolic dims broadcast for every value of their
    symbols against a literal 1 or an equal expression. ``batch`` against ``seq`` (or
    against 4) broadcasts only where they are equal at run time (a run where one is 1
    would need another compiled shape): while a graph is built that equality is assumed
    (symbolic.assume_equal: the graph keeps it, every run checks it), elsewhere it is a
    SymbolicDimError naming both."""
    ndim = max(len(s) for s in shapes)
    out: list[Dim] = []
    for d in range(ndim):
        dims = [s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0]
        distinct = list(dict.fromkeys(n for n in dims if n != 1))
        if len(distinct) > 1 and not is_static(distinct):
            # the model only means something if they agree: assume it (the graph keeps
            # the assumption and every run checks it) where the graph records assumptions
            merged = distinct[0]
            for other in distinct[1:]:
                merged = assume_equal(merged, other, (
                    f"shapes {' and '.join(shape_text(s) for s in shapes)} broadcast at "
                    f"axis {d} only if {merged} == {other}"))
            distinct = [merged]
        check(len(distinct) <= 1, f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(distinct[0] if distinct else 1)
    return tuple(out)


def broadcast_index(shape: Sequence[int], out_index: Sequence[Expr]) -> tuple[Expr, ...]:
    """Index into a tensor of ``shape`` for an element of the (larger) broadcast output."""
    offset = len(out_index) - len(shape)
    return tuple(const(0) if n == 1 else out_index[offset + d] for d, n in enumerate(shape))
