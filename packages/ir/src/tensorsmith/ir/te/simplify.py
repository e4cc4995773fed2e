"""Bound-aware simplification of index expressions.

Knowing each loop variable's range ``[0, extent)``, interval analysis removes the
``% n`` and ``// n`` that split and fuse leave behind when they cannot change the value,
and drops guards that always hold: the inner loops then carry plain affine indices
that LLVM strength-reduces and vectorizes.
"""

from __future__ import annotations

from ..dtypes import is_float
from .expr import Binary, Const, Expr, Var, binary, const
from .visit import rewrite

Interval = tuple[int, int]  # inclusive bounds


def interval(e: Expr, bounds: dict[int, Interval]) -> Interval | None:
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return (e.value, e.value)
    if isinstance(e, Var):
        return bounds.get(id(e))
    if isinstance(e, Binary) and not is_float(e.dtype):
        a, b = interval(e.a, bounds), interval(e.b, bounds)
        if a is None or b is None:
            return None
        if e.op == "add":
            return (a[0] + b[0], a[1] + b[1])
        if e.op == "sub":
            return (a[0] - b[1], a[1] - b[0])
        if e.op == "mul":
            p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return (min(p), max(p))
        if e.op == "floordiv" and b[0] == b[1] and b[0] > 0:
            return (a[0] // b[0], a[1] // b[0])
        if e.op == "floormod" and b[0] == b[1] and b[0] > 0:
            if a[0] >= 0 and a[1] < b[0]:
                return a
            return (0, b[0] - 1)
        if e.op in ("max", "min"):
            f = max if e.op == "max" else min
            return (f(a[0], b[0]), f(a[1], b[1]))
    return None


def simplify(e: Expr, bounds: dict[int, Interval]) -> Expr:
    def visit(x: Expr) -> Expr | None:
        if not isinstance(x, Binary):
            return None
        a, b = simplify(x.a, bounds), simplify(x.b, bounds)
        if x.op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
            ia = interval(a, bounds)
            if ia is not None and ia[0] >= 0 and ia[1] < b.value:
                return a if x.op == "floormod" else const(0, x.dtype)
            # (u * c + v) // c == u and (u * c + v) % c == v when 0 <= v < c.
            if isinstance(a, Binary) and a.op == "add":
                split = _split_multiple(a, int(b.value), bounds)
                if split is not None:
                    u, v = split
                    return u if x.op == "floordiv" else v
        if x.op in ("lt", "le", "gt", "ge"):
            ia, ib = interval(a, bounds), interval(b, bounds)
            if ia is not None and ib is not None:
                truth = {"lt": (ia[1] < ib[0], ia[0] >= ib[1]),
                         "le": (ia[1] <= ib[0], ia[0] > ib[1]),
                         "gt": (ia[0] > ib[1], ia[1] <= ib[0]),
                         "ge": (ia[0] >= ib[1], ia[1] < ib[0])}[x.op]
                if truth[0]:
                    return const(True)
                if truth[1]:
                    return const(False)
        return binary(x.op, a, b)

    return rewrite(e, visit)


def _split_multiple(a: Binary, c: int, bounds: dict[int, Interval]) -> tuple[Expr, Expr] | None:
    """Write the sum ``a`` as ``u * c + v`` with ``0 <= v < c`` if its terms allow: the
    terms that are multiples of ``c`` make ``u``, the others ``v``. A loop split twice
    (``(jo * 16 + ji) * 16 + jj``) indexes ``[j // 16, j % 16]`` storage this way."""
    multiples: list[Expr] = []
    rest: list[Expr] = []
    for term in _terms(a):
        if (isinstance(term, Binary) and term.op == "mul" and isinstance(term.b, Const)
                and _is_int(term.b.value) and term.b.value % c == 0):
            k = term.b.value // c
            multiples.append(term.a if k == 1 else binary("mul", term.a, const(k, term.dtype)))
        elif isinstance(term, Const) and _is_int(term.value) and term.value % c == 0:
            multiples.append(const(term.value // c, term.dtype))
        else:
            rest.append(term)
    if not multiples:
        return None
    v = _sum(rest) if rest else const(0, a.dtype)
    r = interval(v, bounds)
    if r is None or r[0] < 0 or r[1] >= c:
        return None
    return _sum(multiples), v


def _terms(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "add":
        return [*_terms(e.a), *_terms(e.b)]
    return [e]


def _sum(terms: list[Expr]) -> Expr:
    out = terms[0]
    for t in terms[1:]:
        out = binary("add", out, t)
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
