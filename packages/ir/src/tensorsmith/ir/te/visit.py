"""Generic traversal and substitution of expressions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    Load,
    Reduce,
    Select,
    Var,
    binary,
    call,
    cast,
    select,
)


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (e.body,)
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    yield e
    for c in children(e):
        yield from walk(c)


def collect_loads(e: Expr) -> list[Load]:
    return [x for x in walk(e) if isinstance(x, Load)]


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rebuild: ``fn`` may return a replacement for a node (or None to keep it)."""
    replaced = fn(e)
    if replaced is not None:
        return replaced
    if isinstance(e, Binary):
        return binary(e.op, rewrite(e.a, fn), rewrite(e.b, fn))
    if isinstance(e, Call):
        return call(e.fn, *[rewrite(a, fn) for a in e.args], dtype=e.dtype)
    if isinstance(e, Cast):
        return cast(e.dtype, rewrite(e.value, fn))
    if isinstance(e, Select):
        return select(rewrite(e.cond, fn), rewrite(e.a, fn), rewrite(e.b, fn))
    if isinstance(e, Load):
        return Load(e.buffer, tuple(rewrite(i, fn) for i in e.indices), e.dtype)
    if isinstance(e, Reduce):
        return Reduce(e.combiner, rewrite(e.body, fn), e.axes, e.dtype)
    return e


def substitute(e: Expr, mapping: dict[int, Expr]) -> Expr:
    """Replace variables (keyed by ``id(var)``) with expressions."""
    if not mapping:
        return e
    return rewrite(e, lambda x: mapping.get(id(x)) if isinstance(x, Var) else None)


def map_stmt_exprs(s: Any, fn: Callable[[Expr], Expr],
                   store_index: Callable[[Any, Expr], Expr] | None = None) -> Any:
    """A statement tree with ``fn`` applied to each of its expressions (store indices
    and values, conditions); ``store_index(buffer, index)``, if given, first rewrites a
    store's index by the buffer it writes."""
    from .stmt import Allocate, For, IfThenElse, Intrinsic, Seq, Store

    def again(x: Any) -> Any:
        return map_stmt_exprs(x, fn, store_index)

    if isinstance(s, Store):
        index = s.index if store_index is None else store_index(s.buffer, s.index)
        return Store(s.buffer, fn(index), fn(s.value))
    if isinstance(s, Seq):
        return Seq([again(x) for x in s.stmts])
    if isinstance(s, For):
        extent = fn(s.extent) if isinstance(s.extent, Expr) else s.extent
        return For(s.var, extent, s.kind, again(s.body))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, again(s.body))
    if isinstance(s, IfThenElse):
        return IfThenElse(fn(s.cond), again(s.then),
                          None if s.otherwise is None else again(s.otherwise))
    if isinstance(s, Intrinsic):
        return s.map(fn)
    return s


def substitute_stmt(s: Any, mapping: dict[int, Expr]) -> Any:
    """``substitute`` in every expression of a statement tree."""
    return map_stmt_exprs(s, lambda e: substitute(e, mapping))


def free_vars(e: Expr) -> list[Var]:
    seen: dict[int, Var] = {}
    for x in walk(e):
        if isinstance(x, Var):
            seen.setdefault(id(x), x)
    return list(seen.values())


def is_const(e: Expr, value: object = None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


def walk_stmts(s: object) -> Iterator[object]:
    """Every statement of a tensor-IR body, outermost first."""
    from .stmt import Allocate, For, IfThenElse, Seq

    yield s
    if isinstance(s, Seq):
        for x in s.stmts:
            yield from walk_stmts(x)
    elif isinstance(s, For | Allocate):
        yield from walk_stmts(s.body)
    elif isinstance(s, IfThenElse):
        yield from walk_stmts(s.then)
        if s.otherwise is not None:
            yield from walk_stmts(s.otherwise)


def stmt_exprs(s: object) -> tuple[Expr, ...]:
    """The expressions a statement itself evaluates (not those of nested statements):
    a loop's, its extent where that is known only at run time."""
    from .stmt import For, IfThenElse, Intrinsic, Store

    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, Intrinsic):
        return s.exprs()
    if isinstance(s, IfThenElse):
        return (s.cond,)
    if isinstance(s, For) and isinstance(s.extent, Expr):
        return (s.extent,)
    return ()
