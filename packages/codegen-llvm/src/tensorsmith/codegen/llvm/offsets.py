"""Vector loads whose lane offsets are compile-time constants: ``buf[rest + g(var)]``.

A small image's convolution vectorized over its flattened output pixels reads the
padded input at ``(f // 7) * 9 + f % 7 + ...``: rows of 7 contiguous elements 9 apart.
``g`` depends on the lane alone, so its value per lane is known when compiling; when
those offsets fall within a short span, the lanes are one masked contiguous load of the
span and a constant shuffle (a few permutes), instead of a scalar load per lane.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from tensorsmith.ir.te.expr import Binary, Const, Expr, Load, Var, const
from tensorsmith.ir.te.visit import free_vars, substitute

from .constants import vector
from .vectorize import PTR, _elem, _elem_bytes

if TYPE_CHECKING:
    from .vectorize import VectorEmitter

MAX_SPAN_FACTOR = 2
"""The span read may be at most this many times the lanes (more wastes the load)."""


def _terms(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "add":
        return [*_terms(e.a), *_terms(e.b)]
    return [e]


def lane_offsets(index: Expr, var: Var, lanes: int) -> tuple[Expr, list[int]] | None:
    """``index`` as ``rest + g(var)`` with ``rest`` free of ``var`` and ``g`` a function
    of ``var`` alone: ``rest`` and ``g(0..lanes-1)``; None when it has another shape or
    the offsets are all equal or not within a short span. Lanes may share an offset:
    ``x // 2`` (a Winograd output transform's read) reads each element twice."""
    rest: Expr = const(0)
    lane_part: Expr = const(0)
    for term in _terms(index):
        names = free_vars(term)
        if all(v is not var for v in names):
            rest = rest + term
        elif all(v is var for v in names):
            lane_part = lane_part + term
        else:
            return None
    offsets = []
    for lane in range(lanes):
        value = substitute(lane_part, {id(var): const(lane)})
        if not isinstance(value, Const):
            return None
        offsets.append(int(value.value))
    if len(set(offsets)) < 2 or max(offsets) - min(offsets) >= MAX_SPAN_FACTOR * lanes:
        return None
    return rest, offsets


def load_offsets(v: VectorEmitter, e: Load, rest: Expr, offsets: list[int]) -> ir.Value:
    """One masked load of the span the offsets cover, then a constant shuffle."""
    b, em = v.b, v.em
    buf = e.buffer
    elem = _elem(buf.dtype)  # type: ignore[union-attr]
    first = min(offsets)
    span = max(offsets) - first + 1
    i32, i1 = ir.IntType(32), ir.IntType(1)
    wty = ir.VectorType(elem, span)
    lane_of: dict[int, int] = {}  # span element -> the first lane reading it
    for lane, off in enumerate(offsets):
        lane_of.setdefault(off - first, lane)
    used = vector(ir.VectorType(i1, span), [int(j in lane_of) for j in range(span)])
    mask = getattr(v, "mask", None)
    wide_mask: ir.Value = used
    if mask is not None:  # element j is read when the lane it feeds is active
        spread = b.shuffle_vector(mask, ir.Constant(mask.type, None), vector(
            ir.VectorType(i32, span), [lane_of.get(j, v.lanes) for j in range(span)]))
        wide_mask = b.and_(spread, used)
    em.vars[id(v.var)] = ir.Constant(ir.IntType(64), 0)
    start = b.add(em.expr(b, rest), ir.Constant(ir.IntType(64), first))
    addr = b.gep(em.bufs[id(buf)], [start], inbounds=True, source_etype=elem)
    fn = v._masked("load", wty, ir.FunctionType(wty, [PTR, i32, wide_mask.type, wty]),
                   lanes=span)
    wide = b.call(fn, [addr, ir.Constant(i32, _elem_bytes(buf.dtype)), wide_mask,  # type: ignore[union-attr]
                       ir.Constant(wty, ir.Undefined)])
    return b.shuffle_vector(wide, ir.Constant(wty, ir.Undefined), vector(
        ir.VectorType(i32, v.lanes), [off - first for off in offsets]))
