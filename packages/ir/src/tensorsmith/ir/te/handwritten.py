"""Small builders for kernels written directly as tensor IR (ir/direct.py).

A schedule writes loop nests from tensor expressions; an op whose kernel has
data-dependent control flow writes them itself. These helpers keep such a kernel
readable: loops over dims that may be symbolic (their extents become expressions of the
run-time sizes), flat reads and writes by multi-index, loop-carried scalars in local
buffers (registers or stack on every target), and the one loop that spreads independent
work over the target's threads. Variables and buffers are told apart by identity, not
name (the codegens make the names they print unique), so names may repeat.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..symbolic import Dim
from .expr import Expr, ExprLike, Load, Var, as_expr, const
from .lower import flat_index
from .stmt import Allocate, Buffer, For, IfThenElse, Seq, Stmt, Store
from .symbols import ceil_div, extent_value, is_static

#: Invocations per workgroup of :func:`spread` on a GPU (fewer where the work is less).
GPU_THREADS = 64


def loop(extent: Dim, body: Callable[[Var], Stmt], name: str, kind: str = "serial") -> For:
    """``for v in 0..extent: body(v)``, ``extent`` an int or a symbolic dim."""
    var = Var(name)
    return For(var, extent_value(extent), kind, body(var))


def spread(extent: Dim, body: Callable[[Expr], Stmt], name: str, family: str) -> Stmt:
    """``body(i)`` for each ``i`` in 0..extent, the iterations independent of one another:
    a parallel loop on a CPU; on a GPU a dispatch whose invocations each take one (a
    workgroup of up to :data:`GPU_THREADS` threads per block of iterations, guarded).
    On a GPU the statement must be a top-level statement of the kernel's body, which
    te/dispatch.py makes a dispatch of its own."""
    if family != "gpu":
        return loop(extent, body, name, "parallel")
    threads = min(GPU_THREADS, extent) if is_static(extent) else GPU_THREADS
    threads = max(int(threads), 1)
    block, thread = Var(name + "_block"), Var(name + "_thread")
    i = block * threads + thread
    inner = body(i)
    if not (is_static(extent) and int(extent) % threads == 0):
        inner = IfThenElse(i < extent_value(extent), inner)
    return For(block, extent_value(ceil_div(extent, threads)), "blockIdx.x",
               For(thread, threads, "threadIdx.x", inner))


def at(buf: Buffer, *indices: ExprLike) -> Expr:
    """The flat, row-major index of ``buf`` at ``indices`` (one per axis)."""
    if len(indices) != len(buf.shape):
        raise ValueError(f"{buf.name} has {len(buf.shape)} axes, indexed with {len(indices)}")
    return flat_index(buf.shape, tuple(as_expr(i) for i in indices))


def load(buf: Buffer, *indices: ExprLike) -> Expr:
    """``buf[indices]`` (one index per axis; none for a scalar)."""
    return Load(buf, (at(buf, *indices),), buf.dtype)


def store(buf: Buffer, indices: Sequence[ExprLike], value: ExprLike) -> Store:
    """``buf[indices] = value``, the value cast to the buffer's dtype."""
    return Store(buf, at(buf, *indices), as_expr(value, buf.dtype).astype(buf.dtype))


class Local:
    """Loop-carried values: a small local buffer (registers or stack after the codegens'
    promotion), private to the invocation or parallel iteration that allocates it."""

    def __init__(self, name: str, dtype: str, size: int = 1) -> None:
        self.buffer = Buffer(name, (size,), dtype, "local")

    def __getitem__(self, k: int) -> Expr:
        return Load(self.buffer, (const(k),), self.buffer.dtype)

    def put(self, k: int, value: ExprLike) -> Store:
        return store(self.buffer, [k], value)

    @property
    def value(self) -> Expr:
        """The first (a scalar's only) element."""
        return self[0]

    def set(self, value: ExprLike) -> Store:
        return self.put(0, value)

    @staticmethod
    def scope(locals_: Sequence[Local], body: Stmt) -> Stmt:
        """``body`` with ``locals_`` allocated around it."""
        for s in locals_:
            body = Allocate(s.buffer, body)
        return body


def seq(*stmts: Stmt) -> Seq:
    return Seq(list(stmts))


__all__ = ["GPU_THREADS", "Local", "at", "load", "loop", "seq", "spread", "store"]
