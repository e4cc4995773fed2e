"""Statements of the tensor IR: loop nests over flat buffers.

This is what schedules lower to and what every codegen consumes. Buffers are flat and
row-major; a ``Load`` of a :class:`Buffer` carries one flat index.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..symbolic import Dim
from .expr import Expr, Var, binary

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "blockIdx.x", "blockIdx.y",
              "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(eq=False)
class Buffer:
    """A flat, row-major region of memory; ``scope`` is global, shared or local. A
    kernel's inputs and outputs may have symbolic dims; scratch and local buffers never
    do (their sizes are fixed when the kernel is built)."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str
    scope: str = "global"

    @property
    def size(self) -> Dim:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> Dim:
        return self.size * np.dtype(self.dtype).itemsize

    def __repr__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"


class Stmt:
    """Base of statements."""


@dataclass(eq=False)
class For(Stmt):
    """``for var in 0..extent``; an extent known only at run time is an expression of
    sizes (te/symbols.py), and such a loop is never unrolled or vectorized."""

    var: Var
    extent: int | Expr
    kind: str
    body: Stmt


@dataclass(eq=False)
class Store(Stmt):
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(eq=False)
class Seq(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(eq=False)
class Allocate(Stmt):
    """A scratch buffer that lives for ``body`` (registers/stack or workgroup memory)."""

    buffer: Buffer
    body: Stmt


@dataclass(eq=False)
class Barrier(Stmt):
    """Workgroup barrier on GPU targets; a no-op on the CPU."""


class Intrinsic(Stmt):
    """A statement only some codegens implement (te/matrix.py): generic passes see it
    through the buffers it reads and writes and the expressions it evaluates, and
    rebuild it with :meth:`map`; a codegen that does not know it refuses it."""

    @property
    def reads(self) -> tuple[Buffer, ...]:
        return ()

    @property
    def writes(self) -> tuple[Buffer, ...]:
        return ()

    def exprs(self) -> tuple[Expr, ...]:
        return ()

    def map(self, fn: Callable[[Expr], Expr]) -> Intrinsic:
        """This statement with ``fn`` applied to each of its expressions."""
        raise NotImplementedError


@dataclass(eq=False)
class PrimFunc:
    """A kernel: parameters are buffers (inputs, outputs, then workspace scratch).

    A kernel that uses run-time sizes has ``attrs["symbols"]``, their names sorted, and
    takes their values (int64, in that order) through one more argument after all its
    buffers (te/symbols.py)."""

    name: str
    params: list[Buffer]
    body: Stmt
    num_inputs: int
    num_outputs: int
    attrs: dict = field(default_factory=dict)

    def stored_inputs(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``arrays`` (the inputs, in their logical layout) as the kernel takes them: those
        a ``layout`` step stores in another layout transposed that way."""
        from tensorsmith.runtime.layouts import to_stored

        layouts = self.attrs.get("layouts", {})
        return [to_stored(a, **layouts[i]) if i in layouts else a for i, a in enumerate(arrays)]

    @property
    def scratch(self) -> list[Buffer]:
        return self.params[self.num_inputs + self.num_outputs:]

    def __str__(self) -> str:
        from .printer import print_func

        return print_func(self)


def all_of(conds: list[Expr]) -> Expr:
    """The conjunction of one or more conditions."""
    cond = conds[0]
    for c in conds[1:]:
        cond = binary("and", cond, c)
    return cond


def guarded(s: Stmt, conds: list[Expr]) -> Stmt:
    """``s`` run only where every condition holds (``s`` itself when there are none)."""
    return IfThenElse(all_of(conds), s) if conds else s
