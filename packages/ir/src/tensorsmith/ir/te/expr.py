"""Scalar expressions of the tensor IR.

Expressions are immutable trees. Python operators build them, folding constants as
they go, so index arithmetic written by compute definitions and produced by schedule
steps (``outer * factor + inner``) stays small without a separate pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from ..dtypes import is_float
from ..symbolic import Dim, Sym

ExprLike = Union["Expr", int, float, bool, Sym]

INDEX = "int64"


def const(value: int | float | bool | Sym, dtype: str | None = None) -> Const:
    """A constant; a symbolic size (a :class:`Sym`) becomes the expression over the
    run-time sizes it stands for (te/symbols.py), so op definitions that write
    ``const(n - 1)`` for a dim ``n`` keep working when ``n`` is known only at run time."""
    if isinstance(value, Sym):
        from .symbols import sym_expr

        return sym_expr(value, dtype)  # type: ignore[return-value]
    if dtype is None:
        is_int = isinstance(value, int)
        dtype = "bool" if isinstance(value, bool) else INDEX if is_int else "float32"
    return Const(value, dtype)


def as_expr(x: ExprLike | IterVar, dtype: str | None = None) -> Expr:
    if isinstance(x, IterVar):
        return x.var
    return x if isinstance(x, Expr) else const(x, dtype)


class Expr:
    """Base of every expression; ``dtype`` is a NumPy dtype name."""

    dtype: str

    def _bin(self, op: str, other: ExprLike, rev: bool = False) -> Expr:
        o = as_expr(other, None if isinstance(other, Expr) else _literal_dtype(other, self.dtype))
        return binary(op, o, self) if rev else binary(op, self, o)

    def __add__(self, o: ExprLike) -> Expr: return self._bin("add", o)
    def __radd__(self, o: ExprLike) -> Expr: return self._bin("add", o, True)
    def __sub__(self, o: ExprLike) -> Expr: return self._bin("sub", o)
    def __rsub__(self, o: ExprLike) -> Expr: return self._bin("sub", o, True)
    def __mul__(self, o: ExprLike) -> Expr: return self._bin("mul", o)
    def __rmul__(self, o: ExprLike) -> Expr: return self._bin("mul", o, True)
    def __truediv__(self, o: ExprLike) -> Expr: return self._bin("div", o)
    def __rtruediv__(self, o: ExprLike) -> Expr: return self._bin("div", o, True)
    def __floordiv__(self, o: ExprLike) -> Expr: return self._bin("floordiv", o)
    def __rfloordiv__(self, o: ExprLike) -> Expr: return self._bin("floordiv", o, True)
    def __mod__(self, o: ExprLike) -> Expr: return self._bin("floormod", o)
    def __rmod__(self, o: ExprLike) -> Expr: return self._bin("floormod", o, True)
    def __neg__(self) -> Expr: return binary("sub", const(0, self.dtype), self)
    def __lt__(self, o: ExprLike) -> Expr: return self._bin("lt", o)
    def __le__(self, o: ExprLike) -> Expr: return self._bin("le", o)
    def __gt__(self, o: ExprLike) -> Expr: return self._bin("gt", o)
    def __ge__(self, o: ExprLike) -> Expr: return self._bin("ge", o)
    def eq(self, o: ExprLike) -> Expr: return self._bin("eq", o)
    def ne(self, o: ExprLike) -> Expr: return self._bin("ne", o)
    def __and__(self, o: ExprLike) -> Expr: return self._bin("and", o)
    def __or__(self, o: ExprLike) -> Expr: return self._bin("or", o)
    def astype(self, dtype: str) -> Expr: return cast(dtype, self)


def _literal_dtype(x: int | float | bool, partner: str) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, float) and not is_float(partner):
        return "float32"
    return partner


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float | bool
    dtype: str

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A loop or index variable. Identity, not name, tells two variables apart."""

    name: str
    dtype: str = INDEX

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class SymVar(Var):
    """A size known only at run time (``batch``, ``seq``): a kernel reads its value, once,
    from the sizes its caller passes (see te/symbols.py). One object per name
    (``symbols.symvar``), so that equal sizes are the same variable."""


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str

    def __repr__(self) -> str:
        sym = _SYMBOLS.get(self.op)
        return f"({self.a} {sym} {self.b})" if sym else f"{self.op}({self.a}, {self.b})"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A pure math function: exp, log, sqrt, tanh, erf, sigmoid, abs, neg, floor, ..."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str

    def __repr__(self) -> str:
        return f"{self.fn}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    value: Expr
    dtype: str

    def __repr__(self) -> str:
        return f"{self.dtype}({self.value})"


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: str

    def __repr__(self) -> str:
        return f"select({self.cond}, {self.a}, {self.b})"


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """Read of ``buffer`` (a tensor at the TE level, a flat buffer after lowering)."""

    buffer: object
    indices: tuple[Expr, ...]
    dtype: str

    def __repr__(self) -> str:
        name = getattr(self.buffer, "name", "?")
        return f"{name}[{', '.join(map(repr, self.indices))}]"


@dataclass(frozen=True, eq=False)
class IterVar:
    """An axis of a compute: its variable, extent, and whether it is reduced over."""

    var: Var
    extent: Dim
    reduce: bool = False

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"{self.var.name}<{self.extent}>"


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """A commutative reduction (``sum``, ``max``, ``min``, ``prod``) of ``body`` over ``axes``."""

    combiner: str
    body: Expr
    axes: tuple[IterVar, ...]
    dtype: str

    def __repr__(self) -> str:
        return f"{self.combiner}({self.body}, over {list(self.axes)})"


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//",
            "floormod": "%", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
            "ne": "!=", "and": "&&", "or": "||"}
COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
_PY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "max": max, "min": min, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
       "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
       "ne": lambda a, b: a != b}


def binary(op: str, a: Expr, b: Expr) -> Expr:
    """Build ``op(a, b)``, folding constants and the identities index math needs."""
    dtype = "bool" if op in COMPARISONS or op in ("and", "or") else a.dtype
    ca = a.value if isinstance(a, Const) else None
    cb = b.value if isinstance(b, Const) else None
    integer = not is_float(dtype)
    if ca is not None and cb is not None:
        if op in _PY:
            return const(_PY[op](ca, cb), dtype)
        if op == "floordiv" and integer and cb != 0:
            return const(ca // cb, dtype)
        if op == "floormod" and integer and cb != 0:
            return const(ca % cb, dtype)
        if op == "div" and not integer and cb != 0:
            return const(ca / cb, dtype)
    if op == "add":
        if ca == 0:
            return b
        if cb == 0:
            return a
        recombined = _recombine_divmod(a, b)
        if recombined is not None:
            return recombined
        if isinstance(a, Binary) and a.op == "add" and isinstance(a.b, Const) and cb is not None:
            return binary("add", a.a, const(a.b.value + cb, dtype))
    elif op == "sub":
        if cb == 0:
            return a
        if integer and cb is not None:
            return binary("add", a, const(-cb, dtype))
    elif op == "mul":
        if ca == 1:
            return b
        if cb == 1:
            return a
        if (integer and cb is not None and isinstance(a, Binary) and a.op == "mul"
                and isinstance(a.b, Const)):
            return binary("mul", a.a, const(a.b.value * cb, dtype))
        if integer and cb is not None and isinstance(a, Binary) and a.op == "add":
            # Distribute constants into sums: flat indices become linear forms in which
            # fused loops' (f // c) * c + f % c pairs meet and cancel.
            return binary("add", binary("mul", a.a, b), binary("mul", a.b, b))
        if integer and (ca == 0 or cb == 0):
            return const(0, dtype)
        if ca is not None and cb is None:
            return binary("mul", b, a)
    elif op in ("floordiv", "div") and cb == 1:
        return a
    elif op == "floormod" and cb == 1 and integer:
        return const(0, dtype)
    return Binary(op, a, b, dtype)


def call(fn: str, *args: ExprLike, dtype: str | None = None) -> Expr:
    exprs = tuple(as_expr(a) for a in args)
    dtype = dtype or exprs[0].dtype
    if all(isinstance(e, Const) for e in exprs) and fn in _MATH:
        return const(_MATH[fn](*[e.value for e in exprs]), dtype)  # type: ignore[attr-defined, unused-ignore]
    return Call(fn, exprs, dtype)


_MATH: dict[str, Callable[..., Any]] = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
         "erf": math.erf, "abs": abs, "floor": math.floor, "ceil": math.ceil}


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b, as_expr(a).dtype)
    return binary("max", a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b, as_expr(a).dtype)
    return binary("min", a, b)


def cast(dtype: str, value: ExprLike) -> Expr:
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        if dtype == "bool":
            return const(bool(e.value), dtype)
        return const(float(e.value) if is_float(dtype) else int(e.value), dtype)
    return Cast(e, dtype)


def select(cond: Expr, a: ExprLike, b: ExprLike) -> Expr:
    ea = as_expr(a)
    eb = as_expr(b, ea.dtype)
    if isinstance(cond, Const):
        return ea if cond.value else eb
    return Select(cond, ea, eb, ea.dtype)


def exp(x: ExprLike) -> Expr: return call("exp", x)
def log(x: ExprLike) -> Expr: return call("log", x)
def sqrt(x: ExprLike) -> Expr: return call("sqrt", x)
def tanh(x: ExprLike) -> Expr: return call("tanh", x)
def erf(x: ExprLike) -> Expr: return call("erf", x)


def same(a: Expr, b: Expr) -> bool:
    """Structural equality of two expressions (variables by identity)."""
    if a is b:
        return True
    if isinstance(a, Const) and isinstance(b, Const):
        return a.value == b.value and a.dtype == b.dtype
    if isinstance(a, Binary) and isinstance(b, Binary):
        return a.op == b.op and same(a.a, b.a) and same(a.b, b.b)
    return False


def _recombine_divmod(a: Expr, b: Expr) -> Expr | None:
    """``(x // c) * c + x % c`` is ``x``: what fused loops produce when re-flattened."""
    if isinstance(a, Binary) and a.op == "add" and isinstance(b, Binary) and b.op == "floormod":
        inner = _recombine_divmod(a.b, b)
        if inner is not None:
            return binary("add", a.a, inner)
    if (isinstance(a, Binary) and a.op == "mul" and isinstance(a.b, Const)
            and isinstance(a.a, Binary) and a.a.op == "floordiv"
            and isinstance(b, Binary) and b.op == "floormod"
            and isinstance(a.a.b, Const) and isinstance(b.b, Const)
            and a.b.value == a.a.b.value == b.b.value and same(a.a.a, b.a)):
        return b.a
    if (isinstance(a, Binary) and a.op == "mul" and isinstance(a.a, Binary)
            and a.a.op == "floordiv" and isinstance(b, Binary) and b.op == "floormod"
            and not isinstance(b.b, Const) and _is_size(b.b) and same(a.b, b.b)
            and same(a.a.b, b.b) and same(a.a.a, b.a)):
        return b.a  # the same with a run-time size for c (a fused symbolic axis)
    return None


def _is_size(e: Expr) -> bool:
    """An expression of run-time sizes only (positive integers)."""
    if isinstance(e, SymVar):
        return True
    if isinstance(e, Const):
        return isinstance(e.value, int) and not isinstance(e.value, bool) and e.value > 0
    return isinstance(e, Binary) and e.op in ("add", "mul") and _is_size(e.a) and _is_size(e.b)
