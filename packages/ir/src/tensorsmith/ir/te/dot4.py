"""The four-byte integer dot that the integer ops state, found in lowered tensor IR.

``qmatmul`` and ``qconv2d`` (ops/integer.py) write each step of their reduction as

    int32(x[a]) * int32(w[b]) + int32(x[a + 1]) * int32(w[b + 1]) + ... (four terms)

with ``x`` uint8 and ``w`` int8, left to right (the activation bytes may be expressions:
an inlined padding's select). A GPU with integer dot products computes that as one
instruction on two 32-bit words holding the four bytes each (SPIR-V's ``OpSUDot`` with
``PackedVectorFormat4x8Bit``). An operand's word is one load where its four bytes are
adjacent in memory and the first starts a word, and is otherwise assembled from the four
values. :func:`match` finds the sum, :func:`word` the four adjacent bytes, and
:func:`multiple_of` proves the alignment from the index expression alone; codegens ask
them rather than each reading the expression's shape again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Binary, Cast, Const, Expr, Load, Var
from .visit import children

#: Byte products in one dot (the bytes of one 32-bit word): the reduction step the
#: integer ops state (ops/integer.py) and every codegen's dot instruction takes.
DOT = 4


@dataclass(frozen=True)
class Dot4:
    """A matched dot: the four uint8 values ``xs`` and the four int8 values ``ws``, in
    the order of their products."""

    xs: tuple[Expr, ...]
    ws: tuple[Expr, ...]


def match(e: Expr) -> Dot4 | None:
    """``e`` as the four-term dot, or None: ``((p0 + p1) + p2) + p3`` in int32, each ``p``
    ``int32(x_j) * int32(w_j)`` (either factor first), x_j uint8 and w_j int8."""
    terms = _terms(e)
    if terms is None:
        return None
    xs: list[Expr] = []
    ws: list[Expr] = []
    for a, b in terms:
        if a.dtype == "int8" and b.dtype == "uint8":
            a, b = b, a
        if a.dtype != "uint8" or b.dtype != "int8":
            return None
        xs.append(a)
        ws.append(b)
    return Dot4(tuple(xs), tuple(ws))


def word(values: tuple[Expr, ...]) -> Load | None:
    """The load of the first of ``values`` where they are loads of one flat buffer at
    consecutive indices (one word's bytes, if the first starts a word), else None."""
    if not all(isinstance(v, Load) and len(v.indices) == 1 for v in values):
        return None
    loads = [v for v in values if isinstance(v, Load)]
    if any(x.buffer is not loads[0].buffer for x in loads):
        return None
    return loads[0] if consecutive([x.indices[0] for x in loads]) else None


def _terms(e: Expr) -> list[tuple[Expr, Expr]] | None:
    """The (a, b) factors (below their int32 casts) of the four products of a
    left-to-right int32 sum, or None."""
    products: list[Expr] = []
    while (isinstance(e, Binary) and e.op == "add" and e.dtype == "int32"
           and len(products) < DOT - 1):
        products.append(e.b)
        e = e.a
    products.append(e)
    if len(products) != DOT:
        return None
    out = []
    for p in reversed(products):
        if not (isinstance(p, Binary) and p.op == "mul" and p.dtype == "int32"):
            return None
        factors = []
        for f in (p.a, p.b):
            if not (isinstance(f, Cast) and f.dtype == "int32"):
                return None
            factors.append(f.value)
        out.append((factors[0], factors[1]))
    return out


def consecutive(indices: list[Expr]) -> bool:
    """Whether ``indices[j]`` is ``indices[0] + j`` for every ``j``, as linear forms."""
    first = linear(indices[0])
    if first is None:
        return False
    for j, e in enumerate(indices[1:], start=1):
        form = linear(e)
        if form is None or form[0] != first[0] or form[1] != first[1] + j:
            return False
    return True


def multiple_of(e: Expr, n: int) -> bool:
    """Whether ``e`` is a multiple of ``n`` for every value of its variables: each term of
    its linear form has a coefficient that is one, and so has its constant."""
    form = linear(e)
    return form is not None and form[1] % n == 0 and all(c % n == 0 for c in form[0].values())


def linear(e: Expr) -> tuple[dict[object, int], int] | None:
    """``e`` as ({leaf: coefficient}, constant) over sums, differences and products by
    constants; any other subexpression is a leaf, keyed by its structure (so the same
    ``i // 16`` in two indices is one leaf). None for a float constant."""
    if isinstance(e, Const):
        return ({}, int(e.value)) if not e.dtype.startswith("float") else None
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        a, b = linear(e.a), linear(e.b)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "add" else -1
        terms = dict(a[0])
        for k, v in b[0].items():
            terms[k] = terms.get(k, 0) + sign * v
        return {k: v for k, v in terms.items() if v}, a[1] + sign * b[1]
    if isinstance(e, Binary) and e.op == "mul" and (isinstance(e.b, Const)
                                                    or isinstance(e.a, Const)):
        scale, rest = (e.b, e.a) if isinstance(e.b, Const) else (e.a, e.b)
        if not isinstance(scale, Const) or scale.dtype.startswith("float"):
            return None
        inner = linear(rest)
        if inner is None:
            return None
        c = int(scale.value)
        return {k: v * c for k, v in inner[0].items() if v * c}, inner[1] * c
    return {_key(e): 1}, 0


def _key(e: Expr) -> object:
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("const", e.value, e.dtype)
    if isinstance(e, Load):
        return ("load", id(e.buffer), *(_key(i) for i in e.indices))
    return (type(e).__name__, getattr(e, "op", getattr(e, "fn", e.dtype)),
            *(_key(c) for c in children(e)))


__all__ = ["DOT", "Dot4", "consecutive", "linear", "match", "multiple_of", "word"]
