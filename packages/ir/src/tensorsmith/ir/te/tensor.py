"""Tensor expressions: placeholders and compute definitions.

``compute(shape, f)`` declares *what* each element is, as an expression of its index
variables; schedules (``schedule.py``) decide *how* the loops run, and ``lower.py``
turns the pair into a loop nest. This separation is what lets the same op definition
serve every target and every tuned schedule.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..symbolic import Dim
from .expr import INDEX, Expr, ExprLike, IterVar, Load, Reduce, Var, as_expr
from .symbols import as_dim

_ids = itertools.count()


@dataclass(eq=False)
class Tensor:
    """A tensor of the expression graph; ``op`` is None for placeholders (inputs). Its
    dims may be symbolic (te/symbols.py)."""

    shape: tuple[Dim, ...]
    dtype: str
    name: str
    op: ComputeOp | None = None
    uid: int = field(default_factory=lambda: next(_ids))

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise ValueError(f"{self.name} has {len(self.shape)} dims, indexed with "
                             f"{len(indices)}")
        return Load(self, tuple(as_expr(i) for i in indices), self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.dtype}{list(self.shape)})"


@dataclass(eq=False)
class ComputeOp:
    """``out[axes] = body``; when ``body`` is a Reduce, its axes are the reduce axes."""

    axes: tuple[IterVar, ...]
    body: Expr
    tag: str = ""

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()


def placeholder(shape: Sequence[Dim], dtype: str = "float32", name: str = "x") -> Tensor:
    return Tensor(tuple(as_dim(s) for s in shape), dtype, name)


def compute(shape: Sequence[Dim], fcompute: Callable[..., ExprLike], name: str = "out",
            tag: str = "") -> Tensor:
    """Declare a tensor whose element at ``idx`` is ``fcompute(*idx)``."""
    dims = tuple(as_dim(n) for n in shape)
    axes = tuple(IterVar(Var(f"{name}_i{d}", INDEX), n) for d, n in enumerate(dims))
    body = as_expr(fcompute(*[a.var for a in axes]))
    return Tensor(dims, body.dtype, name, ComputeOp(axes, body, tag))


def reduce_axis(extent: Dim, name: str = "k") -> IterVar:
    return IterVar(Var(name, INDEX), as_dim(extent), reduce=True)


def _reduce(combiner: str, body: ExprLike, axis: IterVar | Sequence[IterVar]) -> Expr:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    b = as_expr(body)
    return Reduce(combiner, b, axes, b.dtype)


def sum(body: ExprLike, axis: IterVar | Sequence[IterVar]) -> Expr:  # noqa: A001
    return _reduce("sum", body, axis)


def max(body: ExprLike, axis: IterVar | Sequence[IterVar]) -> Expr:  # noqa: A001
    return _reduce("max", body, axis)


def min(body: ExprLike, axis: IterVar | Sequence[IterVar]) -> Expr:  # noqa: A001
    return _reduce("min", body, axis)


def prod(body: ExprLike, axis: IterVar | Sequence[IterVar]) -> Expr:
    return _reduce("prod", body, axis)
