"""Vector loads of a clamped contiguous span: ``buf[rest + clamp(a + var, lo, hi)]``.

Padding stages read their input at a column clamped into the row (so that no lane leaves
the buffer) and select the fill value outside it. Per lane that index is not affine, so
the load used to be a gather: one scalar load per lane, and per lane the index arithmetic.
Here it is one masked contiguous load of the lanes inside ``[lo, hi]``, and the lanes
below or above take the (broadcast) element at ``lo`` or ``hi`` — exactly what the clamp
reads there, whatever the caller does with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from tensorsmith.ir.te.expr import Binary, Const, Expr, Load, Var, const

from .vectorize import PTR, _elem, _elem_bytes, stride_of

if TYPE_CHECKING:
    from .vectorize import VectorEmitter

I64 = ir.IntType(64)


@dataclass(frozen=True)
class ClampedSpan:
    """``rest + clamp(inner, lo, hi)``: ``rest`` invariant, ``inner`` of stride 1."""

    rest: list[Expr]
    inner: Expr
    lo: int
    hi: int


def _terms(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "add":
        return [*_terms(e.a), *_terms(e.b)]
    return [e]


def _clamp(e: Expr) -> tuple[Expr, int, int] | None:
    """``max(min(x, hi), lo)`` or ``min(max(x, lo), hi)`` with constant bounds."""
    if not (isinstance(e, Binary) and e.op in ("max", "min") and isinstance(e.b, Const)):
        return None
    inner = e.a
    if not (isinstance(inner, Binary) and inner.op in ("max", "min") and inner.op != e.op
            and isinstance(inner.b, Const)):
        return None
    lo, hi = (e.b.value, inner.b.value) if e.op == "max" else (inner.b.value, e.b.value)
    if not (isinstance(lo, int) and isinstance(hi, int)) or lo > hi:
        return None
    return inner.a, lo, hi


def clamped_span(index: Expr, var: Var) -> ClampedSpan | None:
    """Match ``index`` as a clamped span in ``var``, or None."""
    rest: list[Expr] = []
    found: tuple[Expr, int, int] | None = None
    for term in _terms(index):
        step = stride_of(term, var)
        if step == 0:
            rest.append(term)
            continue
        clamp = _clamp(term)
        if found is not None or clamp is None or stride_of(clamp[0], var) != 1:
            return None
        found = clamp
    if found is None:
        return None
    return ClampedSpan(rest, *found)


def load_clamped(v: VectorEmitter, e: Load, span: ClampedSpan) -> ir.Value:
    """Emit ``e`` (matched as ``span``) as a masked span load plus two boundary selects."""
    b, em = v.b, v.em
    buf = e.buffer
    em.vars[id(v.var)] = ir.Constant(I64, 0)
    rest: Expr = const(0)
    for term in span.rest:
        rest = rest + term
    first = b.add(em.expr(b, rest), em.expr(b, span.inner))  # lane 0's unclamped index
    vidx = ir.VectorType(I64, v.lanes)
    inner = b.add(v.splat(em.expr(b, span.inner), vidx),
                  ir.Constant(vidx, list(range(v.lanes))))
    below = b.icmp_signed("<", inner, ir.Constant(vidx, [span.lo] * v.lanes))
    above = b.icmp_signed(">", inner, ir.Constant(vidx, [span.hi] * v.lanes))
    inside = b.not_(b.or_(below, above))
    mask = getattr(v, "mask", None)
    if mask is not None:
        inside = b.and_(inside, mask)
    elem = _elem(buf.dtype)  # type: ignore[union-attr]
    vty = ir.VectorType(elem, v.lanes)
    base = em.bufs[id(buf)]
    addr = b.gep(base, [first], source_etype=elem)  # may point before the row: not inbounds
    align = ir.Constant(ir.IntType(32), _elem_bytes(buf.dtype))  # type: ignore[union-attr]
    fn = v._masked("load", vty, ir.FunctionType(vty, [PTR, ir.IntType(32), inside.type, vty]))
    span_value = b.call(fn, [addr, align, inside, ir.Constant(vty, ir.Undefined)])
    rest_value = em.expr(b, rest)
    edges = []
    for bound in (span.lo, span.hi):
        at = b.gep(base, [b.add(rest_value, ir.Constant(I64, bound))], inbounds=True,
                   source_etype=elem)
        edges.append(v.splat(b.load(at, typ=elem), vty))
    return b.select(below, edges[0], b.select(above, edges[1], span_value))
