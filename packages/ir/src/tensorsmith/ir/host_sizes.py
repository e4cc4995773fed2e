"""Sizes computed on the host at run time from the *values* of small inputs.

A Reshape whose target shape is a graph input, a ReduceSum whose axes are one, a TopK
whose ``k`` is one: the shape of the result is decided by numbers the model only gets
when it runs. Such a number never needs a kernel: the executor reads it from the input
(a few int64s in host memory), computes the sizes, and only then sizes the buffers and
launches anything. This module is the compile-time half of that:

* :class:`HostExpr` is a value the host computes: element ``k`` of an input
  (:func:`input_value`), sizes, and arithmetic, comparisons and choices on them. Its
  text is a small expression language, Python syntax, that every executor evaluates the
  same way (runtime/shapes.py in Python, codegen-llvm's plan_c.py as C):
  ints and floats, symbol names, ``+ - * / // %``, comparisons, ``a if c else b``,
  ``max``, ``min``, ``floor``, ``ceil`` and ``value("input", k)``.
* :class:`ComputedSize` gives such an expression a symbol's name. From there on the
  size is a symbol like ``batch`` (``symbolic.Sym``): shape inference, lowering and the
  memory plan treat it alike. Every symbol is at least 1, so the run refuses a computed
  size below 1 with the node that made it, rather than break what the compiler proved;
  a converter that needs a count that may be 0 (an offset) names ``count + 1``.

A converter that cannot handle a run-time value turns it into a Python bool or int,
which raises :class:`RunTimeValueError` naming the inputs; the ONNX backend then falls
back to specializing on their values.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from .symbolic import Sym, SymbolicDimError

__all__ = ["ComputedSize", "HostExpr", "RunTimeValueError", "ceil", "floor", "host_max",
           "host_min", "input_value", "lift", "where"]


class RunTimeValueError(SymbolicDimError):
    """A decision at compile time needs a value that the inputs ``inputs`` give only at
    run time."""

    def __init__(self, message: str, inputs: frozenset[str]) -> None:
        super().__init__(message)
        self.inputs = inputs


@dataclass(frozen=True)
class ComputedSize:
    """Symbol ``name`` is ``expr`` (a HostExpr's text), computed before each run;
    ``reason`` names the node that needs it, for the run's refusal of a size below 1."""

    name: str
    expr: str
    reason: str


Operand = Any  # int, float, bool, Sym or HostExpr


class HostExpr:
    """A number the executor computes on the host before a run (see the module docstring).
    Arithmetic and comparisons build bigger ones; ``bool()`` and ``int()`` raise."""

    __slots__ = ("inputs", "is_float", "text")
    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __init__(self, text: str, inputs: frozenset[str] = frozenset(),
                 is_float: bool = False) -> None:
        self.text, self.inputs, self.is_float = text, inputs, is_float

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"HostExpr({self.text})"

    def __bool__(self) -> bool:
        raise RunTimeValueError(f"'{self.text}' is decided only by the values of "
                                f"{_names(self.inputs)}, known at run time", self.inputs)

    def __int__(self) -> int:
        raise RunTimeValueError(f"a number known when the model is compiled is needed, but "
                                f"it is '{self.text}', from the values of "
                                f"{_names(self.inputs)} known only at run time", self.inputs)

    __index__ = __int__

    def __float__(self) -> float:
        return float(int(self))

    # arithmetic ---------------------------------------------------------------------
    def __add__(self, o: Operand) -> HostExpr:
        return _binary("+", self, o)

    def __radd__(self, o: Operand) -> HostExpr:
        return _binary("+", o, self)

    def __sub__(self, o: Operand) -> HostExpr:
        return _binary("-", self, o)

    def __rsub__(self, o: Operand) -> HostExpr:
        return _binary("-", o, self)

    def __mul__(self, o: Operand) -> HostExpr:
        return _binary("*", self, o)

    def __rmul__(self, o: Operand) -> HostExpr:
        return _binary("*", o, self)

    def __floordiv__(self, o: Operand) -> HostExpr:
        return _binary("//", self, o)

    def __rfloordiv__(self, o: Operand) -> HostExpr:
        return _binary("//", o, self)

    def __mod__(self, o: Operand) -> HostExpr:
        return _binary("%", self, o)

    def __rmod__(self, o: Operand) -> HostExpr:
        return _binary("%", o, self)

    def __truediv__(self, o: Operand) -> HostExpr:
        return _binary("/", self, o, is_float=True)

    def __rtruediv__(self, o: Operand) -> HostExpr:
        return _binary("/", o, self, is_float=True)

    def __neg__(self) -> HostExpr:
        return HostExpr(f"(-{self.text})", self.inputs, self.is_float)

    # comparisons: 0 or 1 --------------------------------------------------------------
    def __eq__(self, o: object) -> HostExpr:  # type: ignore[override]
        return _binary("==", self, o, is_float=False)

    def __ne__(self, o: object) -> HostExpr:  # type: ignore[override]
        return _binary("!=", self, o, is_float=False)

    def __lt__(self, o: Operand) -> HostExpr:
        return _binary("<", self, o, is_float=False)

    def __le__(self, o: Operand) -> HostExpr:
        return _binary("<=", self, o, is_float=False)

    def __gt__(self, o: Operand) -> HostExpr:
        return _binary(">", self, o, is_float=False)

    def __ge__(self, o: Operand) -> HostExpr:
        return _binary(">=", self, o, is_float=False)


def lift(x: Operand) -> HostExpr:
    """``x`` as a HostExpr (a Python number, a size, or one already)."""
    if isinstance(x, HostExpr):
        return x
    if isinstance(x, bool) or (hasattr(x, "dtype") and x.dtype.kind == "b"):
        return HostExpr(str(int(bool(x))))
    if isinstance(x, Sym):
        return HostExpr(f"({x})")
    if isinstance(x, int) or (hasattr(x, "dtype") and x.dtype.kind in "iu"):
        return HostExpr(str(int(x)) if int(x) >= 0 else f"({int(x)})")
    if isinstance(x, float) or (hasattr(x, "dtype") and x.dtype.kind == "f"):
        return HostExpr(repr(float(x)) if float(x) >= 0 else f"({float(x)!r})",
                        is_float=True)
    raise TypeError(f"{x!r} is not a number the host computes with")


def _names(inputs: frozenset[str]) -> str:
    listed = ", ".join(f"'{n}'" for n in sorted(inputs))
    return f"input{'s' if len(inputs) > 1 else ''} {listed}" if inputs else "the inputs"


def _binary(op: str, a: Operand, b: Operand, is_float: bool | None = None) -> HostExpr:
    x, y = lift(a), lift(b)
    floats = x.is_float or y.is_float
    if op in ("//", "%") and floats:
        raise TypeError(f"'{op}' of a float ('{x}' {op} '{y}') is not a size operation")
    return HostExpr(f"({x.text} {op} {y.text})", x.inputs | y.inputs,
                    floats if is_float is None else is_float)


def input_value(name: str, index: int, is_float: bool = False) -> HostExpr:
    """Element ``index`` (row-major) of graph input ``name``, as the run gives it."""
    return HostExpr(f"value({name!r}, {int(index)})", frozenset([name]), is_float)


def where(cond: Operand, a: Operand, b: Operand) -> Operand:
    """``a if cond else b``: decided now where ``cond`` is a Python bool."""
    if not isinstance(cond, HostExpr):
        return a if bool(cond) else b
    x, y = lift(a), lift(b)
    return HostExpr(f"({x.text} if {cond.text} else {y.text})",
                    cond.inputs | x.inputs | y.inputs, x.is_float or y.is_float)


def host_max(a: Operand, b: Operand) -> Operand:
    if not isinstance(a, HostExpr) and not isinstance(b, HostExpr):
        return a if a >= b else b
    return _call("max", a, b)


def host_min(a: Operand, b: Operand) -> Operand:
    if not isinstance(a, HostExpr) and not isinstance(b, HostExpr):
        return a if a <= b else b
    return _call("min", a, b)


def floor(x: Operand) -> Operand:
    """The largest int <= x (an int already stays one)."""
    if isinstance(x, HostExpr):
        return _call("floor", x) if x.is_float else x
    return math.floor(x)


def ceil(x: Operand) -> Operand:
    if isinstance(x, HostExpr):
        return _call("ceil", x) if x.is_float else x
    return math.ceil(x)


def _call(fn: str, *args: Operand) -> HostExpr:
    xs = [lift(a) for a in args]
    inputs = frozenset().union(*(x.inputs for x in xs))
    is_float = fn in ("max", "min") and any(x.is_float for x in xs)
    return HostExpr(f"{fn}({', '.join(x.text for x in xs)})", inputs, is_float)


def expr_symbols(text: str) -> set[str]:
    """The symbols a HostExpr's text names (not the inputs it reads)."""
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)
            and n.id not in ("value", "max", "min", "floor", "ceil")}


def is_run_time(x: object) -> bool:
    """Whether ``x`` is a HostExpr (a number known only when the model runs)."""
    return isinstance(x, HostExpr)

