"""A static stand-in for a compute graph with run-time sizes, for the static rules to size.

The CPU rules that build register tiles (cpu.py, cpu_tile.py, cpu_sizes.py) size
everything from fixed extents: how many rows fit the registers, which operand stays in
cache, whether a product is worth packing. For a stage whose extents are symbolic, those
rules run on a copy of the graph with every symbol at a typical value
(:data:`SIZE_HINT`); the steps they take name loops and factors only, so they replay on
the symbolic graph unchanged (cpu_dynamic.py checks that the result needs no scratch or
register tile of run-time size). Tensors, loops and variables keep their names, so a
step means the same loop in both graphs.

A build may say which sizes to expect (``build(size_hints={"batch": 4})``, ``tensorsmith
compile --dim batch=1..4``): :func:`sized_for` makes those the typical values for the
rules it runs, so a model served at small batches gets the register tiles of small
batches; a size outside them still runs, only at the speed of kernels sized for others.

A window kernel whose run-time sizes only count images is sized with them at 1 instead
(``bind(outputs, {"batch": 1})``): the static kernel of one image, whose loops the images
then extend (cpu_dynamic.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ..symbolic import Dim, evaluate, symbol
from ..te.expr import Expr, IterVar, Load, Reduce, SymVar, const
from ..te.schedule import Schedule, input_tensors
from ..te.tensor import ComputeOp, Tensor
from ..te.visit import rewrite

#: The value a rule assumes for every run-time size (``batch``, ``seq``) when it sizes a
#: stage: a product of two of them (``batch*seq`` rows) is then 4096, one alone 64.
SIZE_HINT = 64


_HINTS: ContextVar[tuple[tuple[str, int], ...]] = ContextVar("size_hints", default=())


@contextmanager
def sized_for(hints: Mapping[str, int]) -> Iterator[None]:
    """Within this block the rules size stages for ``hints`` (symbol -> typical value)
    instead of :data:`SIZE_HINT`; build opens one around lowering."""
    token = _HINTS.set(tuple(hints.items()))
    try:
        yield
    finally:
        _HINTS.reset(token)


def typical_sizes() -> Mapping[str, int]:
    """Every symbol at its hint (:func:`sized_for`), else at :data:`SIZE_HINT`."""
    return defaultdict(lambda: SIZE_HINT, dict(_HINTS.get()))


def hinted(d: Dim, sizes: Mapping[str, int] | None = None) -> int:
    """A dim's value with its symbols at their typical sizes."""
    return d if isinstance(d, int) else max(1, evaluate(d, sizes or typical_sizes()))


def has_symbols(s: Schedule) -> bool:
    """Whether any stage of ``s``, or any tensor a stage reads, has a symbolic dim."""
    for st in s.stages:
        for t in (st.tensor, *input_tensors(st.tensor)):
            if not all(isinstance(d, int) for d in t.shape):
                return True
    return False


def bind(outputs: list[Tensor], sizes: Mapping[str, int] | None = None) -> list[Tensor]:
    """``outputs`` recomputed with every symbol at its value in ``sizes`` (default: the
    typical sizes): the same names, loop variables and bodies, fixed extents."""
    sizes = sizes or typical_sizes()
    done: dict[int, Tensor] = {}

    def axis(a: IterVar) -> IterVar:
        return IterVar(a.var, hinted(a.extent, sizes), a.reduce)

    def body(e: Expr) -> Expr:
        def visit(x: Expr) -> Expr | None:
            if isinstance(x, SymVar):
                return const(hinted(symbol(x.name), sizes), x.dtype)
            if isinstance(x, Load) and isinstance(x.buffer, Tensor):
                return Load(tensor(x.buffer), tuple(rewrite(i, visit) for i in x.indices),
                            x.dtype)
            if isinstance(x, Reduce):
                return Reduce(x.combiner, rewrite(x.body, visit),
                              tuple(axis(a) for a in x.axes), x.dtype)
            return None

        return rewrite(e, visit)

    def tensor(t: Tensor) -> Tensor:
        got = done.get(t.uid)
        if got is None:
            shape = tuple(hinted(d, sizes) for d in t.shape)
            op = None if t.op is None else ComputeOp(tuple(axis(a) for a in t.op.axes),
                                                     body(t.op.body), t.op.tag)
            got = done[t.uid] = Tensor(shape, t.dtype, t.name, op)
        return got

    return [tensor(t) for t in outputs]


__all__ = ["SIZE_HINT", "bind", "has_symbols", "hinted", "sized_for", "typical_sizes"]
