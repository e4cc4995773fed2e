"""Staged tiles: what the ``cache_read`` schedule step lowers to.

A tile is the box of a tensor that the loops below a stage's loop ``at`` read, copied
into a scratch buffer at the top of ``at``'s body so the innermost loops read the copy:

* ``shared``: one copy per workgroup (GPU workgroup memory). The box also spans the
  stage's ``threadIdx`` loops, and every invocation fills a strided share of it — the
  cooperative load that makes each global element be read once per workgroup instead of
  once per invocation. Barriers go before the fill (the previous iteration's readers are
  done) and after it (the copy is complete before anyone reads it).
* ``local``: one copy per invocation (registers once unrolled): each invocation copies
  the box its own loops below ``at`` read, e.g. the operand fragment of a register tile.

The box is found from the read indices: each must be an affine function of the loops
that vary over the tile, with any expression of the others (which fix the box's origin).
Elements of the box outside the tensor are filled with zero, so the readers need no
bounds checks of their own beyond the ones the stage already has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..dtypes import is_float
from .expr import Binary, Const, Expr, Load, Var, binary, const, same
from .schedule import Leaf, Stage, input_tensors
from .simplify import Interval, simplify
from .stmt import Allocate, Barrier, Buffer, For, IfThenElse, Seq, Stmt, Store
from .symbols import maybe_many
from .tensor import Tensor
from .visit import collect_loads, free_vars, rewrite, substitute

#: (tensor, indices in loop variables, key of the tile being filled) -> (value, whether
#: the indices may fall outside the tensor)
Reader = Callable[[Tensor, list[Expr], tuple[int, int]], tuple[Expr, bool]]
_UNROLL_MAX = 16


@dataclass(eq=False)
class Tile:
    """One staged copy: which tensor, where it is filled, and the box it holds."""

    tensor: Tensor
    buffer: Buffer
    at: Leaf
    depth: int  # index of ``at`` among the stage's leaves
    origin: list[Expr]  # the box's first index per dimension (in loops at or above ``at``)
    threads: list[Leaf]  # the invocations filling a shared tile together, x fastest
    varying: dict[int, int]  # id of each loop variable the box spans -> its extent
    base: list[Expr]  # per dimension, the part of the read index not in those loops
    low: list[int]  # origin - base
    step: list[int]  # the box holds every step-th index of a dimension (strided reads)
    prefetch: bool = False  # next iteration's box loaded into registers ahead of use

    def offsets(self, indices: list[Expr], bounds: dict[int, Interval]) -> list[Expr]:
        """Where element ``indices`` (loop-variable expressions) sits in the box."""
        out = []
        for d, index in enumerate(indices):
            e = simplify(index, bounds)
            fixed = {id(v) for v in free_vars(self.base[d])}
            free = {id(v): 1 for v in free_vars(e) if id(v) not in fixed}
            form = affine_form(e, {**free, **self.varying})
            g = self.step[d]
            if (form is None or any(c % g for c in form[1].values())
                    or not same(simplify(form[0], bounds), simplify(self.base[d], bounds))):
                raise ValueError(f"{self.tensor.name}[{e}] is not in the box staged at "
                                 f"{self.at.name}")
            off: Expr = const(-self.low[d] // g)
            for v, c in form[1].items():
                off = _var_of(e, v) * (c // g) + off
            out.append(simplify(off, bounds))
        return out

    @property
    def key(self) -> tuple[int, int]:
        """Nesting order: outer loops first; at one loop the shared copy comes first."""
        return (self.depth, 0 if self.buffer.scope == "shared" else 1)


def plan_tiles(st: Stage, values: dict[int, Expr], bounds: dict[int, Interval]) -> list[Tile]:
    """The tiles of ``st``'s cache_read steps, outermost first; ``values`` give each root
    axis in loop variables (unclamped), ``bounds`` each loop variable's range."""
    op = st.tensor.op
    assert op is not None
    by_name = {t.name: t for t in input_tensors(st.tensor)}
    tiles = []
    for cr in st.cache_reads:
        tensor = by_name[cr.tensor]
        at = st.leaf(cr.at)
        depth = st.leaves.index(at)
        threads = sorted((lf for lf in st.leaves if lf.kind.startswith("threadIdx")),
                         key=lambda lf: lf.kind, reverse=True)
        threads.reverse()  # x, y, z
        if cr.scope == "shared" and any(st.leaves.index(t) > depth for t in threads):
            raise ValueError(f"cache_read of {cr.tensor} into shared memory at {cr.at}: "
                             f"every threadIdx loop of {st.name} must enclose {cr.at}")
        varying = list(st.leaves[depth + 1:]) + (threads if cr.scope == "shared" else [])
        extents = {id(lf.var): lf.extent for lf in varying}
        base, low, shape, step = _box(tensor, collect_loads(op.body), values, bounds,
                                      extents, f"{st.name} at {cr.at}")
        origin = [simplify(b + lo, bounds) for b, lo in zip(base, low)]
        buf = Buffer(f"{tensor.name}.{cr.scope}", tuple(shape), tensor.dtype, cr.scope)
        tiles.append(Tile(tensor, buf, at, depth, origin,
                          threads if cr.scope == "shared" else [], extents, base, low, step,
                          cr.prefetch and maybe_many(at.extent)))
    return sorted(tiles, key=lambda t: t.key)


def _box(tensor: Tensor, loads: list[Load], values: dict[int, Expr],
         bounds: dict[int, Interval], extents: dict[int, int], where: str
         ) -> tuple[list[Expr], list[int], list[int], list[int]]:
    """Base, low offset, shape and step of the box covering every read of ``tensor``."""
    fixed: list[Expr | None] = [None] * tensor.ndim
    lo = [0] * tensor.ndim
    hi = [0] * tensor.ndim
    step = [0] * tensor.ndim
    seen = False
    for load in loads:
        if load.buffer is not tensor:
            continue
        for d, index in enumerate(load.indices):
            e = simplify(substitute(index, values), bounds)
            form = affine_form(e, extents)
            if form is None:
                raise ValueError(f"cache_read of {tensor.name} in {where}: index {e} is not "
                                 "affine in the loops below")
            base, coefs = form
            low = sum(min(0, c * (extents[v] - 1)) for v, c in coefs.items())
            high = sum(max(0, c * (extents[v] - 1)) for v, c in coefs.items())
            prev = fixed[d]
            if prev is not None and not same(simplify(prev, bounds), simplify(base, bounds)):
                raise ValueError(f"cache_read of {tensor.name} in {where}: reads at "
                                 f"different offsets {prev} and {base}")
            fixed[d] = base
            for c in coefs.values():
                step[d] = math.gcd(step[d], abs(c))
            lo[d], hi[d] = (low, high) if not seen else (min(lo[d], low), max(hi[d], high))
        seen = True
    base = [f if f is not None else const(0) for f in fixed]
    step = [g or 1 for g in step]
    return base, lo, [(h - low) // g + 1 for low, h, g in zip(lo, hi, step)], step


def _var_of(e: Expr, key: int) -> Var:
    return next(v for v in free_vars(e) if id(v) == key)


def affine_form(e: Expr, varying: dict[int, int]) -> tuple[Expr, dict[int, int]] | None:
    """``e`` as ``base + sum(c * v)`` over the varying variables, or None."""
    if not any(id(v) in varying for v in free_vars(e)):
        return e, {}
    if isinstance(e, Var):
        return const(0), {id(e): 1}
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        a, b = affine_form(e.a, varying), affine_form(e.b, varying)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "add" else -1
        coefs = dict(a[1])
        for v, c in b[1].items():
            coefs[v] = coefs.get(v, 0) + sign * c
        return binary(e.op, a[0], b[0]), {v: c for v, c in coefs.items() if c}
    if isinstance(e, Binary) and e.op == "mul":
        for x, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, Const) and isinstance(k.value, int):
                inner = affine_form(x, varying)
                if inner is None:
                    return None
                return inner[0] * k.value, {v: c * k.value for v, c in inner[1].items()}
    return None


def flat(shape: tuple[int, ...], indices: list[Expr]) -> Expr:
    index: Expr = const(0)
    for extent, i in zip(shape, indices):
        index = index * extent + i
    return index


def rewrite_reads(body: Expr, tiles: list[Tile], values: dict[int, Expr],
                  bounds: dict[int, Interval]) -> Expr:
    """Point the stage's reads of staged tensors at their innermost tile."""
    innermost = {t.tensor.uid: t for t in tiles}  # tiles are sorted outermost first

    def visit(x: Expr) -> Expr | None:
        if not isinstance(x, Load) or not isinstance(x.buffer, Tensor):
            return None
        tile = innermost.get(x.buffer.uid)
        if tile is None:
            return None
        offsets = tile.offsets([substitute(i, values) for i in x.indices], bounds)
        return Load(tile.buffer, (simplify(flat(tile.buffer.shape, offsets), bounds),), x.dtype)

    return rewrite(body, visit)


def read_through(tiles: list[Tile], tensor: Tensor, indices: list[Expr], key: tuple[int, int],
                 bounds: dict[int, Interval]) -> Expr | None:
    """A read of ``tensor`` from the innermost tile filled before the tile ``key``, if any
    (a register fragment copied out of the workgroup's tile)."""
    source = None
    for t in tiles:
        if t.tensor is tensor and t.key < key:
            source = t
    if source is None:
        return None
    offsets = source.offsets(indices, bounds)
    return Load(source.buffer, (simplify(flat(source.buffer.shape, offsets), bounds),),
                tensor.dtype)


def _shares(tile: Tile, bounds: dict[int, Interval]) -> tuple[Var, int, Expr, list[Expr]]:
    """How the workgroup splits a shared tile: each invocation copies the elements
    ``r * invocations + its id`` for ``r`` below ``rounds``; returns ``r``, ``rounds``,
    that element and its offsets in the box."""
    buf = tile.buffer
    size = buf.size
    tid: Expr = const(0)
    count = 1
    for lf in reversed(tile.threads):  # z, y, x: x varies fastest
        tid = tid * lf.extent + (lf.var if lf.extent > 1 else const(0))
        count *= lf.extent
    rounds = -(-size // count)
    r = Var(f"{buf.name}.r")
    bounds[id(r)] = (0, rounds - 1)
    element = simplify(tid if rounds == 1 else r * count + tid, bounds)
    offsets = []
    stride = size
    for d, extent in enumerate(buf.shape):
        stride //= extent
        offset = element // stride if d == 0 else (element // stride) % extent
        offsets.append(simplify(offset, bounds))
    return r, rounds, element, offsets


def _per_share(tile: Tile, r: Var, rounds: int, element: Expr, body: Stmt) -> Stmt:
    """``body`` for each of an invocation's ``rounds`` elements that the tile has."""
    if tile.buffer.size % _invocations(tile):
        body = IfThenElse(element < tile.buffer.size, body)
    if rounds == 1:
        return body
    return For(r, rounds, "unrolled" if rounds <= _UNROLL_MAX else "serial", body)


def fill(tile: Tile, read: Reader, bounds: dict[int, Interval]) -> Stmt:
    """The statement copying ``tile``'s box in; shared tiles are filled cooperatively.
    The fill's own loops join ``bounds``, so index expressions over them simplify."""
    buf = tile.buffer
    shape = buf.shape
    size = buf.size
    if buf.scope == "shared":
        r, rounds, element, offsets = _shares(tile, bounds)
        store = _guarded_copy(tile, read, offsets, buf, element, bounds)
        return _per_share(tile, r, rounds, element, store)
    loop_vars = [Var(f"{buf.name}.d{d}") for d in range(len(shape))]
    for v, extent in zip(loop_vars, shape):
        bounds[id(v)] = (0, extent - 1)
    offsets = [v if extent > 1 else const(0) for v, extent in zip(loop_vars, shape)]
    body = _guarded_copy(tile, read, offsets, buf, simplify(flat(shape, offsets), bounds),
                         bounds)
    unroll = size <= 4 * _UNROLL_MAX
    for v, extent in reversed(list(zip(loop_vars, shape))):
        if extent > 1:
            body = For(v, extent, "unrolled" if unroll else "serial", body)
    return body


def _invocations(tile: Tile) -> int:
    count = 1
    for lf in tile.threads:
        count *= lf.extent
    return count


def staging_registers(tile: Tile) -> Buffer:
    """The registers holding an invocation's share of a prefetched tile."""
    return Buffer(f"{tile.buffer.name}.next", (-(-tile.buffer.size // _invocations(tile)),),
                  tile.buffer.dtype, "local")


def prefetch_load(tile: Tile, regs: Buffer, read: Reader, bounds: dict[int, Interval],
                  iteration: Expr) -> Stmt:
    """Load this invocation's share of the tile of ``at``'s iteration ``iteration``."""
    r, rounds, element, offsets = _shares(tile, bounds)
    index = r if rounds > 1 else const(0)
    shift = {id(tile.at.var): iteration}
    load = _guarded_copy(tile, read, offsets, regs, index, bounds, shift)
    return _per_share(tile, r, rounds, element, load)


def prefetch_store(tile: Tile, regs: Buffer, bounds: dict[int, Interval]) -> Stmt:
    """Move the registers loaded by ``prefetch_load`` into the shared tile."""
    r, rounds, element, _ = _shares(tile, bounds)
    index = r if rounds > 1 else const(0)
    store = Store(tile.buffer, element, Load(regs, (index,), regs.dtype))
    return _per_share(tile, r, rounds, element, store)


def _guarded_copy(tile: Tile, read: Reader, offsets: list[Expr], dest: Buffer,
                  dest_index: Expr, bounds: dict[int, Interval],
                  shift: dict[int, Expr] | None = None) -> Stmt:
    """``dest[dest_index]`` = the tile's element at ``offsets`` (zero outside the
    tensor); ``shift`` moves loop variables (the next iteration's tile)."""
    indices = [simplify(o + off * g, bounds) for o, off, g in zip(tile.origin, offsets, tile.step)]
    if shift:
        indices = [simplify(substitute(i, shift), bounds) for i in indices]
    value, may_overrun = read(tile.tensor, indices, tile.key)
    store = Store(dest, dest_index, value)
    if not may_overrun:
        return store
    conds = []
    for i, extent in zip(indices, tile.tensor.shape):
        for cond in (i >= 0, i < extent):
            c = simplify(cond, bounds)
            if not (isinstance(c, Const) and c.value):
                conds.append(c)
    if not conds:
        return store
    cond = conds[0]
    for c in conds[1:]:
        cond = binary("and", cond, c)
    return IfThenElse(cond, store, Store(dest, dest_index, _zero(tile.tensor.dtype)))


def _zero(dtype: str) -> Expr:
    if dtype == "bool":
        return const(False)
    return const(0.0 if is_float(dtype) else 0, dtype)


@dataclass
class LoopFill:
    """What a loop that fills tiles becomes: ``body`` rewrites its body, ``loop`` the
    loop statement itself (prefetching loads the first tile before the loop)."""

    body: Callable[[Stmt], Stmt]
    loop: Callable[[Stmt], Stmt]


def wrappers(tiles: list[Tile], read: Reader, bounds: dict[int, Interval]
             ) -> dict[int, LoopFill]:
    """For each loop that fills tiles (by ``id`` of its leaf): how it changes."""
    at: dict[int, list[Tile]] = {}
    for t in tiles:
        at.setdefault(id(t.at), []).append(t)

    def make(group: list[Tile]) -> LoopFill:
        ahead = [t for t in group if t.prefetch]
        regs = {id(t): staging_registers(t) for t in ahead}

        def body(inner: Stmt) -> Stmt:
            moved = [prefetch_store(t, regs[id(t)], bounds) for t in ahead]
            shared = [fill(t, read, bounds) for t in group
                      if t.buffer.scope == "shared" and not t.prefetch]
            local = [fill(t, read, bounds) for t in group if t.buffer.scope == "local"]
            parts: list[Stmt] = [Barrier(), *moved, *shared, Barrier()] if moved or shared \
                else []
            if ahead:
                lf = ahead[0].at
                following = lf.var + 1
                loads = [prefetch_load(t, regs[id(t)], read, bounds, following) for t in ahead]
                parts.append(IfThenElse(following < lf.extent, Seq(loads)))
            out: Stmt = Seq([*parts, *local, inner])
            for t in reversed(group):
                out = Allocate(t.buffer, out)
            return out

        def loop(stmt: Stmt) -> Stmt:
            if not ahead:
                return stmt
            first = [prefetch_load(t, regs[id(t)], read, bounds, const(0)) for t in ahead]
            out: Stmt = Seq([*first, stmt])
            for t in reversed(ahead):
                out = Allocate(regs[id(t)], out)
            return out

        return LoopFill(body, loop)

    return {key: make(group) for key, group in at.items()}
