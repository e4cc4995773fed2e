"""Lowering: a scheduled compute graph becomes one tensor-IR function (a loop nest per stage).

Each non-inlined stage becomes a loop nest over its leaves. Root axes are recovered from
the leaves through the split/fuse relations; where a split does not divide its axis, the
body is guarded. A reduction's initialisation is emitted just outside the outermost
reduce loop, over the spatial loops nested below it, so any loop order stays correct.
Inlined stages are substituted into their readers. Stages that are neither inlined nor
arguments become scratch buffers appended to the function's parameters: the graph's
memory plan places them in the one workspace (one of run-time size once the run's sizes
are known), so a kernel never allocates.
A stage's cache_read steps become tile copies at the top of their loops (te/tiles.py),
and its reads of those tensors read the copies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorsmith.runtime.layouts import stored_shape

from ..dtypes import is_float, itemsize
from ..symbolic import Dim
from . import allreduce, tiles
from .expr import (
    INDEX,
    Binary,
    Const,
    Expr,
    Load,
    Reduce,
    Select,
    Var,
    as_expr,
    binary,
    const,
    maximum,
    minimum,
    same,
    select,
)
from .inside import inside_tile
from .schedule import Fuse, Layout, Leaf, Schedule, Split, Stage
from .simplify import simplify
from .stmt import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    all_of,
    guarded,
)
from .symbols import divides, extent_value, is_static, kernel_symbols, maybe_many
from .tensor import Tensor
from .visit import free_vars, map_stmt_exprs, rewrite, substitute, substitute_stmt, walk


def flat_index(shape: tuple[Dim, ...], indices: tuple[Expr, ...]) -> Expr:
    """Row-major flat index; constant strides fold away in the expression builders, and
    symbolic ones are expressions of the run-time sizes."""
    index: Expr = const(0)
    for extent, i in zip(shape, indices):
        index = index * extent + i
    return index


def combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    if combiner == "sum":
        return acc + value
    if combiner == "prod":
        return acc * value
    if combiner == "max":
        return maximum(acc, value)
    if combiner == "min":
        return minimum(acc, value)
    raise ValueError(f"unknown reduction {combiner}")


def identity(combiner: str, dtype: str) -> Expr:
    """The value a reduction starts from: 0, 1, or the dtype's lowest/highest value."""
    if combiner in ("sum", "prod"):
        one = 1 if combiner == "prod" else 0
        return const(float(one) if is_float(dtype) else one, dtype)
    if is_float(dtype):
        return const(float("-inf") if combiner == "max" else float("inf"), dtype)
    lo, hi = (0, 1) if dtype == "bool" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    return const(lo if combiner == "max" else hi, dtype)


class _Lowerer:
    def __init__(self, sched: Schedule, buffers: dict[int, Buffer],
                 packed: dict[int, tuple[Buffer, Layout]] | None = None) -> None:
        self.sched = sched
        self.buffers = buffers  # tensor uid -> buffer, for every materialised tensor
        # input tensor uid -> the copy the kernel makes of it first, in its layout
        self.packed = packed or {}
        self.inlined = {st.tensor.uid: st for st in sched.stages if st.inline}
        self.bounds: dict[int, tuple[int, int]] = {}
        # tensor uid -> (indices it may be read at, value): a tile being written back.
        self.overrides: dict[int, tuple[list[Expr], Expr]] = {}

    def expr(self, e: Expr) -> Expr:
        """Replace tensor reads by flat buffer loads, substituting inlined stages."""

        def visit(x: Expr) -> Expr | None:
            if isinstance(x, Select) and isinstance(x.cond, Binary) and x.cond.op == "eq":
                # a table's index (a Winograd coefficient's ``(tile * m + i) % m == k``)
                # folds to a loop variable, which an unrolled loop makes a constant
                # (padding's range tests stay as written, for te/inside.py)
                return select(simplify(self.expr(x.cond), self.bounds), self.expr(x.a),
                              self.expr(x.b))
            if not isinstance(x, Load) or not isinstance(x.buffer, Tensor):
                return None
            t = x.buffer
            indices = tuple(self.expr(i) for i in x.indices)
            if t.uid in self.overrides:
                own, value = self.overrides[t.uid]
                # A size-1 axis read at 0 is the written element's (any other coordinate
                # there is out of bounds, and the write-back is guarded against it).
                if not all(n == 1 or same(simplify(i, self.bounds), simplify(o, self.bounds))
                           for i, o, n in zip(indices, own, t.shape)):
                    raise ValueError(f"epilogue reads {t.name} outside the tile being written")
                return value
            if t.uid in self.inlined:
                op = t.op
                assert op is not None
                body = substitute(op.body, {id(a.var): i for a, i in zip(op.axes, indices)})
                return self.expr(body)
            buf = self.buffers[t.uid]
            layout = self.sched.layouts.get(t.name) if t.op is None else None
            packed = self.packed.get(t.uid)
            if packed is not None:  # read the copy the kernel made (``pack``)
                buf, layout = packed
            if layout is not None:
                indices = stored_indices(indices, layout)
            # (a row buffer, ``compute_at``: indexed as the whole tensor, then its row)
            shape = t.shape if buf.scope == "local" else buf.shape
            return Load(buf, (simplify(flat_index(shape, indices), self.bounds),), t.dtype)

        return rewrite(e, visit)

    def stage(self, st: Stage) -> Stmt:
        """``st``'s loop nest, with the stages computed at its outermost loop first in
        that loop's body (``compute_at``)."""
        attached = [p for p in self.sched.stages if p.attached and p.attached[0] == st.name]
        if not attached:
            return self._stage(st)
        target = st.leaves[0]
        bodies = [substitute_stmt(_outer_loop(self.stage(p), p).body,
                                  {id(p.leaves[0].var): target.var}) for p in attached]
        nest = _outer_loop(self._stage(st), st)
        body: Stmt = Seq([*bodies, nest.body])
        rows = [b for b in (self.buffers[p.tensor.uid] for p in attached)
                if b.scope == "local"]
        if rows:  # one row's values, in a buffer of the loop's own
            body = _one_row(body, {id(b) for b in rows}, target.var)
            for b in rows:
                body = Allocate(b, body)
        return For(nest.var, nest.extent, nest.kind, body)

    def _stage(self, st: Stage) -> Stmt:
        op = st.tensor.op
        assert op is not None
        if st.tensorized is not None:  # statements of an intrinsic, not a loop nest
            from .matrix_lower import lower_matrix_product

            return lower_matrix_product(self, st)
        values, guards = _root_values(st)
        self.bounds = {id(lf.var): (0, lf.extent - 1) for lf in _all_leaves(st)
                       if isinstance(lf.extent, int)}
        guards = [g for g in (simplify(g, self.bounds) for g in guards)
                  if not (isinstance(g, Const) and g.value)]
        out = self.buffers.get(st.tensor.uid) or Buffer(st.name, st.tensor.shape, st.tensor.dtype)
        index = simplify(flat_index(st.tensor.shape, tuple(values[id(a.var)] for a in op.axes)),
                         self.bounds)
        body = op.body
        fills = None
        if st.cache_reads:
            fills, body = self._stage_tiles(st, values)
        if st.rfactor is not None and st.cache_at is None:
            raise ValueError(f"{st.name}: rfactor needs a cache_write (the accumulators "
                             "live in its local buffer)")
        if isinstance(body, Reduce):
            if st.cache_at is not None:
                return self._cached_reduction(st, body, values, guards, out, index, fills)
            if allreduce.is_cross_thread(st):
                return allreduce.cross_thread_reduction(
                    st, self.expr(substitute(body.body, values)), guards,
                    [g for g in guards if not _mentions_reduce(g, st)], out, index,
                    lambda a, b: combine(body.combiner, a, b),  # type: ignore[union-attr]
                    identity(body.combiner, out.dtype))
            inner = substitute(body.body, values)
            update: Stmt = Store(out, index, combine(body.combiner, Load(out, (index,),
                                 out.dtype), self.expr(inner)))
            update = guarded(update, guards)
            first = next(i for i, lf in enumerate(st.leaves) if lf.reduce)
            init_leaves = [lf for lf in st.leaves[first:] if not lf.reduce]
            spatial_guards = [g for g in guards if not _mentions_reduce(g, st)]
            init = guarded(Store(out, index, identity(body.combiner, out.dtype)), spatial_guards)
            init = _nest(init_leaves, init, vector_ok=True)
            main = _nest(st.leaves[first:], update, wrap=fills)
            return _nest(st.leaves[:first], Seq([init, main]), wrap=fills)
        value = self.expr(substitute(body, values))
        store = _branch_uniform_selects(st, out, index, value)
        return _nest(st.leaves, guarded(store, guards), wrap=fills)

    def _stage_tiles(self, st: Stage, values: dict[int, Expr]
                     ) -> tuple[dict[int, tiles.LoopFill], Expr]:
        """cache_read steps: the fills at their loops, and the body reading the copies."""
        op = st.tensor.op
        assert op is not None
        found = tiles.plan_tiles(st, values, self.bounds)

        def read(tensor: Tensor, indices: list[Expr], key: tuple[int, int]
                 ) -> tuple[Expr, bool]:
            staged = tiles.read_through(found, tensor, indices, key, self.bounds)
            if staged is not None:
                return staged, False
            return self.expr(Load(tensor, tuple(indices), tensor.dtype)), True

        body = op.body
        if isinstance(body, Reduce):
            body = Reduce(body.combiner, tiles.rewrite_reads(body.body, found, values,
                                                             self.bounds), body.axes, body.dtype)
        else:
            body = tiles.rewrite_reads(body, found, values, self.bounds)
        return tiles.wrappers(found, read, self.bounds), body

    def _cached_reduction(self, st: Stage, body: Reduce, values: dict[int, Expr],
                          guards: list[Expr], out: Buffer, index: Expr,
                          fills: dict[int, tiles.LoopFill] | None = None) -> Stmt:
        """Reduce into a local tile (registers after SROA), then write the tile back."""
        pos = st.leaves.index(st.leaf(st.cache_at or "")) + 1
        below = st.leaves[pos:]
        tile = [lf for lf in below if not lf.reduce]
        lanes = [st.leaf(st.rfactor)] if st.rfactor is not None else []
        if lanes and lanes[0] not in below:
            raise ValueError(f"{st.name}: the rfactor loop {st.rfactor} must be below the "
                             f"cache_write loop {st.cache_at}")
        local = Buffer(f"{st.name}.local", tuple(lf.extent for lf in tile + lanes) or (1,),
                       out.dtype, "local")
        if not all(is_static(d) for d in local.shape):
            raise ValueError(f"{st.name}: the loops below the cache_write loop {st.cache_at} "
                             f"run {list(map(str, local.shape))} times, known only at run "
                             "time; a register tile needs a fixed size")
        tile_index: Expr = const(0)
        for lf in tile:
            tile_index = tile_index * lf.extent + (const(0) if lf.extent == 1 else lf.var)
        local_index, first_lane = tile_index, tile_index
        if lanes:
            first_lane = tile_index * lanes[0].extent
            local_index = first_lane + lanes[0].var
        clamped, lane_guards = _root_values(st, clamp=True)
        lane_guards = [g for g in (simplify(g, self.bounds) for g in lane_guards)
                       if not (isinstance(g, Const) and g.value)]
        inner = self.expr(substitute(body.body, clamped))
        acc = Load(local, (local_index,), out.dtype)
        value = combine(body.combiner, acc, inner)
        if lanes and lane_guards:
            # A vector store to a local tile ignores the lane mask (its tail lanes are
            # scratch in a spatial tile); rfactor lanes are accumulators: keep them.
            value = select(all_of(lane_guards), value, acc)
        update = guarded(Store(local, local_index, value), lane_guards)
        full = None if lanes or fills else _full_tile(st, lane_guards, below)
        inside = None if lanes or fills else self._inside(st, body, inner, values, clamped,
                                                            below)
        spatial_guards = [g for g in guards if not _mentions_reduce(g, st)]
        start: Expr = identity(body.combiner, out.dtype)
        blocks = [lf for lf in st.leaves[:pos] if lf.reduce]
        init_guards: list[Expr] = []
        if blocks:
            # Blocked reduction (a reduce loop above the tile, e.g. K in cache-sized
            # blocks): the tile starts from the output's partial result, except in the
            # first block, and the write-back stores partial results.
            if lanes or st.epilogue is not None:
                raise ValueError(f"{st.name}: rfactor and fuse_epilogue need every reduce "
                                 f"loop below the cache_write loop {st.cache_at}")
            own = simplify(flat_index(out.shape, tuple(clamped[id(a.var)]
                                                       for a in st.tensor.op.axes)),  # type: ignore[union-attr]
                           self.bounds)
            first = all_of([binary("eq", lf.var, const(0)) for lf in blocks])
            start = select(first, start, Load(out, (own,), out.dtype))
            init_guards = [g for g in lane_guards if not _mentions_reduce(g, st)]
        init = _nest(tile + lanes, guarded(Store(local, local_index, start), init_guards))
        result: Expr = Load(local, (first_lane,), out.dtype)
        if st.epilogue is not None:
            cop = st.epilogue.tensor.op
            assert cop is not None
            cvalues = {id(a.var): values[id(b.var)] for a, b in zip(cop.axes, st.tensor.op.axes)}  # type: ignore[union-attr]
            own = [values[id(a.var)] for a in st.tensor.op.axes]  # type: ignore[union-attr]
            self.overrides[st.tensor.uid] = (own, result)
            result = self.expr(substitute(cop.body, cvalues))
            del self.overrides[st.tensor.uid]
            out = self.buffers[st.epilogue.tensor.uid]
        write: Stmt = guarded(Store(out, index, result), spatial_guards)
        if lanes:
            write = Seq([_fold_lanes(local, first_lane, lanes[0].extent, body.combiner), write])
        write = _nest(tile, write)
        reduce: Stmt = _nest(below, update, wrap=fills)
        if full is not None:
            # Unswitched: a whole tile accumulates with no lane mask (plain vector loads);
            # only the one tile over the edge pays for masked ones.
            plain = _nest(below, Store(local, local_index, value), wrap=fills)
            reduce = IfThenElse(full, plain, reduce)
        if inside is not None:
            # Unswitched: a tile that reads no padding loads without selects or clamps.
            cond, fast = inside
            reduce = IfThenElse(cond, _nest(below, Store(local, local_index, combine(
                body.combiner, acc, fast))), reduce)
        nest = Allocate(local, Seq([init, reduce, write]))
        return _nest(st.leaves[:pos], nest, wrap=fills)

    def _inside(self, st: Stage, body: Reduce, inner: Expr, values: dict[int, Expr],
                clamped: dict[int, Expr], below: list[Leaf]) -> tuple[Expr, Expr] | None:
        """The register tile's reads of inlined padding without their selects, and when
        that holds (te/inside.py); ``inner`` is the tile's body as lowered, which has a
        select wherever the unclamped one does (a product has none: no second pass)."""
        op = st.tensor.op
        assert op is not None
        if not any(isinstance(x, Select) for x in walk(inner)):
            return None
        limits = [(values[id(a.var)], a.extent) for a in (*op.axes, *op.reduce_axes)
                  if not same(values[id(a.var)], clamped[id(a.var)])]
        found = inside_tile(self.expr(substitute(body.body, values)), below, limits)
        if found is None:
            return None
        cond, fast = found
        return simplify(cond, self.bounds), fast


#: Stores a value may be split into by :func:`_branch_uniform_selects`, at most.
MAX_SELECT_BRANCHES = 256


def _branch_uniform_selects(st: Stage, out: Buffer, index: Expr, value: Expr) -> Stmt:
    """``out[index] = value`` with each ``select`` whose condition is the same for every
    lane of the stage's vector loop turned into a branch around the store.

    A vector select evaluates both sides; a Concat of n inputs is a chain of n selects on
    the row's coordinate, so every element would load from all n inputs (DenseNet's
    concatenations of up to 32 layers). Where the rows are outside the vector loop the
    condition is one scalar per row: a branch per row then loads one input per element.
    Only where the stage has a vector loop (a CPU schedule), with no loads in the
    condition, and at most :data:`MAX_SELECT_BRANCHES` stores."""
    first = next((k for k, lf in enumerate(st.leaves) if lf.kind == "vectorized"), None)
    if first is None:
        return Store(out, index, value)
    lanes = {id(lf.var) for lf in st.leaves[first:]}

    def uniform(e: Expr) -> bool:
        return (isinstance(e, Select) and not any(isinstance(x, Load) for x in walk(e.cond))
                and not any(id(v) in lanes for v in free_vars(e.cond)))

    budget = [MAX_SELECT_BRANCHES]

    def split(v: Expr) -> Stmt:
        found = next((x for x in walk(v) if uniform(x)), None)
        if found is None or budget[0] <= 1:
            return Store(out, index, v)
        budget[0] -= 1
        assert isinstance(found, Select)
        taken = rewrite(v, lambda x: found.a if x is found else None)
        other = rewrite(v, lambda x: found.b if x is found else None)
        return IfThenElse(found.cond, split(taken), split(other))

    return split(value)


def _full_tile(st: Stage, lane_guards: list[Expr], below: list[Leaf]) -> Expr | None:
    """A condition on the loops above a register tile under which none of its iterations
    needs ``lane_guards`` (each guard at the last iteration of the tile's loops), or None
    where that cannot be told so simply.

    A guard qualifies when the tile's loops enter it only as inner loops of splits and
    outside any division or modulo: it then grows with each of them, so holding at
    their last iteration it holds at all."""
    if not lane_guards:
        return None
    inner = {id(r.inner.var) for r in st.relations if isinstance(r, Split)}
    tile_vars = {id(lf.var): lf for lf in below}
    last: dict[int, Expr] = {}
    for g in lane_guards:
        for v in free_vars(g):
            lf = tile_vars.get(id(v))
            if lf is None:
                continue
            if lf.reduce or id(v) not in inner:
                return None
            last[id(v)] = const(lf.extent - 1)
        for e in walk(g):
            if isinstance(e, Binary) and e.op in ("floordiv", "floormod") and any(
                    id(v) in tile_vars for v in free_vars(e)):
                return None
    if not last:
        return None
    return all_of([simplify(substitute(g, last), {}) for g in lane_guards])


def _fold_lanes(local: Buffer, first: Expr, extent: int, combiner: str) -> Stmt:
    """Combine the ``extent`` accumulators an rfactor loop left at ``local[first:]`` into
    ``local[first]`` in halving steps: each step is one vector operation, log2 of them."""
    steps: list[Stmt] = []
    width = extent
    while width > 1:
        half = width // 2
        lane = Var(f"{local.name}.fold{width}", INDEX)
        dst = simplify(first + lane, {}) if half > 1 else first
        src = simplify(dst + (width - half), {})
        update = Store(local, dst, combine(combiner, Load(local, (dst,), local.dtype),
                                           Load(local, (src,), local.dtype)))
        steps.append(For(lane, half, "vectorized", update) if half > 1 else update)
        width -= half
    return Seq(steps)


def _one_row(body: Stmt, rows: set[int], row: Var) -> Stmt:
    """Reads and writes of the buffers ``rows`` (by ``id``) in ``body`` at their index
    within the current row: the loop variable ``row`` taken as 0."""
    zero = {id(row): const(0)}

    def in_row(buffer: Any, index: Expr) -> Expr:
        return simplify(substitute(index, zero), {}) if id(buffer) in rows else index

    def local(e: Expr) -> Expr | None:
        if isinstance(e, Load) and id(e.buffer) in rows:
            return Load(e.buffer, tuple(in_row(e.buffer, i) for i in e.indices), e.dtype)
        return None

    return map_stmt_exprs(body, lambda e: rewrite(e, local), in_row)


def _outer_loop(nest: Stmt, st: Stage) -> For:
    """The loop of ``st``'s outermost leaf, which ``nest`` must be."""
    if not isinstance(nest, For) or nest.var is not st.leaves[0].var:
        raise ValueError(f"compute_at: {st.name}'s nest does not start with its loop "
                         f"{st.leaves[0].name}")
    return nest


def _mentions_reduce(cond: Expr, st: Stage) -> bool:
    reduce_vars = {id(lf.var) for lf in _all_leaves(st) if lf.reduce}
    return any(id(v) in reduce_vars for v in free_vars(cond))


def _all_leaves(st: Stage) -> list[Leaf]:
    out = list(st.leaves)
    for r in st.relations:
        out += [r.parent, r.outer, r.inner] if isinstance(r, Split) else [r.outer, r.inner,
                                                                            r.fused]
    return out


def _root_values(st: Stage, clamp: bool = False) -> tuple[dict[int, Expr], list[Expr]]:
    """Express each root axis through the leaves; also the guards non-dividing splits need.

    With ``clamp``, a non-dividing split whose inner loop is not vectorized clamps its
    axis to the last valid index instead of guarding it: the tail iterations recompute
    the last row harmlessly (used for register tiles, whose write-back stays guarded),
    so the hot loop carries no branch. Vectorized tails keep their guard (a lane mask).
    """
    value: dict[int, Expr] = {id(lf.var): const(0) if lf.extent == 1 else lf.var
                              for lf in st.leaves}
    guards: list[Expr] = []
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            v = value[id(rel.outer.var)] * rel.factor + value[id(rel.inner.var)]
            if not divides(rel.factor, rel.parent.extent):
                # Never a reduce axis: a clamped reduction index would add the last
                # term again instead of nothing.
                if clamp and rel.inner.kind != "vectorized" and not rel.parent.reduce:
                    v = minimum(v, rel.parent.extent - 1)
                else:
                    guards.append(v < rel.parent.extent)
            value[id(rel.parent.var)] = v
        elif isinstance(rel, Fuse):
            f = value[id(rel.fused.var)]
            many = maybe_many(rel.outer.extent)
            value[id(rel.outer.var)] = f // rel.inner.extent if many else const(0)
            value[id(rel.inner.var)] = f % rel.inner.extent if many else f
    # Guards refer to leaves only after substitution of intermediate relations.
    return {id(v): value[id(lf.var)] for v, lf in _root_vars(st)}, guards


def _root_vars(st: Stage) -> list[tuple[Var, Leaf]]:
    op = st.tensor.op
    assert op is not None
    return [(a.var, st.roots[id(a.var)]) for a in (*op.axes, *op.reduce_axes)]


def _nest(leaves: list[Leaf], body: Stmt, vector_ok: bool = True,
          wrap: dict[int, tiles.LoopFill] | None = None) -> Stmt:
    """Loops over ``leaves`` around ``body``; ``wrap`` rewrites given loops (by ``id`` of
    the leaf), e.g. to fill a cache_read tile at the top of their body. A loop whose
    extent is known only at run time is neither unrolled nor vectorized."""
    for lf in reversed(leaves):
        kind = lf.kind if vector_ok or lf.kind != "vectorized" else "serial"
        if not is_static(lf.extent) and kind in ("vectorized", "unrolled"):
            kind = "serial"
        fills = wrap.get(id(lf)) if wrap is not None else None
        if fills is not None:
            body = fills.body(body)
        body = For(lf.var, extent_value(lf.extent), kind, body)
        if fills is not None:
            body = fills.loop(body)
    return body


def stored_indices(indices: tuple[Expr, ...], layout: Layout) -> tuple[Expr, ...]:
    """A read's indices into a tensor stored in ``layout``: the blocked axis becomes
    ``(i // b, i % b)`` (which simplify folds to the loop variables when the schedule
    splits that axis by ``b``), then the axes are reordered."""
    if layout.block is not None:
        axis, factor = layout.block
        i = indices[axis]
        indices = (*indices[:axis], binary("floordiv", i, const(factor)),
                   binary("floormod", i, const(factor)), *indices[axis + 1:])
    return tuple(indices[a] for a in layout.order)


#: A stage computed a row at a time inside its consumer's loop (``compute_at``) keeps
#: the row in a buffer of that loop's own (on the stack) up to this size, else in one of
#: its whole size.
ROW_BUFFER_BYTES = 64 * 1024
#: The llvm codegen emits explicit SIMD up to this many lanes.
VECTOR_LANES_MAX = 64
#: A packing copy runs its rows in parallel from this many elements on.
PACK_PARALLEL_MIN = 1 << 15


def _pack(t: Tensor, source: Buffer, layout: Layout) -> tuple[Stmt, Buffer]:
    """The loop nest copying input ``t`` (in ``source``) into a scratch buffer in
    ``layout`` (a ``pack`` step), and that buffer. A partial last block is zero-filled.
    The copy is itself a scheduled compute: rows (all axes but the last) shared by the
    threads, the last axis one vector loop."""
    from .tensor import compute

    if not all(is_static(d) for d in t.shape):
        raise ValueError(f"pack: {t.name} {list(map(str, t.shape))} has sizes known only at "
                         "run time; a packed copy is scratch, which needs a fixed size")
    shape = stored_shape(t.shape, layout.order, layout.block)

    def element(*stored: Expr) -> Expr:
        before: list[Expr] = [const(0)] * len(shape)
        for position, axis in enumerate(layout.order):
            before[axis] = stored[position]
        if layout.block is None:
            return Load(t, tuple(before), t.dtype)
        axis, factor = layout.block
        index = before[axis] * factor + before[axis + 1]
        original = [*before[:axis], index, *before[axis + 2:]]
        if t.shape[axis] % factor == 0:
            return Load(t, tuple(original), t.dtype)
        clamped = maximum(minimum(index, const(t.shape[axis] - 1)), const(0))
        read = Load(t, tuple([*before[:axis], clamped, *before[axis + 2:]]), t.dtype)
        return select(binary("lt", index, const(t.shape[axis])), read, const(0.0, t.dtype))

    copy = compute(shape, element, f"{t.name}_packed")
    s = Schedule([copy])
    st = s.stages[0]
    names = [lf.name for lf in st.leaves]
    rows = names[0]
    for name in names[1:-1]:
        rows = s.fuse(st.name, rows, name)
    if len(names) > 1:
        s.vectorize(st.name, names[-1])
        if math.prod(shape) >= PACK_PARALLEL_MIN:
            s.parallel(st.name, rows)
    buf = Buffer(copy.name, shape, t.dtype)
    return _Lowerer(s, {t.uid: source, copy.uid: buf}).stage(s.stages[0]), buf


def lower(sched: Schedule, inputs: list[Tensor], outputs: list[Tensor],
          name: str = "kernel") -> PrimFunc:
    """Lower ``sched`` into a function taking ``inputs``, then ``outputs``, then scratch."""
    buffers: dict[int, Buffer] = {}
    params: list[Buffer] = []
    layouts: dict[int, dict[str, Any]] = {}
    for t in [*inputs, *outputs]:
        shape = t.shape
        layout = sched.layouts.get(t.name) if t.op is None else None
        if layout is not None:
            shape = stored_shape(t.shape, layout.order, layout.block)
            layouts[len(params)] = layout.to_json()
        buf = Buffer(t.name, shape, t.dtype)
        buffers[t.uid] = buf
        params.append(buf)
    for st in sched.stages:
        if st.attached is not None and st.tensor not in outputs and not st.inline:
            # computed a row at a time (compute_at): a buffer of one row, if small
            row = math.prod(st.tensor.shape) // st.leaves[0].extent
            if is_static(row) and row * itemsize(st.tensor.dtype) <= ROW_BUFFER_BYTES:
                # (a vector store to a local buffer ignores its lane mask: room for the
                # widest vector's tail past the row)
                padded = -(-row // VECTOR_LANES_MAX) * VECTOR_LANES_MAX
                buffers[st.tensor.uid] = Buffer(st.tensor.name, (padded,), st.tensor.dtype,
                                                "local")
        fused_away = st.epilogue is not None and st.tensor not in outputs
        if not st.inline and not fused_away and st.tensor.uid not in buffers:
            buf = Buffer(st.tensor.name, st.tensor.shape, st.tensor.dtype)
            buffers[st.tensor.uid] = buf
            params.append(buf)
    packing: list[Stmt] = []
    packed: dict[int, tuple[Buffer, Layout]] = {}
    for t in inputs:
        layout = sched.packs.get(t.name)
        if layout is not None:
            copy, buf = _pack(t, buffers[t.uid], layout)
            params.append(buf)
            packing.append(copy)
            packed[t.uid] = (buf, layout)
    low = _Lowerer(sched, buffers, packed)
    body = Seq([*packing,
                *(low.stage(st) for st in sched.stages
                  if not st.inline and not st.merged and st.attached is None)])
    # (scratch may have sizes known only at run time, a padded batch of images: the plan
    # places such a buffer once it knows the sizes, as it does the activations)
    func = PrimFunc(name, params, body, len(inputs), len(outputs))
    if layouts:
        func.attrs["layouts"] = layouts
    symbols = kernel_symbols(body, [b.shape for b in params])
    if symbols:
        func.attrs["symbols"] = symbols
    return func


__all__ = ["as_expr", "flat_index", "lower"]
