"""A slow, obviously-correct interpreter of tensor-IR functions.

Used by the tests to check lowering and every schedule step against NumPy without any
codegen in the loop; only for small shapes.

GPU semantics are modelled where they matter for correctness: the invocations of a
workgroup (the ``threadIdx`` loops nested under each other) run in lockstep between
``Barrier`` statements, share their ``shared`` buffers and each own their ``local``
ones. A barrier that some invocations of a workgroup skip is an error, as it is on a
GPU (undefined behaviour there, usually a hang).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from . import matrix
from .expr import Binary, Call, Cast, Const, Expr, Load, Select, SymVar, Var
from .stmt import Allocate, Barrier, For, IfThenElse, Intrinsic, PrimFunc, Seq, Stmt, Store
from .visit import walk_stmts

#: Python semantics of each binary op (floor division and modulo, as the IR defines them).
BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b, "floordiv": lambda a, b: a // b,
        "floormod": lambda a, b: a % b, "max": max, "min": min, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "and": lambda a, b: a and b,
        "or": lambda a, b: a or b, "pow": lambda a, b: a ** b}
_CALL: dict[str, Callable[..., Any]] = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
         "erf": math.erf, "abs": abs, "iabs": abs, "floor": math.floor, "ceil": math.ceil}


def run_func(func: PrimFunc, arrays: Sequence[np.ndarray],
             sizes: Mapping[str, int] | None = None) -> None:
    """Execute ``func`` on flat copies of ``arrays`` in place (params in order), with the
    values of its run-time sizes (``func.attrs["symbols"]``) from ``sizes``."""
    mem = {id(b): a.reshape(-1) for b, a in zip(func.params, arrays)}
    missing = [n for n in func.attrs.get("symbols", ()) if n not in (sizes or {})]
    if missing:
        raise KeyError(f"{func.name} needs the sizes {missing}")
    _Interp(mem, {}, None, dict(sizes or {})).stmt(func.body)


class _Interp:
    """One invocation's view: variables, and memory (global, its workgroup's, its own)."""

    def __init__(self, mem: dict[int, np.ndarray], env: dict[int, object],
                 shared: dict[int, np.ndarray] | None, sizes: dict[str, int] | None = None
                 ) -> None:
        self.mem = mem
        self.env = env
        self.sizes = sizes or {}
        self.shared = shared  # the workgroup's shared buffers, None outside a workgroup

    def stmt(self, s: Stmt) -> None:
        for _ in self.steps(s):
            pass  # outside a workgroup a barrier has nothing to wait for

    def steps(self, s: Stmt) -> Iterator[None]:
        """Run ``s``, yielding at every barrier."""
        if isinstance(s, Seq):
            for x in s.stmts:
                yield from self.steps(x)
        elif isinstance(s, For):
            if s.kind.startswith("threadIdx") and self.shared is None and _has_barrier(s):
                self._workgroup(s)
                return
            extent = s.extent if isinstance(s.extent, int) else int(self.expr(s.extent))  # type: ignore[call-overload]
            for i in range(extent):
                self.env[id(s.var)] = i
                yield from self.steps(s.body)
        elif isinstance(s, Store):
            self.mem[id(s.buffer)][int(self.expr(s.index))] = self.expr(s.value)  # type: ignore[call-overload]
        elif isinstance(s, IfThenElse):
            if self.expr(s.cond):
                yield from self.steps(s.then)
            elif s.otherwise is not None:
                yield from self.steps(s.otherwise)
        elif isinstance(s, Allocate):
            self._allocate(s)
            yield from self.steps(s.body)
        elif isinstance(s, Barrier):
            yield
        elif isinstance(s, Intrinsic):
            matrix.evaluate(s, self.mem, self.expr)
        else:
            raise TypeError(type(s).__name__)

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope == "shared" and self.shared is not None:
            if id(buf) not in self.shared:  # one copy per workgroup, made by its first user
                self.shared[id(buf)] = _zeros(buf)
            self.mem[id(buf)] = self.shared[id(buf)]
        else:
            self.mem[id(buf)] = _zeros(buf)

    def _workgroup(self, s: For) -> None:
        """Run the invocations of one workgroup in lockstep from barrier to barrier."""
        loops: list[For] = []
        body: Stmt = s
        while isinstance(body, For) and body.kind.startswith("threadIdx"):
            loops.append(body)
            body = body.body
        shared: dict[int, np.ndarray] = {}
        invocations = []
        for ids in itertools.product(*[range(lp.extent) for lp in loops]):
            env = dict(self.env)
            env.update({id(lp.var): i for lp, i in zip(loops, ids)})
            invocations.append(_Interp(dict(self.mem), env, shared, self.sizes).steps(body))
        while invocations:
            running = [inv for inv in invocations if next(inv, StopIteration) is None]
            if running and len(running) != len(invocations):
                raise RuntimeError("a barrier is reached by only some invocations of a "
                                   "workgroup")
            invocations = running

    def expr(self, e: Expr) -> object:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, SymVar):
            return self.sizes[e.name]
        if isinstance(e, Var):
            return self.env[id(e)]
        if isinstance(e, Load):
            return self.mem[id(e.buffer)][int(self.expr(e.indices[0]))]  # type: ignore[call-overload]
        if isinstance(e, Binary):
            return BINARY_OPS[e.op](self.expr(e.a), self.expr(e.b))
        if isinstance(e, Call):
            return _CALL[e.fn](*[self.expr(a) for a in e.args])
        if isinstance(e, Cast):
            return np.dtype(e.dtype).type(self.expr(e.value))
        if isinstance(e, Select):
            return self.expr(e.a) if self.expr(e.cond) else self.expr(e.b)
        raise TypeError(type(e).__name__)


def _zeros(buf: Any) -> np.ndarray:
    special = matrix.zeros(buf)
    return special if special is not None else np.zeros(buf.size, buf.dtype)


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(x, Barrier) for x in walk_stmts(s))
