"""A slow, obviously-correct interpreter of tensor-IR functions.

Used by the tests to check lowering and every schedule step against NumPy without any
codegen in the loop; only for small shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .expr import Binary, Call, Cast, Const, Expr, Load, Select, Var
from .stmt import Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Stmt, Store

_BIN: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b, "floordiv": lambda a, b: a // b,
        "floormod": lambda a, b: a % b, "max": max, "min": min, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "and": lambda a, b: a and b,
        "or": lambda a, b: a or b, "pow": lambda a, b: a ** b}
_CALL: dict[str, Callable[..., Any]] = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
         "erf": math.erf, "abs": abs, "iabs": abs, "floor": math.floor, "ceil": math.ceil}


def run_func(func: PrimFunc, arrays: Sequence[np.ndarray]) -> None:
    """Execute ``func`` on flat copies of ``arrays`` in place (params in order)."""
    mem = {id(b): a.reshape(-1) for b, a in zip(func.params, arrays)}
    _Interp(mem).stmt(func.body)


class _Interp:
    def __init__(self, mem: dict[int, np.ndarray]) -> None:
        self.mem = mem
        self.env: dict[int, object] = {}

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            for i in range(s.extent):
                self.env[id(s.var)] = i
                self.stmt(s.body)
        elif isinstance(s, Store):
            self.mem[id(s.buffer)][int(self.expr(s.index))] = self.expr(s.value)  # type: ignore[call-overload]
        elif isinstance(s, IfThenElse):
            if self.expr(s.cond):
                self.stmt(s.then)
            elif s.otherwise is not None:
                self.stmt(s.otherwise)
        elif isinstance(s, Allocate):
            self.mem[id(s.buffer)] = np.zeros(s.buffer.size, s.buffer.dtype)
            self.stmt(s.body)
        elif not isinstance(s, Barrier):
            raise TypeError(type(s).__name__)

    def expr(self, e: Expr) -> object:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            return self.env[id(e)]
        if isinstance(e, Load):
            return self.mem[id(e.buffer)][int(self.expr(e.indices[0]))]  # type: ignore[call-overload]
        if isinstance(e, Binary):
            return _BIN[e.op](self.expr(e.a), self.expr(e.b))
        if isinstance(e, Call):
            return _CALL[e.fn](*[self.expr(a) for a in e.args])
        if isinstance(e, Cast):
            return np.dtype(e.dtype).type(self.expr(e.value))
        if isinstance(e, Select):
            return self.expr(e.a) if self.expr(e.cond) else self.expr(e.b)
        raise TypeError(type(e).__name__)
