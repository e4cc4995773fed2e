"""Vector loads of a clamped span: ``buf[rest + clamp(a + s * var, lo, hi)]``, s in 1..4.

Padding reads its input at a column clamped into the row (so that no lane leaves the
buffer) and selects the fill value outside it: ``select(inside, buf[clamped], fill)``,
in a padding stage or, inlined, in a depthwise convolution's inner loop. Per lane that
index is not affine, so the load used to be a gather: one scalar load per lane, and per
lane the index arithmetic. Here it is one masked contiguous load (a wide one and a
shuffle for strides 2-4).

Which lanes fall inside ``[lo, hi]``, and which satisfy the comparisons of ``inside``,
are contiguous lane ranges: their bounds are computed in scalar registers and the masks
built as bit patterns, so no vector of 64-bit lane indices is ever materialised (on a
64-lane loop that took eight registers per comparison). Lanes below ``lo`` or above
``hi`` take the element at ``lo`` or ``hi``, exactly what the clamp reads there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from tensorsmith.ir.te.expr import Binary, Const, Expr, Load, Var, const, same
from tensorsmith.ir.te.visit import free_vars

from .constants import vector
from .vectorize import PTR, _elem, _elem_bytes, span_mask, stride_of

if TYPE_CHECKING:
    from .vectorize import VectorEmitter

I64 = ir.IntType(64)
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


@dataclass(frozen=True)
class ClampedSpan:
    """``rest + clamp(inner, lo, hi)``: ``rest`` invariant, ``inner`` of stride ``step``."""

    rest: list[Expr]
    inner: Expr
    lo: int
    hi: int
    step: int


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
        if stride_of(term, var) == 0:
            rest.append(term)
            continue
        clamp = _clamp(term)
        if found is not None or clamp is None:
            return None
        found = clamp
    if found is None:
        return None
    step = stride_of(found[0], var)
    if step not in (1, 2, 3, 4):
        return None
    return ClampedSpan(rest, found[0], found[1], found[2], step)  # type: ignore[arg-type]


def _invariant(e: Expr, var: Var) -> bool:
    return all(v is not var for v in free_vars(e))


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "and":
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _range_conditions(cond: Expr, var: Var) -> list[tuple[Expr, str, Expr, int]] | None:
    """``cond`` as comparisons ``E op c`` (E of positive stride, c invariant) and invariant
    conjuncts (returned with stride 0), or None when it has another shape."""
    out: list[tuple[Expr, str, Expr, int]] = []
    for c in _conjuncts(cond):
        if _invariant(c, var):
            out.append((c, "", c, 0))
            continue
        if not (isinstance(c, Binary) and c.op in _FLIP):
            return None
        a, op, b = c.a, c.op, c.b
        if _invariant(a, var):
            a, op, b = b, _FLIP[op], a
        step = stride_of(a, var)
        if not _invariant(b, var) or step is None or step <= 0:
            return None
        out.append((a, op, b, step))
    return out


def matches(cond: Expr, var: Var) -> bool:
    return _range_conditions(cond, var) is not None


def _offset(e: Expr, inner: Expr) -> int | None:
    """``d`` with ``e == inner + d`` term by term (sums that differ in a constant only),
    or None."""
    def split(x: Expr) -> tuple[list[Expr], int]:
        terms, total = [], 0
        for t in _terms(x):
            if isinstance(t, Const) and isinstance(t.value, int):
                total += t.value
            else:
                terms.append(t)
        return terms, total

    (te_, ce), (ti, ci) = split(e), split(inner)
    if len(te_) != len(ti):
        return None
    rest = list(ti)
    for t in te_:
        match = next((i for i, u in enumerate(rest) if same(t, u)), None)
        if match is None:
            return None
        rest.pop(match)
    return ce - ci


def implied_sides(cond: Expr | None, span: ClampedSpan, var: Var) -> tuple[bool, bool]:
    """Whether ``cond`` alone keeps the span's index at least ``lo`` / at most ``hi``
    (a padding stage's ``inside`` does): then the clamp's edge lanes need no blending."""
    low = high = False
    for e, op, c, _ in (_range_conditions(cond, var) or []) if cond is not None else []:
        if not op or not isinstance(c, Const):
            continue
        d = _offset(e, span.inner)
        if d is None:
            continue
        bound = int(c.value) - d  # the condition on inner: inner op bound
        if op in ("ge", "gt"):
            low = low or (bound + (op == "gt")) >= span.lo
        else:
            high = high or (bound - (op == "lt")) <= span.hi
    return low, high


class _Lanes:
    """Scalar arithmetic on lane ranges of one vector loop, and their bit masks."""

    def __init__(self, v: VectorEmitter) -> None:
        self.v, self.b, self.n = v, v.b, v.lanes

    def at_zero(self, e: Expr) -> ir.Value:
        self.v.em.vars[id(self.v.var)] = ir.Constant(I64, 0)
        return self.v.em.expr(self.b, e)

    def count_below(self, t: ir.Value, step: int) -> ir.Value:
        """Lanes l in [0, n) with step * l < t: ceil(t / step) clamped to [0, n]."""
        b = self.b
        lo, hi = ir.Constant(I64, 0), ir.Constant(I64, step * self.n)
        t = b.select(b.icmp_signed("<", t, lo), lo, t)
        t = b.select(b.icmp_signed(">", t, hi), hi, t)
        return b.udiv(b.add(t, ir.Constant(I64, step - 1)), ir.Constant(I64, step))

    def bits(self, start: ir.Value, stop: ir.Value) -> ir.Value:
        """The lanes [start, stop) as an <n x i1> mask: the lane numbers as 32-bit
        lanes compared with the two bounds. Without mask registers (AVX2) a mask made
        from a bit pattern was taken apart one lane at a time (a shift and an insert per
        lane); two vector compares per register do it, and with mask registers the
        compares write those directly."""
        b = self.b
        i32 = ir.IntType(32)
        vty = ir.VectorType(i32, self.n)
        iota = vector(vty, range(self.n))
        low = self.v.splat(b.trunc(start, i32), vty)
        high = self.v.splat(b.trunc(stop, i32), vty)
        return b.and_(b.icmp_signed(">=", iota, low), b.icmp_signed("<", iota, high))

    def range_of(self, e0: ir.Value, op: str, c: ir.Value, step: int) -> tuple[ir.Value, ir.Value]:
        """Lanes with ``e0 + step * l  op  c``, as [start, stop)."""
        b = self.b
        t = b.sub(c, e0)
        if op in ("le", "gt"):
            t = b.add(t, ir.Constant(I64, 1))
        cut = self.count_below(t, step)
        zero, n = ir.Constant(I64, 0), ir.Constant(I64, self.n)
        return (zero, cut) if op in ("lt", "le") else (cut, n)

    def cond_mask(self, cond: Expr) -> ir.Value:
        return self.bits(*self.cond_range(cond))

    def cond_range(self, cond: Expr) -> tuple[ir.Value, ir.Value]:
        terms = _range_conditions(cond, self.v.var)
        assert terms is not None
        b = self.b
        start, stop = ir.Constant(I64, 0), ir.Constant(I64, self.n)
        for e, op, c, step in terms:
            if step == 0:  # invariant: all lanes or none
                ok = self.v.em._as_bool(b, self.v.em.expr(b, e))
                stop = b.select(ok, stop, ir.Constant(I64, 0))
                continue
            s, t = self.range_of(self.at_zero(e), op, self.at_zero(c), step)
            start = b.select(b.icmp_unsigned(">", s, start), s, start)
            stop = b.select(b.icmp_unsigned("<", t, stop), t, stop)
        stop = b.select(b.icmp_unsigned("<", stop, start), start, stop)
        return start, stop


def lane_range(v: VectorEmitter, cond: Expr) -> tuple[ir.Value, ir.Value] | None:
    """The lanes ``[start, stop)`` satisfying a guard made of comparisons affine in the
    loop variable (a split's tail, ``o * 16 + i < 114``), computed in scalar registers;
    None for a guard of another shape, or one that does not vary over the lanes."""
    if _invariant(cond, v.var) or not matches(cond, v.var):
        return None
    return _Lanes(v).cond_range(cond)


def lanes_mask(v: VectorEmitter, start: ir.Value, stop: ir.Value) -> ir.Value:
    """The lanes ``[start, stop)`` as an ``<n x i1>`` mask."""
    return _Lanes(v).bits(start, stop)


def load_clamped(v: VectorEmitter, e: Load, span: ClampedSpan, cond: Expr | None = None,
                 fill: Expr | None = None) -> ir.Value:
    """``e`` (matched as ``span``), or ``select(cond, e, fill)`` when ``cond`` is given
    (and ``matches``): one masked span load, the clamp's edge lanes blended in."""
    b, em, lanes = v.b, v.em, _Lanes(v)
    buf = e.buffer
    elem = _elem(buf.dtype)  # type: ignore[union-attr]
    vty = ir.VectorType(elem, v.lanes)
    rest_expr: Expr = const(0)
    for term in span.rest:
        rest_expr = rest_expr + term
    rest = lanes.at_zero(rest_expr)
    inner0 = lanes.at_zero(span.inner)
    lo, hi = ir.Constant(I64, span.lo), ir.Constant(I64, span.hi)
    below_stop = lanes.range_of(inner0, "lt", lo, span.step)[1]
    above_start = lanes.range_of(inner0, "gt", hi, span.step)[0]
    wanted = lanes.bits(ir.Constant(I64, 0), ir.Constant(I64, v.lanes)) if cond is None \
        else lanes.cond_mask(cond)
    tail = getattr(v, "mask", None)
    if tail is not None:
        wanted = b.and_(wanted, tail)
    low_ok, high_ok = implied_sides(cond, span, v.var)
    inside = wanted if low_ok and high_ok else b.and_(wanted, lanes.bits(
        ir.Constant(I64, 0) if low_ok else below_stop,
        ir.Constant(I64, v.lanes) if high_ok else above_start))
    passthru = v.splat(em.expr(b, fill), vty) if fill is not None else ir.Constant(
        vty, ir.Undefined)
    addr = b.gep(em.bufs[id(buf)], [b.add(rest, inner0)], source_etype=elem)  # not inbounds:
    # lane 0 may lie before the row; only the lanes in ``inside`` are read.
    value = _masked_strided_load(v, addr, vty, inside, passthru, span.step, buf.dtype)  # type: ignore[union-attr]
    for bound, first, last, ok in ((span.lo, ir.Constant(I64, 0), below_stop, low_ok),
                                   (span.hi, above_start, ir.Constant(I64, v.lanes), high_ok)):
        if ok:
            continue
        at = b.gep(em.bufs[id(buf)], [b.add(rest, ir.Constant(I64, bound))], inbounds=True,
                   source_etype=elem)
        edge = v.splat(b.load(at, typ=elem), vty)
        value = b.select(b.and_(wanted, lanes.bits(first, last)), edge, value)
    return value


def _masked_strided_load(v: VectorEmitter, addr: ir.Value, vty: ir.VectorType,
                         mask: ir.Value, passthru: ir.Value, step: int, dtype: str) -> ir.Value:
    b = v.b
    align = ir.Constant(ir.IntType(32), _elem_bytes(dtype))
    if step == 1:
        fn = v._masked("load", vty, ir.FunctionType(vty, [PTR, ir.IntType(32), mask.type, vty]))
        return b.call(fn, [addr, align, mask, passthru])
    wide_lanes = step * v.lanes
    wty = ir.VectorType(vty.element, wide_lanes)
    i32 = ir.IntType(32)
    wide_mask = span_mask(b, mask, step, v.lanes)
    wide_pass = b.shuffle_vector(passthru, ir.Constant(vty, ir.Undefined), vector(
        ir.VectorType(i32, wide_lanes), [j // step for j in range(wide_lanes)]))
    fn = v._masked("load", wty, ir.FunctionType(wty, [PTR, i32, wide_mask.type, wty]),
                   lanes=wide_lanes)
    wide = b.call(fn, [addr, align, wide_mask, wide_pass])
    return b.shuffle_vector(wide, ir.Constant(wty, ir.Undefined), vector(
        ir.VectorType(i32, v.lanes), [j * step for j in range(v.lanes)]))
