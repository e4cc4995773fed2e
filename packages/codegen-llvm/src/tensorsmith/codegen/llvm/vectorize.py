"""Explicit SIMD for loops marked ``vectorized``.

A vectorized loop of constant extent L is emitted once with L-lane vectors: an index
that is affine in the loop variable with stride 1 becomes one contiguous vector load
or store, stride 0 a scalar broadcast, any other access per-lane loads. Bodies this
cannot express (a store whose address does not move with the variable, control flow)
return False and the caller emits an ordinary loop for LLVM's own vectorizer.

bfloat16 vectors load as 16-bit lanes and widen to float32 lanes (bfloat16.py) whichever
way they were loaded; stores narrow them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Select, Var
from tensorsmith.ir.te.stmt import For, IfThenElse, Seq, Stmt, Store
from tensorsmith.ir.te.visit import children, free_vars

from . import bfloat16
from .constants import vector

if TYPE_CHECKING:
    from .emit import KernelEmitter

PTR = ir.PointerType()


def stride_of(e: Expr, var: Var) -> int | None:
    """The constant d(e)/d(var) when ``e`` is affine in ``var``; None otherwise."""
    if isinstance(e, Var):
        return 1 if e is var else 0
    if isinstance(e, Const):
        return 0
    if isinstance(e, Binary):
        if e.op in ("add", "sub"):
            a, b = stride_of(e.a, var), stride_of(e.b, var)
            if a is None or b is None:
                return None
            return a + b if e.op == "add" else a - b
        if e.op == "mul":
            a, b = stride_of(e.a, var), stride_of(e.b, var)
            if a == 0 and b == 0:
                return 0
            if a is not None and b == 0 and isinstance(e.b, Const):
                return a * int(e.b.value)
            if b is not None and a == 0 and isinstance(e.a, Const):
                return b * int(e.a.value)
            return None
    return 0 if all(v is not var for v in free_vars(e)) else None


def _stores(s: Stmt, var: Var) -> list[Store] | None:
    """The stores of a body made of stores, sequences and branches whose condition is the
    same for every lane (a Concat's choice of input per row), or None for other bodies."""
    if isinstance(s, Store):
        return [s]
    parts: list[Stmt]
    if isinstance(s, Seq):
        parts = list(s.stmts)
    elif isinstance(s, IfThenElse) and all(v is not var for v in free_vars(s.cond)):
        parts = [s.then] if s.otherwise is None else [s.then, s.otherwise]
    else:
        return None
    out: list[Store] = []
    for x in parts:
        got = _stores(x, var)
        if got is None:
            return None
        out += got
    return out


def taken_arms(em: KernelEmitter, s: Stmt, var: Var) -> Stmt | None:
    """``s`` with each branch whose condition is fixed where it is emitted (on unrolled
    loop indices: a Winograd transform's table of stores) replaced by the arm taken;
    None where nothing is left. Only that arm is analysed and emitted. A condition on
    the vector loop's ``var`` is a lane mask, never fixed."""
    if isinstance(s, Seq):
        kept = [x for x in (taken_arms(em, y, var) for y in s.stmts) if x is not None]
        return Seq(kept) if kept else None
    if isinstance(s, IfThenElse):
        known = (em.static_value(s.cond)
                 if all(v is not var for v in free_vars(s.cond)) else None)
        if known is not None:
            arm = s.then if known else s.otherwise
            return None if arm is None else taken_arms(em, arm, var)
        then = taken_arms(em, s.then, var)
        otherwise = None if s.otherwise is None else taken_arms(em, s.otherwise, var)
        if then is None and otherwise is None:
            return None
        return IfThenElse(s.cond, then if then is not None else Seq([]), otherwise)
    return s


def try_vectorize(em: KernelEmitter, b: ir.IRBuilder, loop: For) -> bool:
    """Emit ``loop`` as SIMD; a guard around the body (a split's tail) becomes a lane mask."""
    body, cond = taken_arms(em, loop.body, loop.var), None
    if body is None:
        return True
    if isinstance(body, IfThenElse) and body.otherwise is None:
        body, cond = body.then, body.cond
    stores = _stores(body, loop.var)
    if not stores or not isinstance(loop.extent, int) or loop.extent < 2 or loop.extent > 64:
        return False
    if any(stride_of(s.index, loop.var) != 1 for s in stores):
        return False
    if sum(_gather_cost(s.value, loop.var) for s in stores) * loop.extent > GATHER_BUDGET:
        # Gathering the lanes of a loop over a flattened many-dimensional tensor took
        # LLVM seconds per kernel (64 lanes x large index arithmetic); as a plain loop it
        # compiles in a fraction of that and LLVM's vectorizer still decides on SIMD.
        return False
    VectorEmitter(em, b, loop.var, loop.extent).emit(body, cond)
    return True


GATHER_BUDGET = 8192
"""Most index-expression nodes x lanes the non-affine loads of one vector loop may cost."""


def _gather_cost(e: Expr, var: Var) -> int:
    """Index-expression nodes of the loads in ``e`` whose index is not affine in ``var``
    (div/mod of a flattened loop, a run-time index): each is emitted as one vector of
    per-lane addresses, in vector integer arithmetic that LLVM mostly scalarizes."""
    from tensorsmith.ir.te.visit import walk

    return sum(sum(1 for _ in walk(x.indices[0])) for x in walk(e)
               if isinstance(x, Load) and stride_of(x.indices[0], var) is None)


class VectorEmitter:
    def __init__(self, em: KernelEmitter, b: ir.IRBuilder, var: Var, lanes: int) -> None:
        self.em, self.b, self.var, self.lanes = em, b, var, lanes
        self._varies: dict[int, bool] = {}

    def varies(self, e: Expr) -> bool:
        """Whether ``e`` depends on the loop variable (memoized per node: ``expr`` asks
        at every level of a large expression)."""
        got = self._varies.get(id(e))
        if got is None:
            got = e is self.var if isinstance(e, Var) else any(
                self.varies(c) for c in children(e))
            self._varies[id(e)] = got
        return got

    def emit(self, body: Stmt, cond: Expr | None = None) -> None:
        b = self.b
        self.mask = None
        if cond is not None:
            from .clamped import lane_range, lanes_mask

            lanes = lane_range(self, cond)
            if lanes is not None:
                # A split's tail: the mask is a range of lanes, all of them on every
                # iteration but the last. Those take plain loads and stores; masked
                # stores are microcoded on some x86 cores (a dozen cycles each on Zen 2).
                start, stop = lanes
                full = b.icmp_unsigned("==", b.sub(stop, start),
                                       ir.Constant(ir.IntType(64), self.lanes))
                with b.if_else(full) as (whole, part):
                    with whole:
                        self.emit(body)
                    with part:
                        self.mask = lanes_mask(self, start, stop)
                        self.body(body)
                return
            m = self.expr(cond)
            if not isinstance(m.type, ir.VectorType):  # invariant guard: a plain branch
                with b.if_then(self.em._as_bool(b, m)):
                    self.emit(body)
                return
            self.mask = self.em._as_bool(b, m)
        self.body(body)

    def body(self, s: Stmt) -> None:
        """Vector stores, with lane-invariant branches (see :func:`_stores`) as branches."""
        b = self.b
        if isinstance(s, Seq):
            for x in s.stmts:
                self.body(x)
        elif isinstance(s, IfThenElse):
            taken = self.em._as_bool(b, self.em.expr(b, s.cond))
            if s.otherwise is None:
                with b.if_then(taken):
                    self.body(s.then)
            else:
                with b.if_else(taken) as (then, otherwise):
                    with then:
                        self.body(s.then)
                    with otherwise:
                        self.body(s.otherwise)
        else:
            assert isinstance(s, Store)
            self.store(s)

    def _key(self, e: Expr) -> tuple[Any, ...]:
        """A structural key of an index expression with its variables' current values
        (an unrolled loop's index is a different constant in each copy)."""
        if isinstance(e, Var):
            if e is self.var:
                return ("lane",)
            v = self.em.vars.get(id(e))
            return ("var", id(e), v.constant if isinstance(v, ir.Constant) else id(v))
        if isinstance(e, Const):
            return ("const", e.value, e.dtype)
        if isinstance(e, Load):
            return ("load", id(e.buffer), *(self._key(i) for i in e.indices))
        return (type(e).__name__, getattr(e, "op", getattr(e, "fn", e.dtype)),
                *(self._key(c) for c in children(e)))

    def store(self, s: Store) -> None:
        from . import dot4

        b = self.b
        zero = ir.Constant(ir.IntType(64), 0)
        dot = dot4.match(s, self.var)
        value = dot4.emit(self, dot) if dot is not None else None
        if value is None:
            value = self.expr(s.value)
        self.em.forget_loads(s.buffer)
        if s.buffer.dtype == "bool":  # i1 in registers, one byte in memory
            value = self.em._as_bool(b, value)
            wide = isinstance(value.type, ir.VectorType)
            value = b.zext(value, ir.VectorType(ir.IntType(8), self.lanes) if wide
                           else ir.IntType(8))
        elif s.buffer.dtype == "bfloat16":  # float32 in registers, 16 bits in memory
            value = bfloat16.narrow(b, value)
        vty = ir.VectorType(_elem(s.buffer.dtype), self.lanes)
        value = self.splat(value, vty)
        self.em.vars[id(self.var)] = zero
        base = self.em._address(b, s.buffer, s.index)
        align = _elem_bytes(s.buffer.dtype)
        # Local tiles span whole blocks: their tail lanes are scratch, so they take
        # plain stores (which keep the tile in registers) even under a mask.
        if self.mask is None or s.buffer.scope == "local":
            b.store(value, b.bitcast(base, vty.as_pointer()), align=align)
        else:
            fn = self._masked("store", vty, ir.FunctionType(
                ir.VoidType(), [vty, PTR, ir.IntType(32), self.mask.type]))
            b.call(fn, [value, base, ir.Constant(ir.IntType(32), align), self.mask])

    def _masked(self, op: str, vty: ir.VectorType, fnty: ir.FunctionType,
                lanes: int | None = None) -> ir.Function:
        elem = vty.element
        if isinstance(elem, ir.IntType):
            code = f"i{elem.width}"
        elif isinstance(elem, ir.FloatType):
            code = "f32"
        elif isinstance(elem, ir.DoubleType):
            code = "f64"
        elif isinstance(elem, ir.HalfType):
            code = "f16"
        return self.em._declare(f"llvm.masked.{op}.v{lanes or self.lanes}{code}.p0", fnty)

    def splat(self, v: ir.Value, vty: ir.VectorType) -> ir.Value:
        if isinstance(v.type, ir.VectorType):
            return v
        undef = ir.Constant(vty, ir.Undefined)
        one = self.b.insert_element(undef, v, ir.Constant(ir.IntType(32), 0))
        mask = vector(ir.VectorType(ir.IntType(32), self.lanes), [0] * self.lanes)
        return self.b.shuffle_vector(one, undef, mask)

    def expr(self, e: Expr) -> ir.Value:
        """A vector when ``e`` varies with the loop variable, else a scalar."""
        b = self.b
        if not self.varies(e):
            return self.em.expr(b, e)
        if isinstance(e, Var):
            return vector(ir.VectorType(ir.IntType(64), self.lanes), range(self.lanes))
        if isinstance(e, Load):
            v = self.load(e)
            if e.buffer.dtype == "bfloat16" and isinstance(v.type.element, ir.IntType):  # type: ignore[union-attr]
                return bfloat16.widen(b, v)  # (a per-lane load has widened already)
            return v
        if isinstance(e, Select) and all(v is not self.var for v in free_vars(e.cond)):
            known = self.em.static_value(e.cond)
            if known is not None:
                return self.expr(e.a if known else e.b)
        if isinstance(e, Select) and isinstance(e.a, Load):
            padded = self.padded_read(e)
            if padded is not None:
                return padded
        if isinstance(e, Binary | Select | Cast | Call):
            return self.per_node(e)
        return self.per_lane(e)

    def load(self, e: Load) -> ir.Value:
        """A vector load of ``e``, in the buffer's memory type (16-bit lanes for
        bfloat16), except where it fell back to per-lane scalar loads."""
        b = self.b
        buf = e.buffer
        if stride_of(e.indices[0], self.var) == 1 and buf.dtype != "bool":  # type: ignore[union-attr]
            plain = getattr(self, "mask", None) is None or buf.scope == "local"  # type: ignore[union-attr]
            key = ((id(b.block), id(buf), self.lanes, self._key(e.indices[0]))
                   if plain else None)
            if key is not None and key in self.em.loaded:
                return self.em.loaded[key]
            self.em.vars[id(self.var)] = ir.Constant(ir.IntType(64), 0)
            addr = self.em._address(b, buf, e.indices[0])  # type: ignore[arg-type]
            vty = ir.VectorType(_elem(buf.dtype), self.lanes)  # type: ignore[union-attr]
            align = _elem_bytes(buf.dtype)  # type: ignore[union-attr]
            if key is not None:
                self.em.loaded[key] = loaded = b.load(addr, typ=vty, align=align)
                return loaded
            fn = self._masked("load", vty, ir.FunctionType(
                vty, [PTR, ir.IntType(32), self.mask.type, vty]))
            return b.call(fn, [addr, ir.Constant(ir.IntType(32), align), self.mask,
                               ir.Constant(vty, ir.Undefined)])
        step = stride_of(e.indices[0], self.var)
        if step in (2, 3, 4) and buf.dtype != "bool" and buf.scope != "local":  # type: ignore[union-attr]
            return self.strided_load(e, step)
        if step is None and buf.dtype != "bool" and buf.scope != "local":  # type: ignore[union-attr]
            from .clamped import clamped_span, load_clamped

            span = clamped_span(e.indices[0], self.var)
            if span is not None:
                return load_clamped(self, e, span)
            from .offsets import lane_offsets, load_offsets

            pattern = lane_offsets(e.indices[0], self.var, self.lanes)
            if pattern is not None:
                return load_offsets(self, e, *pattern)
        return self.gather(e, step)

    def padded_read(self, e: Select) -> ir.Value | None:
        """``select(inside, buf[clamped span], fill)``, a padded input's read, as one
        masked span load (see clamped.py); None when ``e`` has another shape."""
        from .clamped import clamped_span, load_clamped, matches

        load = e.a
        assert isinstance(load, Load)
        if load.buffer.dtype in ("bool", "bfloat16") or load.buffer.scope == "local":  # type: ignore[union-attr]
            return None  # (a bfloat16 fill is a float32 value, its lanes 16 bits)
        if any(v is self.var for v in free_vars(e.b)) or not matches(e.cond, self.var):
            return None
        span = clamped_span(load.indices[0], self.var)
        if span is None:
            return None
        return load_clamped(self, load, span, e.cond, e.b)

    def strided_load(self, e: Load, step: int) -> ir.Value:
        """Every ``step``-th element (a strided convolution's input row): one masked
        contiguous load of the span (:func:`span_mask`), then a shuffle; nothing past the
        last element used is touched."""
        b = self.b
        buf = e.buffer
        wide_lanes = step * self.lanes
        elem = _elem(buf.dtype)  # type: ignore[union-attr]
        wty = ir.VectorType(elem, wide_lanes)
        self.em.vars[id(self.var)] = ir.Constant(ir.IntType(64), 0)
        addr = self.em._address(b, buf, e.indices[0])  # type: ignore[arg-type]
        if getattr(self, "mask", None) is None:
            return self.span_chunks(addr, elem, step, buf.dtype)  # type: ignore[union-attr]
        mty = ir.VectorType(ir.IntType(1), wide_lanes)
        wide_mask = span_mask(b, getattr(self, "mask", None), step, self.lanes)
        fn = self._masked("load", wty, ir.FunctionType(
            wty, [PTR, ir.IntType(32), mty, wty]), lanes=wide_lanes)
        wide = b.call(fn, [addr, ir.Constant(ir.IntType(32), _elem_bytes(buf.dtype)),  # type: ignore[union-attr]
                           wide_mask, ir.Constant(wty, ir.Undefined)])
        pick = vector(ir.VectorType(ir.IntType(32), self.lanes),
                      [j * step for j in range(self.lanes)])
        return b.shuffle_vector(wide, ir.Constant(wty, ir.Undefined), pick)

    def span_chunks(self, addr: ir.Value, elem: ir.Type, step: int, dtype: str) -> ir.Value:
        """Every ``step``-th element of the span at ``addr`` with every lane wanted: plain
        vector loads of whole registers, the last one ending at the span's last element
        (it overlaps the one before), then one shuffle. A masked load of the span (what
        a partial vector needs) cost about as much as the multiply-adds it fed in a
        stride-2 depthwise convolution on AVX2, where masked loads are not cheap."""
        b, lanes = self.b, self.lanes
        span = step * (lanes - 1) + 1
        starts = [min(i * lanes, span - lanes) for i in range(-(-span // lanes))]
        vty = ir.VectorType(elem, lanes)
        align = _elem_bytes(dtype)
        chunks = [b.load(b.gep(addr, [ir.Constant(ir.IntType(64), start)], inbounds=True,
                               source_etype=elem), typ=vty, align=align)
                  for start in starts]
        pick = []
        for j in range(lanes):
            element = j * step
            i = next(i for i in range(len(starts) - 1, -1, -1) if starts[i] <= element)
            pick.append(i * lanes + element - starts[i])
        wide = _concat(b, chunks)
        return b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), vector(
            ir.VectorType(ir.IntType(32), lanes), pick))

    def per_node(self, e: Expr) -> ir.Value:
        """Emit the node with vector operands by evaluating children first."""
        from tensorsmith.ir.te.expr import Binary as B

        children = ([e.a, e.b] if isinstance(e, B) else [e.cond, e.a, e.b]
                    if isinstance(e, Select) else [e.value] if isinstance(e, Cast)
                    else list(e.args))  # type: ignore[union-attr]
        values = [self.expr(c) for c in children]
        vecs = [v for v in values if isinstance(v.type, ir.VectorType)]
        if not vecs:
            return self.em.expr(self.b, e)
        values = [self.splat(v, ir.VectorType(v.type, self.lanes))
                  if not isinstance(v.type, ir.VectorType) else v for v in values]
        return self.em.expr_with(self.b, e, values)

    def gather(self, e: Load, step: int | None) -> ir.Value:
        """A load at per-lane addresses: the index as one vector, then a scalar load per
        lane. An affine index is its lane-0 value plus constant lane offsets; any other
        is evaluated with vector arithmetic. Emitting the whole index expression once per
        lane (what ``per_lane`` does) made compile time grow with lanes x index size: a
        gather from a 7-D tensor took 20 s to emit at 64 lanes."""
        b = self.b
        if step is not None:
            self.em.vars[id(self.var)] = ir.Constant(ir.IntType(64), 0)
            first = self.em.expr(b, e.indices[0])
            offsets = ir.Constant(ir.VectorType(ir.IntType(64), self.lanes),
                                  [step * i for i in range(self.lanes)])
            index = b.add(self.splat(first, offsets.type), offsets)
        else:
            index = self.expr(e.indices[0])
        if not isinstance(index.type, ir.VectorType):
            return self.per_lane(e)
        if getattr(self, "mask", None) is not None:  # lanes past a split's tail read [0]
            index = b.select(self.mask, index, ir.Constant(index.type, None))
        buf = e.buffer
        elem = _elem(buf.dtype)  # type: ignore[union-attr]
        base = self.em.bufs[id(buf)]
        vec: ir.Value = ir.Constant(ir.VectorType(elem, self.lanes), ir.Undefined)
        for i in range(self.lanes):
            lane = ir.Constant(ir.IntType(32), i)
            addr = b.gep(base, [b.extract_element(index, lane)], inbounds=True,
                         source_etype=elem)
            vec = b.insert_element(vec, b.load(addr, typ=elem), lane)
        if buf.dtype == "bool":  # type: ignore[union-attr]
            return b.trunc(vec, ir.VectorType(ir.IntType(1), self.lanes))
        return vec

    def per_lane(self, e: Expr) -> ir.Value:
        b = self.b
        lanes = []
        for i in range(self.lanes):
            self.em.vars[id(self.var)] = ir.Constant(ir.IntType(64), i)
            lanes.append(self.em.expr(b, e))
        vec = ir.Constant(ir.VectorType(lanes[0].type, self.lanes), ir.Undefined)
        for i, v in enumerate(lanes):
            vec = b.insert_element(vec, v, ir.Constant(ir.IntType(32), i))
        return vec


def _concat(b: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """Vectors of one type side by side, as one vector (padded with undefined lanes to a
    power-of-two count of parts, which shufflevector needs at every level)."""
    parts = list(parts)
    while len(parts) & (len(parts) - 1):
        parts.append(ir.Constant(parts[0].type, ir.Undefined))
    while len(parts) > 1:
        width = parts[0].type.count
        both = vector(ir.VectorType(ir.IntType(32), 2 * width), range(2 * width))
        parts = [b.shuffle_vector(parts[i], parts[i + 1], both) for i in range(0, len(parts), 2)]
    return parts[0]


def span_mask(b: ir.IRBuilder, mask: ir.Value | None, step: int, lanes: int) -> ir.Value:
    """The mask of a wide load of ``step * lanes`` elements of which every ``step``-th is
    lane ``j // step``: the span from the first wanted element to the last, an element
    in between read when the lanes on both sides of it are (``mask`` is a lane range, so
    it lies in the buffer). Loading the gaps too leaves every register of the span but
    the last a plain load, where masking them out made each a masked one."""
    wide = step * lanes
    span: ir.Value = ir.Constant(ir.VectorType(ir.IntType(1), wide),
                                 [int(j <= step * (lanes - 1)) for j in range(wide)])
    if mask is None:
        return span
    index = ir.VectorType(ir.IntType(32), wide)
    undef = ir.Constant(mask.type, ir.Undefined)
    before = b.shuffle_vector(mask, undef, ir.Constant(
        index, [min(j // step, lanes - 1) for j in range(wide)]))
    after = b.shuffle_vector(mask, undef, ir.Constant(
        index, [min(-(-j // step), lanes - 1) for j in range(wide)]))
    return b.and_(b.and_(before, after), span)


def _elem(dtype: str) -> ir.Type:
    from .emit import _memory_type

    return _memory_type(dtype)


def _elem_bytes(dtype: str) -> int:
    return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2,
            "bfloat16": 2, "int16": 2}.get(dtype, 1)
