"""Tensor IR -> LLVM IR (llvmlite), one LLVM function per kernel.

Every kernel has the signature ``void name(void **args)``: ``args[i]`` is the i-th
buffer parameter. A kernel that uses run-time sizes (``attrs["symbols"]``) takes one
more: ``args[len(params)]`` points to their int64 values, in that order, which it loads
once on entry. Parallel loops are outlined into ``void body(void *closure, i64 begin,
i64 end)`` and handed to ``tsm_parallel_for`` of the thread pool linked into the
artifact; the closure carries ``args`` (whence the body loads the sizes again) and the
enclosing loop variables.

bfloat16 is stored as 16 bits and computed in float32 registers (bfloat16.py): loads
widen, stores and casts round.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from tensorsmith.ir.dtypes import is_float
from tensorsmith.ir.te.evaluate import BINARY_OPS
from tensorsmith.ir.te.expr import (
    COMPARISONS,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    Load,
    Select,
    SymVar,
    Var,
)
from tensorsmith.ir.te.stmt import (
    Allocate,
    Barrier,
    Buffer,
    For,
    IfThenElse,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)
from tensorsmith.ir.te.visit import children, free_vars, stmt_exprs, walk, walk_stmts

from . import bfloat16
from .constants import constant
from .fastmath import INLINE_F32
from .vectorize import try_vectorize

PTR = ir.PointerType()
I64 = ir.IntType(64)
I32 = ir.IntType(32)
I8 = ir.IntType(8)
I1 = ir.IntType(1)
VOID = ir.VoidType()
FAST = ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc")
# Integer ops ``static_value`` folds, with the interpreter's semantics (BINARY_OPS).
_STATIC_OPS = frozenset({"add", "sub", "mul", "floordiv", "floormod", "eq", "ne", "lt", "le",
                         "gt", "ge", "and", "or"})
_NO_NAN_FLAGS = ("contract", "reassoc", "nsz", "arcp", "afn")
#: Calls that round their argument to an integer: a quotient they take is divided
#: exactly (see :func:`rounded_quotients`).
_ROUNDING = frozenset({"round", "floor", "ceil", "trunc"})

# (bfloat16: the register type; memory holds 16 bits, see _memory_type)
_LLVM_TYPES = {"float32": ir.FloatType(), "float64": ir.DoubleType(), "float16": ir.HalfType(),
               "bfloat16": ir.FloatType(),
               "int64": I64, "int32": I32, "int16": ir.IntType(16), "int8": I8, "uint8": I8,
               "uint16": ir.IntType(16), "uint32": I32, "uint64": I64, "bool": I1}
_INTRINSICS = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs",
               "floor": "llvm.floor", "ceil": "llvm.ceil", "pow": "llvm.pow", "sin": "llvm.sin",
               "cos": "llvm.cos", "round": "llvm.roundeven", "trunc": "llvm.trunc"}
_LIBM = {"tanh": "tanh", "erf": "erf", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
         "atanh": "atanh", "fmod": "fmod"}
_FCMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def llvm_type(dtype: str) -> ir.Type:
    return _LLVM_TYPES[dtype]


def _fold_index(op: str, x: ir.Value, y: ir.Value) -> ir.Value | None:
    """``x op y`` for integer scalars where the result needs no instruction: both
    constant (an unrolled loop's index times a stride), or adding zero and multiplying
    by one. Unrolled tables emit thousands of such index terms; LLVM would fold them
    too, but only after the emitter has spent its time writing them out."""
    if op not in ("add", "sub", "mul") or not isinstance(x.type, ir.IntType):
        return None
    cx = x.constant if isinstance(x, ir.Constant) and isinstance(x.constant, int) else None
    cy = y.constant if isinstance(y, ir.Constant) and isinstance(y.constant, int) else None
    if cx is not None and cy is not None and x.type == y.type and x.type.width == 64:
        value = cx + cy if op == "add" else cx - cy if op == "sub" else cx * cy
        return ir.Constant(x.type, value)
    if (op in ("add", "sub") and cy == 0) or (op == "mul" and cy == 1):
        return x
    if (op == "add" and cx == 0) or (op == "mul" and cx == 1):
        return y
    return None


def _memory_type(dtype: str) -> ir.Type:
    if dtype == "bfloat16":
        return ir.IntType(16)
    return I8 if dtype == "bool" else llvm_type(dtype)


def _arith(dtype: str) -> str:
    """The dtype a value of ``dtype`` is computed in: bfloat16 in float32."""
    return "float32" if dtype == "bfloat16" else dtype


def _unsigned(dtype: str) -> bool:
    return dtype in ("uint8", "uint16", "uint32", "uint64", "bool")


class KernelEmitter:
    """Emits one PrimFunc into an LLVM module."""

    def __init__(self, module: ir.Module, func: PrimFunc, fast_math: bool = True,
                 features: frozenset[str] = frozenset(),
                 rounded: frozenset[int] | None = None) -> None:
        self.module = module
        self.func = func
        # the target's instruction set extensions (LLVM's names) that emission may use
        # directly: integer dot products (dot4.py); empty: portable IR only
        self.features = features
        self.flags = _NO_NAN_FLAGS if fast_math else ()
        # the divisions emitted exactly (an outlined loop body shares its kernel's)
        self.rounded = rounded_quotients(func.body) if rounded is None else rounded
        self.vars: dict[int, ir.Value] = {}
        self.sizes: dict[str, ir.Value] = {}  # run-time size name -> its value
        self.bufs: dict[int, ir.Value] = {}
        self.outlined = 0
        # contiguous vectors already loaded, by (basic block, buffer, lanes, index): an
        # unrolled table reads each input vector for many entries (a Winograd F(4x4)
        # input transform: 484 reads of 36 vectors); each is emitted once per block
        # (vectorize.py), until a store to its buffer
        self.loaded: dict[tuple[Any, ...], ir.Value] = {}

    # -- functions -----------------------------------------------------------------
    def emit(self) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), self.func.name)
        fn.args[0].name = "args"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self._bind_buffers(b, fn.args[0])
        self._bind_sizes(b, fn.args[0])
        self.stmt(b, self.func.body)
        b.ret_void()
        return fn

    def _bind_buffers(self, b: ir.IRBuilder, args: ir.Value) -> None:
        for buf, ptr in zip(self.func.params, self._load_buffers(b, args), strict=True):
            self.bufs[id(buf)] = ptr
        self.args_value = args

    def _bind_sizes(self, b: ir.IRBuilder, args: ir.Value) -> None:
        """Load the run-time sizes the kernel uses from the int64 array that
        ``args[len(params)]`` points to (the kernel ABI's one extra argument)."""
        names = self.func.attrs.get("symbols", ())
        if not names:
            return
        slot = b.gep(args, [ir.Constant(I64, len(self.func.params))], inbounds=True,
                     source_etype=PTR)
        values = b.load(slot, name="sizes", typ=PTR)
        for i, name in enumerate(names):
            at = b.gep(values, [ir.Constant(I64, i)], inbounds=True, source_etype=I64)
            self.sizes[name] = b.load(at, name=_ident(name), typ=I64)

    def extent(self, b: ir.IRBuilder, extent: int | Expr) -> ir.Value:
        """A loop's extent: a constant, or the value of an expression of sizes."""
        return ir.Constant(I64, extent) if isinstance(extent, int) else self.expr(b, extent)

    def forget_loads(self, buf: Buffer) -> None:
        """A store to ``buf``: vectors loaded from it earlier may be stale."""
        if self.loaded:
            self.loaded = {k: v for k, v in self.loaded.items() if k[1] != id(buf)}

    def _load_buffers(self, b: ir.IRBuilder, args: ir.Value) -> list[ir.Value]:
        """The buffer pointers of ``args`` (``void **``), one per param."""
        return [b.load(b.gep(args, [ir.Constant(I64, i)], inbounds=True, source_etype=PTR),
                       name=_ident(buf.name), typ=PTR)
                for i, buf in enumerate(self.func.params)]

    # -- statements ----------------------------------------------------------------
    def stmt(self, b: ir.IRBuilder, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(b, x)
        elif isinstance(s, For):
            if s.kind == "parallel":
                self._parallel(b, s)
            elif s.kind == "unrolled" and isinstance(s.extent, int) and s.extent <= 64:
                saved = self.vars.get(id(s.var))
                for i in range(s.extent):
                    self.vars[id(s.var)] = ir.Constant(I64, i)
                    self.stmt(b, s.body)
                if saved is not None:
                    self.vars[id(s.var)] = saved
            elif s.kind == "vectorized" and try_vectorize(self, b, s):
                pass
            else:
                self._loop(b, s.var, ir.Constant(I64, 0), self.extent(b, s.extent), s.body)
        elif isinstance(s, Store):
            self._store(b, s)
        elif isinstance(s, IfThenElse):
            known = self.static_value(s.cond)
            if known is not None:  # a branch on unrolled loop indices: only the arm taken
                arm = s.then if known else s.otherwise
                if arm is not None:
                    self.stmt(b, arm)
                return
            cond = self._as_bool(b, self.expr(b, s.cond))
            if s.otherwise is None:
                with b.if_then(cond):
                    self.stmt(b, s.then)
            else:
                with b.if_else(cond) as (then, otherwise):
                    with then:
                        self.stmt(b, s.then)
                    with otherwise:
                        self.stmt(b, s.otherwise)
        elif isinstance(s, Allocate):
            ty = _memory_type(s.buffer.dtype)
            with b.goto_entry_block():
                ptr = b.alloca(ty, size=s.buffer.size, name=_ident(s.buffer.name))
            self.bufs[id(s.buffer)] = ptr
            self.stmt(b, s.body)
        elif isinstance(s, Barrier):
            pass
        else:
            raise TypeError(f"cannot emit {type(s).__name__}")

    def _loop(self, b: ir.IRBuilder, var: Var, start: ir.Value, end: ir.Value,
              body: Stmt) -> None:
        fn = b.function
        pre = b.block
        header = fn.append_basic_block(f"{_ident(var.name)}.header")
        loop = fn.append_basic_block(f"{_ident(var.name)}.body")
        done = fn.append_basic_block(f"{_ident(var.name)}.done")
        b.branch(header)
        b.position_at_end(header)
        phi = b.phi(I64, name=_ident(var.name))
        phi.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", phi, end), loop, done)
        b.position_at_end(loop)
        saved = self.vars.get(id(var))
        self.vars[id(var)] = phi
        self.stmt(b, body)
        nxt = b.add(phi, ir.Constant(I64, 1), flags=("nsw",))
        phi.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)
        if saved is not None:
            self.vars[id(var)] = saved

    def _parallel(self, b: ir.IRBuilder, s: For) -> None:
        """Outline the loop body; the thread pool calls it on chunks of [0, extent)."""
        self.loaded.clear()  # the body writes buffers behind this block's loads
        captured = [v for v in _stmt_free_vars(s.body) if v is not s.var and id(v) in self.vars]
        self.outlined += 1
        name = f"{self.func.name}.par{self.outlined}"
        body_fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
        body_fn.linkage = "internal"
        # Pack args pointer + captured loop variables into an i64 array on the stack.
        n = 1 + len(captured)
        with b.goto_entry_block():
            closure = b.alloca(I64, size=n, name="closure")
        b.store(b.ptrtoint(self.args_value, I64), closure)
        for i, v in enumerate(captured, start=1):
            b.store(self.vars[id(v)], b.gep(closure, [ir.Constant(I64, i)], source_etype=I64))
        pool = self._declare("tsm_parallel_for", ir.FunctionType(VOID, [PTR, PTR, I64]))
        b.call(pool, [body_fn, closure, self.extent(b, s.extent)])

        # The body proper takes every buffer as a ``noalias`` argument: the step's
        # buffers never overlap (the memory plan gives each live tensor its own range),
        # and once it is inlined LLVM may reuse a loaded value across stores to other
        # buffers (a Winograd input transform reads each patch element once, not once
        # per output). The outlined entry only unpacks the closure and calls it.
        params = self.func.params
        impl = ir.Function(self.module, ir.FunctionType(
            VOID, [PTR] * (1 + len(params)) + [I64] * (2 + len(captured))), name + ".body")
        impl.linkage = "internal"
        impl.attributes.add("alwaysinline")
        for arg in impl.args[1:1 + len(params)]:
            arg.add_attribute("noalias")
        ib = ir.IRBuilder(body_fn.append_basic_block("entry"))
        cl, begin, end = body_fn.args
        args = ib.inttoptr(ib.load(cl, typ=I64), PTR)
        pointers = self._load_buffers(ib, args)
        values = [ib.load(ib.gep(cl, [ir.Constant(I64, i)], source_etype=I64), typ=I64)
                  for i in range(1, 1 + len(captured))]
        ib.call(impl, [args, *pointers, begin, end, *values])
        ib.ret_void()

        inner = KernelEmitter(self.module, self.func, fast_math=bool(self.flags),
                              features=self.features, rounded=self.rounded)
        inner.outlined = self.outlined * 100
        jb = ir.IRBuilder(impl.append_basic_block("entry"))
        inner.args_value = impl.args[0]  # for a parallel loop nested in this one
        inner._bind_sizes(jb, impl.args[0])
        for buf, arg in zip(params, impl.args[1:1 + len(params)], strict=True):
            inner.bufs[id(buf)] = arg
        start, stop, *rest = impl.args[1 + len(params):]
        for v, value in zip(captured, rest, strict=True):
            inner.vars[id(v)] = value
        inner._loop(jb, s.var, start, stop, s.body)
        jb.ret_void()

    def _store(self, b: ir.IRBuilder, s: Store) -> None:
        self.forget_loads(s.buffer)
        value = self.expr(b, s.value)
        if s.buffer.dtype == "bool":
            value = b.zext(self._as_bool(b, value), I8)
        elif s.buffer.dtype == "bfloat16":
            value = bfloat16.narrow(b, value)
        b.store(value, self._address(b, s.buffer, s.index))

    def _address(self, b: ir.IRBuilder, buf: Buffer, index: Expr) -> ir.Value:
        return b.gep(self.bufs[id(buf)], [self.expr(b, index)], inbounds=True,
                     source_etype=_memory_type(buf.dtype))

    # -- expressions ---------------------------------------------------------------
    def expr(self, b: ir.IRBuilder, e: Expr) -> ir.Value:
        if isinstance(e, Const):
            ty = llvm_type(e.dtype)
            if e.dtype == "bool":
                return ir.Constant(I1, int(bool(e.value)))
            if e.dtype == "bfloat16":  # the value the dtype holds, in a float32 register
                return ir.Constant(ty, float(np.float32(e.value).astype("bfloat16")))
            if is_float(e.dtype):
                return ir.Constant(ty, float(e.value))
            return ir.Constant(ty, int(e.value))
        if isinstance(e, SymVar):
            return self.sizes[e.name]
        if isinstance(e, Var):
            return self.vars[id(e)]
        if isinstance(e, Load):
            buf = e.buffer
            assert isinstance(buf, Buffer)
            v = b.load(self._address(b, buf, e.indices[0]), typ=_memory_type(buf.dtype))
            if buf.dtype == "bfloat16":
                return bfloat16.widen(b, v)
            return b.trunc(v, I1) if buf.dtype == "bool" else v
        if isinstance(e, Binary):
            return self._binary(b, e, self.expr(b, e.a), self.expr(b, e.b))
        if isinstance(e, Cast):
            return self._cast(b, self.expr(b, e.value), e.value.dtype, e.dtype)
        if isinstance(e, Select):
            known = self.static_value(e.cond)
            if known is not None:  # e.g. a table indexed by an unrolled loop
                return self.expr(b, e.a if known else e.b)
            return b.select(self._as_bool(b, self.expr(b, e.cond)), self.expr(b, e.a),
                            self.expr(b, e.b))
        if isinstance(e, Call):
            return self._call(b, e, [self.expr(b, a) for a in e.args])
        raise TypeError(f"cannot emit expression {type(e).__name__}")

    def static_value(self, e: Expr) -> int | None:
        """The value of an integer or boolean expression that is fixed where it is
        emitted (constants and unrolled loop indices), else None. A select on such a
        condition emits only the arm taken: a Winograd transform's coefficient tables
        then cost nothing, and their zero terms are never emitted."""
        if isinstance(e, Const):
            return None if is_float(e.dtype) else int(e.value)
        if isinstance(e, Var):
            v = self.vars.get(id(e))
            return v.constant if isinstance(v, ir.Constant) and isinstance(
                v.constant, int) else None
        if isinstance(e, Binary) and e.op in _STATIC_OPS and not is_float(e.a.dtype):
            x = self.static_value(e.a)
            y = None if x is None else self.static_value(e.b)
            if y is None or (e.op in ("floordiv", "floormod") and y == 0):
                return None
            return int(BINARY_OPS[e.op](x, y))
        return None

    def expr_with(self, b: ir.IRBuilder, e: Expr, values: list[ir.Value]) -> ir.Value:
        """Emit node ``e`` given its children's values (scalars or vectors)."""
        if isinstance(e, Binary):
            return self._binary(b, e, *values)
        if isinstance(e, Cast):
            return self._cast(b, values[0], e.value.dtype, e.dtype)
        if isinstance(e, Select):
            return b.select(self._as_bool(b, values[0]), values[1], values[2])
        if isinstance(e, Call):
            return self._call(b, e, values)
        raise TypeError(f"cannot emit expression {type(e).__name__}")

    def _binary(self, b: ir.IRBuilder, e: Binary, x: ir.Value, y: ir.Value) -> ir.Value:
        dt = _arith(e.a.dtype)
        if e.op in ("and", "or"):
            x, y = self._as_bool(b, x), self._as_bool(b, y)
            return b.and_(x, y) if e.op == "and" else b.or_(x, y)
        if is_float(dt):
            if e.op in COMPARISONS:
                if e.op == "ne":
                    return b.fcmp_unordered("!=", x, y)
                return b.fcmp_ordered(_FCMP[e.op], x, y)
            if e.op in ("max", "min"):
                return self._intrinsic(b, "llvm.maximum" if e.op == "max" else "llvm.minimum",
                                       [x, y], dt)
            op = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}.get(e.op)
            if op is not None:
                return op(x, y, flags=() if id(e) in self.rounded else self.flags)
            if e.op == "floordiv":
                return self._intrinsic(b, "llvm.floor", [b.fdiv(x, y)], dt)
            if e.op == "floormod":
                q = self._intrinsic(b, "llvm.floor", [b.fdiv(x, y)], dt)
                return b.fsub(x, b.fmul(q, y))
            if e.op == "fmod":
                return b.frem(x, y)
            if e.op == "pow":
                return self._intrinsic(b, "llvm.pow", [x, y], dt)
            raise TypeError(f"float op {e.op}")
        unsigned = _unsigned(dt)
        folded = _fold_index(e.op, x, y)
        if folded is not None:
            return folded
        if e.op in COMPARISONS:
            cmp = b.icmp_unsigned if unsigned else b.icmp_signed
            return cmp(_FCMP[e.op], x, y)
        if e.op in ("max", "min"):
            cmp = b.icmp_unsigned if unsigned else b.icmp_signed
            return b.select(cmp(">" if e.op == "max" else "<", x, y), x, y)
        if e.op == "add":
            return b.add(x, y)
        if e.op == "sub":
            return b.sub(x, y)
        if e.op == "mul":
            return b.mul(x, y)
        if e.op in ("floordiv", "div", "floormod", "fmod"):
            if unsigned or (_nonnegative(e.a) and _nonnegative(e.b)):
                return b.udiv(x, y) if e.op in ("floordiv", "div") else b.urem(x, y)
            if e.op == "fmod":
                return b.srem(x, y)
            q, r = b.sdiv(x, y), b.srem(x, y)
            zero = constant(x.type, 0)
            adjust = b.and_(b.icmp_signed("!=", r, zero),
                            b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                          b.icmp_signed("<", y, zero)))
            if e.op in ("floordiv", "div"):
                return b.sub(q, b.zext(adjust, x.type))
            return b.select(adjust, b.add(r, y), r)
        if e.op == "pow":
            raise TypeError("integer pow is lowered by the op, not the codegen")
        if e.op in ("bitand", "bitor", "bitxor"):
            return {"bitand": b.and_, "bitor": b.or_, "bitxor": b.xor}[e.op](x, y)
        if e.op == "shl":
            return b.shl(x, y)
        if e.op == "shr":
            return b.lshr(x, y) if unsigned else b.ashr(x, y)
        raise TypeError(f"integer op {e.op}")

    def _cast(self, b: ir.IRBuilder, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        if dst == "bfloat16":  # via float32 (a bfloat16 register is one), then round
            return bfloat16.round_to(b, self._cast(b, v, src, "float32"))
        src = _arith(src)
        if src == dst:  # bfloat16 -> float32: the register already holds it
            return v
        to = llvm_type(dst)
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else 0
        if lanes:
            to = ir.VectorType(to, lanes)
        sf, df = is_float(src), is_float(dst)
        if dst == "bool":
            if sf:
                return b.fcmp_unordered("!=", v, constant(v.type, 0.0))
            return b.icmp_signed("!=", v, constant(v.type, 0))
        if sf and df:
            bits = {"float16": 16, "float32": 32, "float64": 64}
            return b.fpext(v, to) if bits[dst] > bits[src] else b.fptrunc(v, to)
        if sf:
            return b.fptoui(v, to) if _unsigned(dst) else b.fptosi(v, to)
        if df:
            return b.uitofp(v, to) if _unsigned(src) else b.sitofp(v, to)
        sw, dw = llvm_type(src).width, llvm_type(dst).width
        if dw > sw:
            return b.zext(v, to) if _unsigned(src) else b.sext(v, to)
        return b.trunc(v, to) if dw < sw else v

    def _call(self, b: ir.IRBuilder, e: Call, args: list[ir.Value]) -> ir.Value:
        dt = _arith(e.args[0].dtype)
        if dt == "float32" and e.fn in INLINE_F32:
            return INLINE_F32[e.fn](b, args[0])
        if isinstance(args[0].type, ir.VectorType) and e.fn not in _INTRINSICS:
            return self._call_per_lane(b, e, args)
        if e.fn in _INTRINSICS:
            return self._intrinsic(b, _INTRINSICS[e.fn], args, dt)
        if e.fn in _LIBM:
            name = _LIBM[e.fn] + ("f" if dt == "float32" else "")
            if dt == "float16":
                wide = [b.fpext(a, ir.FloatType()) for a in args]
                fn = self._declare(name + "f", ir.FunctionType(ir.FloatType(), [ir.FloatType()]
                                                               * len(args)))
                return b.fptrunc(b.call(fn, wide), args[0].type)
            ty = args[0].type
            fn = self._declare(name, ir.FunctionType(ty, [ty] * len(args)))
            return b.call(fn, args)
        if e.fn == "bitcast":  # same-width reinterpretation (ONNX BitCast); bool is 0/1
            if "bfloat16" in (dt, e.dtype):  # from or to the 16 bits of a register value
                raise TypeError("bitcast of bfloat16 is not supported")
            to = llvm_type(e.dtype)
            return b.zext(args[0], to) if dt == "bool" else b.bitcast(args[0], to)
        if e.fn == "isnan":
            return b.fcmp_unordered("uno", args[0], args[0])
        if e.fn == "isinf":
            a = self._intrinsic(b, "llvm.fabs", args, dt)
            return b.fcmp_ordered("==", a, constant(a.type, float("inf")))
        if e.fn == "iabs":
            zero = ir.Constant(args[0].type, 0)
            return b.select(b.icmp_signed("<", args[0], zero), b.sub(zero, args[0]), args[0])
        raise TypeError(f"unknown math function {e.fn}")

    def _call_per_lane(self, b: ir.IRBuilder, e: Call, args: list[ir.Value]) -> ir.Value:
        lanes = args[0].type.count
        out = None
        for i in range(lanes):
            idx = ir.Constant(I32, i)
            scalar = self._call(b, e, [b.extract_element(a, idx) for a in args])
            if out is None:
                out = ir.Constant(ir.VectorType(scalar.type, lanes), ir.Undefined)
            out = b.insert_element(out, scalar, idx)
        return out

    def _intrinsic(self, b: ir.IRBuilder, name: str, args: list[ir.Value], dt: str) -> ir.Value:
        suffix = {"float32": "f32", "float64": "f64", "float16": "f16"}[_arith(dt)]
        if isinstance(args[0].type, ir.VectorType):
            suffix = f"v{args[0].type.count}{suffix}"
        ty = args[0].type
        fn = self._declare(f"{name}.{suffix}", ir.FunctionType(ty, [ty] * len(args)))
        return b.call(fn, args)

    def _declare(self, name: str, fnty: ir.FunctionType) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, fnty, name)

    def _as_bool(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        scalar = v.type.element if isinstance(v.type, ir.VectorType) else v.type
        if scalar == I1:
            return v
        if isinstance(scalar, ir.IntType):
            return b.icmp_signed("!=", v, constant(v.type, 0))
        return b.fcmp_unordered("!=", v, constant(v.type, 0.0))




def _nonnegative(e: Expr) -> bool:
    """True when ``e`` is built from loop variables and non-negative constants only."""
    if isinstance(e, Const):
        return e.value >= 0
    if isinstance(e, Var):
        return True
    if isinstance(e, Binary) and e.op in ("add", "mul", "floordiv", "floormod", "max"):
        return _nonnegative(e.a) and _nonnegative(e.b)
    return False


def rounded_quotients(body: Stmt) -> frozenset[int]:
    """The float divisions (``id`` of their ``Binary``) whose quotient is rounded to an
    integer: ``round(x / s)``, a quantize step. They are emitted as IEEE divisions,
    without fast-math flags: ``arcp`` would multiply by a reciprocal instead, which moves
    a quotient by an ulp, and where that ulp crosses a tie (x.5) rounding turns it into
    a whole step of difference from ONNX's QuantizeLinear (MobileNetV3, ONNX Runtime's
    QDQ model: a few such flips per image, which later layers amplify). The price,
    measured on that model (AVX-512, 2 threads): 2.64 ms against 2.48. The reciprocal's
    product corrected by two FMAs (Markstein) ran as fast, but is exact only away from
    the ends of the float range (a subnormal divisor broke it)."""
    found: set[int] = set()
    seen: set[int] = set()
    for s in walk_stmts(body):
        stack = list(stmt_exprs(s))
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if (isinstance(e, Call) and e.fn in _ROUNDING and isinstance(e.args[0], Binary)
                    and e.args[0].op == "div"):
                found.add(id(e.args[0]))
            stack.extend(children(e))
    return frozenset(found)


def _stmt_free_vars(s: Stmt) -> list[Var]:
    seen: dict[int, Var] = {}
    for x in walk_stmts(s):
        for e in stmt_exprs(x):
            for v in free_vars(e):
                seen.setdefault(id(v), v)
    return list(seen.values())


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name)


def emit_module(funcs: list[PrimFunc], name: str = "tensorsmith",
                features: frozenset[str] = frozenset()) -> ir.Module:
    """``funcs`` as one module, using the target's ``features`` (cpu_features.py) where
    an instruction only some CPUs have does better (dot4.py)."""
    module = ir.Module(name=name)
    for f in funcs:
        KernelEmitter(module, f, features=features).emit()
    return module


__all__ = ["KernelEmitter", "emit_module", "llvm_type", "walk"]
