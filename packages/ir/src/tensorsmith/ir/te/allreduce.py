"""Reductions shared by the invocations of a workgroup (a reduce loop bound to
``threadIdx.x``): what a GPU schedule uses when one output needs many inputs.

Each invocation folds its strided share of the reduction into a register, stores it in
a shared array, and the workgroup halves that array until one value is left (a tree of
``log2(threads)`` steps with a barrier after each); invocation 0 writes it. Barriers
stay outside every condition, so all invocations reach each of them.
"""

from __future__ import annotations

from collections.abc import Callable

from .expr import Expr, Load, const
from .schedule import Leaf, Stage
from .stmt import Allocate, Barrier, Buffer, For, IfThenElse, Seq, Stmt, Store, guarded
from .symbols import extent_value, maybe_many


def is_cross_thread(st: Stage) -> bool:
    return any(lf.reduce and lf.kind.startswith("threadIdx") for lf in st.leaves)


def cross_thread_reduction(st: Stage, update_value: Expr, guards: list[Expr],
                           final_guards: list[Expr], out: Buffer, index: Expr,
                           combine: Callable[[Expr, Expr], Expr], identity: Expr) -> Stmt:
    """The loop nest of ``st``: ``update_value`` is the reduction body in loop variables,
    ``guards`` keep its reads in bounds, ``final_guards`` the write of ``out[index]``."""
    (thread,) = [lf for lf in st.leaves if lf.reduce and lf.kind.startswith("threadIdx")]
    pos = st.leaves.index(thread)
    outer, inner = st.leaves[:pos], st.leaves[pos + 1:]
    bad = [lf.name for lf in outer
           if maybe_many(lf.extent) and not lf.kind.startswith("blockIdx")]
    bad += [lf.name for lf in inner if not lf.reduce or lf.kind != "serial"]
    if bad:
        raise ValueError(f"a reduction over threadIdx in {st.name} needs every other loop "
                         f"above it bound to blockIdx and only serial reduce loops below; "
                         f"not so for {bad}")
    threads = thread.extent
    if threads & (threads - 1):
        raise ValueError(f"{st.name}: {threads} invocations; a workgroup reduction needs "
                         "a power of two")
    t = thread.var if threads > 1 else const(0)
    acc = Buffer(f"{st.name}.partial", (1,), out.dtype, "local")
    tree = Buffer(f"{st.name}.tree", (threads,), out.dtype, "shared")
    zero = const(0)
    update: Stmt = Store(acc, zero, combine(Load(acc, (zero,), out.dtype), update_value))
    body: list[Stmt] = [Store(acc, zero, identity),
                        _nest(inner, guarded(update, guards)),
                        Store(tree, t, Load(acc, (zero,), out.dtype)), Barrier()]
    half = threads // 2
    while half >= 1:
        pair = combine(Load(tree, (t,), out.dtype), Load(tree, (t + half,), out.dtype))
        body += [IfThenElse(t < half, Store(tree, t, pair)), Barrier()]
        half //= 2
    write = Store(out, index, Load(tree, (zero,), out.dtype))
    body.append(guarded(write, [t.eq(0), *final_guards] if threads > 1 else final_guards))
    return _nest([*outer, thread], Allocate(acc, Allocate(tree, Seq(body))))


def _nest(leaves: list[Leaf], body: Stmt) -> Stmt:
    for lf in reversed(leaves):
        body = For(lf.var, extent_value(lf.extent), lf.kind, body)
    return body
