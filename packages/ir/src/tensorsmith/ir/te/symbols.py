"""Run-time sizes in the tensor IR: dims that are symbols, as expressions and as extents.

A dim (``symbolic.Dim``) is an int or a :class:`~tensorsmith.ir.symbolic.Sym`. Tensor
shapes, axis and loop extents and buffer shapes keep dims as they are (an int stays an
int, so a static kernel lowers exactly as before); wherever a dim meets an index
expression it becomes an expression over :class:`SymVar` variables, one per symbol
name, built by :func:`sym_expr` through ``symbolic.fold``.

A kernel whose lowering mentions symbols reads their values from one extra argument
after all its buffers: a pointer to ``int64`` values, in the order of
``PrimFunc.attrs["symbols"]`` (the names it uses, sorted) -- see :func:`kernel_symbols`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..symbolic import Dim, Sym, fold, free_symbols
from .expr import INDEX, Binary, Const, Expr, SymVar, binary, cast, const
from .visit import free_vars, rewrite, stmt_exprs, walk, walk_stmts

_SYMVARS: dict[str, SymVar] = {}
_EXPRS: dict[Sym, Expr] = {}

def _mul(a: Expr, b: Expr) -> Expr:
    """``a * b`` with a constant factor kept outermost: ``(batch * seq) * 768``, the
    form flat indices take, so that equal strides are equal expressions."""
    if isinstance(a, Binary) and a.op == "mul" and isinstance(a.b, Const):
        return binary("mul", binary("mul", a.a, b), a.b)
    return binary("mul", a, b)


_OPS = {"add": lambda a, b: binary("add", a, b), "mul": _mul,
        "floordiv": lambda a, b: binary("floordiv", a, b),
        "mod": lambda a, b: binary("floormod", a, b),
        "max": lambda a, b: binary("max", a, b), "min": lambda a, b: binary("min", a, b)}


def symvar(name: str) -> SymVar:
    """The variable of run-time size ``name`` (one object per name, so that two uses of
    a size are the same variable to every analysis that compares by identity)."""
    v = _SYMVARS.get(name)
    if v is None:
        v = _SYMVARS[name] = SymVar(name, INDEX)
    return v


def sym_expr(d: Sym, dtype: str | None = None) -> Expr:
    """``d`` as an index expression over :class:`SymVar` (cached: equal dims give the
    same expression object), cast to ``dtype`` if another is asked."""
    e = _EXPRS.get(d)
    if e is None:
        e = _EXPRS[d] = fold(d, lambda c: const(c), symvar, _OPS)
    return e if dtype is None or dtype == INDEX else cast(dtype, e)


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def as_dim(d: object) -> Dim:
    """A dim as shapes keep it: a Sym as it is, anything else (NumPy ints) an int."""
    return d if isinstance(d, Sym) else int(d)  # type: ignore[call-overload]


def extent_value(d: Dim) -> int | Expr:
    """A loop's extent as a ``For`` holds it: an int, or an expression of sizes."""
    return d if isinstance(d, int) else sym_expr(d)


def ceil_div(d: Dim, factor: int) -> Dim:
    """``ceil(d / factor)``: the outer extent of a split (``(d + f - 1) // f`` for a Sym,
    which reads better than the negated floor division)."""
    if isinstance(d, int):
        return -(-d // factor)
    return (d + (factor - 1)) // factor


def divides(factor: int, d: Dim) -> bool:
    """Whether ``factor`` divides ``d`` for every value of its symbols (``12*batch`` by 4:
    yes; ``batch`` by 4: not known, so no)."""
    rest = d % factor
    return isinstance(rest, int) and rest == 0


def maybe_many(d: Dim) -> bool:
    """Whether an extent may exceed 1 (an int above 1, or any symbolic one)."""
    return not isinstance(d, int) or d > 1


def size_names(e: Expr) -> set[str]:
    """The run-time sizes an expression reads."""
    return {v.name for v in free_vars(e) if isinstance(v, SymVar)}


def kernel_symbols(body: object, shapes: Iterable[Iterable[Dim]]) -> tuple[str, ...]:
    """The sizes a lowered kernel uses, sorted by name: those its statements read (loop
    extents, indices, conditions, values) and those of its buffers' shapes."""
    names: set[str] = set()
    for shape in shapes:
        names |= free_symbols(shape)
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            for x in walk(e):
                if isinstance(x, SymVar):
                    names.add(x.name)
    return tuple(sorted(names))


def dim_of(e: Dim | Expr) -> Dim:
    """An index expression of run-time sizes as a dim (the inverse of :func:`sym_expr`):
    what a dispatch's workgroup count is written as in an artifact's metadata."""
    from ..symbolic import dim_max, dim_min, symbol

    if isinstance(e, int | Sym):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, SymVar):
        return symbol(e.name)
    if isinstance(e, Binary):
        a, b = dim_of(e.a), dim_of(e.b)
        ops = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
               "floordiv": lambda: a // b, "floormod": lambda: a % b,
               "max": lambda: dim_max(a, b), "min": lambda: dim_min(a, b)}
        if e.op in ops:
            return ops[e.op]()
    raise ValueError(f"{e!r} is not an expression of run-time sizes")


def bind_sizes(e: Expr, sizes: dict[str, int]) -> Expr:
    """``e`` with each run-time size replaced by its value from ``sizes``."""
    return rewrite(e, lambda x: const(sizes[x.name], x.dtype) if isinstance(x, SymVar)
                   else None)


__all__ = ["SymVar", "as_dim", "bind_sizes", "ceil_div", "dim_of", "divides", "extent_value",
           "is_static", "kernel_symbols", "maybe_many", "size_names", "sym_expr", "symvar"]
