"""Register tiles that read no padding: the condition, and the body without the selects.

A padded read that lowering inlines into its reader (a pooling window, a depthwise
convolution of a small image) is ``select(inside, x[clamp(i, 0, n - 1)], fill)`` per
element: codegen turns it into a masked span load plus blends, per tap and row, which
made a 3x3 max pool 4-5x slower than a plain one. Yet only the tiles at the image's
border ever read padding. So a register tile is unswitched: where, for every iteration
of the loops below it, each such condition holds and each clamp leaves its index as it
is, the tile runs a body with the selects replaced by their value and the clamps by
their argument (plain, affine loads); the border tiles keep the guarded body.

The test is computed, not assumed: each comparison and each clamp's index must be affine
in the tile's loops, and its extreme over them (a sum of the coefficients' extremes) is
checked once per tile, in the loops above it.
"""

from __future__ import annotations

from .expr import Binary, Const, Expr, Load, Select, binary, const
from .schedule import Leaf
from .tiles import affine_form
from .visit import free_vars, rewrite, walk

_COMPARISONS = ("lt", "le", "gt", "ge")


def inside_tile(e: Expr, below: list[Leaf], clamped: list[tuple[Expr, int]]
                ) -> tuple[Expr, Expr] | None:
    """``(condition, body)``: the condition on the loops above ``below`` under which ``e``
    equals ``body``, which has no padding selects or clamps; None where ``e`` has none
    or they are not affine in the loops ``below``. ``e`` is written with the tile's
    unclamped axis values; ``clamped`` lists those the tile's other body clamps, with
    their extents (a tail tile recomputes its last row): the condition also says that no
    clamp applies, so both bodies compute the same elements."""
    if not all(isinstance(lf.extent, int) for lf in below):
        return None  # (a loop of run-time extent below the tile: no extremes to test)
    extents = {id(lf.var): lf.extent for lf in below}
    conditions: list[Expr] = []
    failed = False
    for value, extent in clamped:
        span = _extremes(value, extents)
        if span is None:
            return None
        conditions.append(binary("lt", span[1], const(extent)))

    def varies(x: Expr) -> bool:
        return any(id(v) in extents for v in free_vars(x))

    def unclamp(x: Expr) -> Expr | None:
        nonlocal failed
        if not (isinstance(x, Binary) and x.op == "max" and isinstance(x.a, Binary)
                and x.a.op == "min" and isinstance(x.b, Const) and isinstance(x.a.b, Const)
                and varies(x.a.a)):
            return None
        index, low, high = x.a.a, x.b, x.a.b
        span = _extremes(index, extents)
        if span is None:
            failed = True
            return None
        conditions.extend([binary("ge", span[0], low), binary("le", span[1], high)])
        return rewrite(index, unclamp)

    def drop(x: Expr) -> Expr | None:
        nonlocal failed
        if not isinstance(x, Select) or not varies(x.cond) or any(
                isinstance(y, Load) for y in walk(x.cond)):
            return None
        for part in _conjuncts(x.cond):
            holds = _always(part, extents)
            if holds is None:
                failed = True
                return None
            conditions.append(holds)
        return rewrite(x.a, unclamp)

    before = len(conditions)
    body = rewrite(e, drop)
    if failed or len(conditions) == before:
        return None
    cond = conditions[0]
    for c in conditions[1:]:
        cond = binary("and", cond, c)
    return cond, body


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "and":
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _extremes(e: Expr, extents: dict[int, int]) -> tuple[Expr, Expr] | None:
    """The least and greatest value of ``e`` over the loops ``extents``, if affine."""
    form = affine_form(e, extents)
    if form is None:
        return None
    base, coefs = form
    low = sum(min(0, c * (extents[v] - 1)) for v, c in coefs.items())
    high = sum(max(0, c * (extents[v] - 1)) for v, c in coefs.items())
    return base + const(low), base + const(high)


def _always(cmp: Expr, extents: dict[int, int]) -> Expr | None:
    """A condition on the outer loops under which comparison ``cmp`` holds for every
    iteration of the loops ``extents``."""
    if not (isinstance(cmp, Binary) and cmp.op in _COMPARISONS):
        return None
    span = _extremes(binary("sub", cmp.a, cmp.b), extents)
    if span is None:
        return None
    low, high = span
    zero = const(0)
    return {"ge": binary("ge", low, zero), "gt": binary("gt", low, zero),
            "le": binary("le", high, zero), "lt": binary("lt", high, zero)}[cmp.op]
