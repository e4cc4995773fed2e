"""Tensor IR -> OpenCL C: one ``__kernel`` per dispatch of each GPU-scheduled function.

A function's stage nests become dispatches (``tensorsmith.ir.te.dispatch``); each is a
kernel taking the function's buffer parameters, in order, as ``__global T* restrict``
pointers, so the runtime binds the same buffers to every dispatch of a step. The bound
``blockIdx``/``threadIdx`` loop variables are read from ``get_group_id``/``get_local_id``;
loops left inside run serially in each work-item. A function with run-time sizes
(``attrs["symbols"]``) takes one more argument after its buffers, the plan's symbols
buffer (``__global const long *``, the values in that order), which every kernel loads
once at entry; a workgroup count that depends on them is written in the dispatch table
as the text of its size expression, which the runtime evaluates per run.

Semantics follow the LLVM backend: integer floordiv/floormod round toward minus
infinity, float max/min propagate NaN, ``round`` rounds half to even, bool values are
ints 0/1 and bool buffers hold uchar.

float16 buffers are ``half`` memory either way. With ``float16_arithmetic`` (target
option ``-float16-arithmetic=1``; the program enables ``cl_khr_fp16``) their values are
``half`` and every operation rounds as ``half`` does. Without it, no ``half`` value
exists (OpenCL C allows ``half`` only as a pointer's target without the extension):
``vload_half`` reads a float16 element of a parameter as ``float``, ``vstore_half_rte``
writes one, and the kernel's own float16 arrays, workgroup and private, hold ``float``
(the schedules size workgroup tiles at 4 bytes an element whatever their dtype, and a
staged copy then converts once, when it reads global memory: with ``ushort`` tiles
ResNet-18's float16 build ran 2.1x slower than its float32 one on PoCL, with ``float``
ones as fast; bench/precision.py --target opencl). Each float16 result of an operation
that ``half`` arithmetic would round (+ - * /, math functions, a cast to float16) is
rounded to float16 in place (``Helpers`` ``round_half``), so a fused kernel computes the
values each op of the float16 graph has, not a float32 chain rounded once at the store; for
+ - * / and sqrt that is exactly what ``half`` arithmetic gives (float holds the exact
result to more than twice float16's precision, so rounding twice is rounding once).
Operations exact on float16 values (abs, negation, floor, ceil, max, ...) and float16
constants (rounded when written) need no rounding, nor does a value stored to float16
memory (``vstore_half_rte`` rounds it).

In kernels with barriers, no loop is left for a workgroup-uniform ``if`` to skip: such a
loop is fully unrolled, or takes the ``if`` inside, because PoCL miscompiles the other
form (``_KernelWriter._skippable_loop`` says how).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.te.dispatch import Dispatch, split_dispatches
from tensorsmith.ir.te.expr import COMPARISONS, Binary, Call, Cast, Const, Expr, Load, Select, Var
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
from tensorsmith.ir.te.symbols import dim_of, symvar
from tensorsmith.ir.te.visit import collect_loads, free_vars

from .dtypes import (
    EXTENSIONS,
    NARROW_INTS,
    is_float,
    is_unsigned,
    literal,
    memory_type,
    scalar_type,
)
from .helpers import Helpers

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||", "bitand": "&",
           "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
# math functions that keep their name in OpenCL C (float arguments)
_SAME_NAME = frozenset({"exp", "log", "sqrt", "tanh", "erf", "floor", "ceil", "pow", "sin",
                        "cos", "trunc", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                        "acosh", "atanh", "fmod"})
_RENAMED = {"abs": "fabs", "round": "rint"}  # rint: half to even, like llvm.roundeven
_INTEGER_IDENTITY = frozenset({"floor", "ceil", "round", "trunc"})
# functions whose result is a float16 value when their argument is (no rounding needed)
_EXACT = _INTEGER_IDENTITY | {"abs", "neg", "fmod", "isnan", "isinf"}
# identifiers a variable must not take: keywords, and built-ins a local would shadow
_RESERVED = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "bool", "half", "uchar", "ushort", "uint", "ulong",
    "size_t", "kernel", "global", "local", "constant", "private", "read_only", "write_only",
    "read_write", "barrier", "max", "min", "fmax", "fmin", "abs", "fabs", "rint", "isnan",
    "isinf", "select"
}) | _SAME_NAME
_IDENT = re.compile(r"[^A-Za-z0-9_]")
#: Most statements a loop under a workgroup-uniform ``if`` in a kernel with barriers is
#: fully unrolled into (see ``_KernelWriter._skippable_loop``); a larger one stays a loop
#: and takes the ``if`` inside instead.
SKIPPABLE_UNROLL_MAX = 256


@dataclass
class Program:
    """One OpenCL C program holding every kernel of a model, and how to dispatch them."""

    source: str
    dispatches: dict[str, list[dict[str, Any]]]  # function name -> its dispatches, in order
    extensions: list[str] = field(default_factory=list)


def grid_json(grid: tuple[int | Expr, ...]) -> list[int | str]:
    """A dispatch's workgroup counts as the dispatch table holds them: an int, or the text
    of a size expression (``"(batch*seq + 63)//64"``) the runtime evaluates per run."""
    return [g if isinstance(g, int) else str(dim_of(g)) for g in grid]


def emit_program(funcs: list[PrimFunc], header: str = "",
                 float16_arithmetic: bool = False) -> Program:
    """Emit all functions into one program; dispatches of a function run in list order.
    ``float16_arithmetic``: compute float16 values in ``half`` (needs ``cl_khr_fp16``)
    rather than in ``float`` (see the module docstring)."""
    helpers = Helpers()
    dtypes: set[str] = set()
    kernels: list[str] = []
    table: dict[str, list[dict[str, Any]]] = {}
    for func in funcs:
        table[func.name] = []
        for dispatch in split_dispatches(func):
            writer = _KernelWriter(func, dispatch, helpers, dtypes, float16_arithmetic)
            kernels.append(writer.emit())
            table[func.name].append({"entry": dispatch.name, "grid": grid_json(dispatch.grid),
                                     "workgroup": list(dispatch.workgroup)})
    if not float16_arithmetic:  # half memory through vload_half/vstore_half needs none
        dtypes.discard("float16")
    extensions = sorted({EXTENSIONS[d] for d in dtypes if d in EXTENSIONS})
    parts = [f"/* {header} */" if header else ""]
    parts += [f"#pragma OPENCL EXTENSION {ext} : enable" for ext in extensions]
    parts += [helpers.source(), *kernels]
    return Program("\n\n".join(p for p in parts if p) + "\n", table, extensions)


class _Names:
    """C identifiers for buffers and variables, unique within one kernel."""

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._taken: set[str] = set()

    def bind(self, obj: object, name: str) -> str:
        base = _IDENT.sub("_", name) or "v"
        if base[0].isdigit() or base in _RESERVED or base.startswith(("get_", "tsm_", "__")):
            base = f"v_{base}"
        ident, n = base, 1
        while ident in self._taken:
            ident, n = f"{base}_{n}", n + 1
        self._taken.add(ident)
        self._by_id[id(obj)] = ident
        return ident

    def __getitem__(self, obj: object) -> str:
        try:
            return self._by_id[id(obj)]
        except KeyError:
            name = getattr(obj, "name", type(obj).__name__)
            raise ModelError(f"'{name}' is used outside the loop or allocation that defines "
                             "it; the opencl codegen cannot emit this function") from None


class _KernelWriter:
    """Writes one dispatch of one function as a ``__kernel``."""

    def __init__(self, func: PrimFunc, dispatch: Dispatch, helpers: Helpers,
                 dtypes: set[str], float16_arithmetic: bool = False) -> None:
        self.func = func
        #: float16 values are ``half``; else ``float`` read and written by vload/vstore_half
        self.half = float16_arithmetic
        self.dispatch = dispatch
        self.helpers = helpers
        self.dtypes = dtypes
        self.names = _Names()
        self.lines: list[str] = []
        self.depth = 1
        self.has_barriers = any(isinstance(x, Barrier) for x in _walk(dispatch.body))
        self.uniform_ifs = 0  # workgroup-uniform ``if``s around the statement being written

    # -- kernel ----------------------------------------------------------------------
    def emit(self) -> str:
        d = self.dispatch
        written = _stored_buffers(d.body)
        params = []
        for buf in self.func.params:
            const = "" if id(buf) in written else "const "
            params.append(f"__global {const}{self._memory_type(buf.dtype)}* restrict "
                          f"{self.names.bind(buf, buf.name)}")
        symbols = tuple(self.func.attrs.get("symbols") or ())
        if symbols:  # every kernel of the function takes it, so a step binds the same args
            sizes = self.names.bind(self.names, "sizes")  # (any object of this kernel)
            params.append(f"__global const long* restrict {sizes}")
            for k, name in enumerate(symbols):
                self._line(f"const long {self.names.bind(symvar(name), name)} = {sizes}[{k}];")
        for axis, var in d.block_vars.items():
            self._line(f"const long {self.names.bind(var, var.name)} = "
                       f"(long)get_group_id({'xyz'.index(axis)});")
        for axis, var in d.thread_vars.items():
            self._line(f"const long {self.names.bind(var, var.name)} = "
                       f"(long)get_local_id({'xyz'.index(axis)});")
        for buf in _shared_allocations(d.body):  # __local arrays live at kernel scope
            memory = (self._type(buf.dtype) if buf.dtype == "float16"
                       else self._memory_type(buf.dtype))
            self._line(f"__local {memory} "
                       f"{self.names.bind(buf, buf.name)}[{max(buf.size, 1)}];")
        self.stmt(d.body)
        wg = ", ".join(map(str, d.workgroup))
        signature = ",\n    ".join(params) or "void"
        return (f"__kernel __attribute__((reqd_work_group_size({wg})))\n"
                f"void {d.name}(\n    {signature})\n{{\n" + "\n".join(self.lines) + "\n}")

    def _line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def _type(self, dtype: str) -> str:
        self.dtypes.add(dtype)
        return "float" if dtype == "float16" and not self.half else scalar_type(dtype)

    def _literal(self, value: int | float | bool, dtype: str) -> str:
        self._type(dtype)
        if dtype == "float16" and not self.half:  # the float16 value, as a float
            return literal(float(np.float16(value)), "float32")
        return literal(value, dtype)

    def _stored_as_half(self, buf: Buffer) -> bool:
        """Whether ``buf``'s elements are float16 words that only vload_half and
        vstore_half_rte touch: float16 parameters without float16 arithmetic (the
        kernel's own float16 arrays, workgroup and private, hold float values)."""
        return (buf.dtype == "float16" and not self.half
                and any(p is buf for p in self.func.params))

    def _round_half(self, value: str, dtype: str) -> str:
        """``value`` rounded to float16 when it is a float16 result computed in float."""
        if dtype != "float16" or self.half:
            return value
        return self.helpers.call("round_half", "float", value)

    def _memory_type(self, dtype: str) -> str:
        self.dtypes.add(dtype)
        return memory_type(dtype)

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, Store):
            value = self.expr(s.value)
            if s.buffer.dtype == "bool":
                value = f"(uchar)({value})"
            if self._stored_as_half(s.buffer):  # the store rounds: no need to round first
                self._line(f"vstore_half_rte({_unrounded(value)}, {self.expr(s.index)}, "
                           f"{self.names[s.buffer]});")
                return
            self._line(f"{self.names[s.buffer]}[{self.expr(s.index)}] = {value};")
        elif isinstance(s, IfThenElse):
            uniform = self._uniform(s.cond)
            if uniform and self._holds_a_kept_loop(s):
                self.stmt(_sink_guard(s.cond, s.then))
                return
            self.uniform_ifs += uniform
            self._line(f"if ({self.expr(s.cond)}) {{")
            self._block(s.then)
            if s.otherwise is not None:
                self._line("} else {")
                self._block(s.otherwise)
            self._line("}")
            self.uniform_ifs -= uniform
        elif isinstance(s, Allocate):
            if s.buffer.scope != "shared":  # private: a float16 array holds float values
                memory = (self._type(s.buffer.dtype) if s.buffer.dtype == "float16"
                          else self._memory_type(s.buffer.dtype))
                self._line(f"{memory} "
                           f"{self.names.bind(s.buffer, s.buffer.name)}[{max(s.buffer.size, 1)}];")
            self.stmt(s.body)
        elif isinstance(s, Barrier):
            self._line("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);")
        else:
            raise ModelError(f"the opencl codegen cannot emit statement {type(s).__name__}")

    def _for(self, s: For) -> None:
        if s.kind.startswith(("blockIdx", "threadIdx")):
            raise ModelError(
                f"loop '{s.var.name}' of {self.func.name} is bound to {s.kind} but is not one "
                "of the outermost loops of its stage; GPU schedules must bind the outermost "
                "loops of each stage (see tensorsmith.ir.schedules.gpu)")
        if s.kind == "unrolled" or self._skippable_loop(s):
            self._line("#pragma unroll")
        var = self.names.bind(s.var, s.var.name)
        extent = f"{s.extent}L" if isinstance(s.extent, int) else self.expr(s.extent)
        self._line(f"for (long {var} = 0; {var} < {extent}; ++{var}) {{")
        self._block(s.body)
        self._line("}")

    def _block(self, s: Stmt) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def _uniform(self, cond: Expr) -> bool:
        """Whether every work-item of a workgroup sees the same value of ``cond``: it
        reads no local id and no memory (block ids, sizes and serial loops only)."""
        threads = {id(v) for v in self.dispatch.thread_vars.values()}
        return (not collect_loads(cond)
                and not any(id(v) in threads for v in free_vars(cond)))

    def _skippable_loop(self, s: For) -> bool:
        """Whether loop ``s`` is emitted fully unrolled to keep PoCL from miscompiling it.

        In a kernel with barriers, PoCL's kernel compiler (seen with PoCL 3.1 on LLVM 15)
        runs a loop whose trip count every work-item shares with the work-item loop
        inside it (implicit loop barriers). When such a loop sits under a uniform ``if``
        -- the guard ``if (k + 1 < K)`` of a tile prefetch, te/tiles.py -- and a
        per-work-item branch follows it before the paths join (the zero-padding or bounds
        test of the next load), PoCL peels work-item 0 and makes every work-item take
        work-item 0's side of that branch (an ``llvm.assume`` of its own condition): the
        prefetched input of a padded conv became zeros after the first reduction step.
        Whether the copy loop is still a loop when PoCL's passes run depends on the
        optimizer (the index arithmetic, the CPU it tunes for); it showed on an AVX-512
        host and not on an AVX2 one. Unrolled here, there is no loop left to run that
        way; a loop too large to unroll takes the ``if`` inside it instead
        (``_holds_a_kept_loop``), so no ``if`` skips it. Other drivers get the same
        source: in the schedules' code the loops this matches are those prefetch copies
        into an invocation's private staging array, which GPU compilers keep in
        registers only when the copy is unrolled.
        """
        return bool(self.has_barriers and self.uniform_ifs) and _unrollable(s)

    def _holds_a_kept_loop(self, s: IfThenElse) -> bool:
        """Whether uniform ``s`` of a kernel with barriers holds a loop too large (or too
        dynamic) to unroll: ``_sink_guard`` then moves the ``if`` into the loop, so that
        the loop runs on every path and no ``if`` skips it (see ``_skippable_loop``)."""
        if not self.has_barriers or s.otherwise is not None:
            return False
        return any(isinstance(x, For) and not (x.kind == "unrolled" or _unrollable(x))
                   for x in _walk(s.then))

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self._literal(e.value, e.dtype)
        if isinstance(e, Var):
            return self.names[e]
        if isinstance(e, Load):
            buf = e.buffer
            if not isinstance(buf, Buffer):
                raise ModelError(f"load of {buf!r} is not lowered to a buffer")
            if self._stored_as_half(buf):
                return f"vload_half({self.expr(e.indices[0])}, {self.names[buf]})"
            text = f"{self.names[buf]}[{self.expr(e.indices[0])}]"
            return f"({text} != 0)" if buf.dtype == "bool" else text
        if isinstance(e, Binary):
            return self._binary(e, self.expr(e.a), self.expr(e.b))
        if isinstance(e, Cast):
            if e.dtype == "float16" and e.value.dtype == "float64" and not self.half:
                # rounded once, from the double (through float it could round twice)
                return self.helpers.call("round_half", "double", self.expr(e.value))
            cast = self._cast(self.expr(e.value), e.value.dtype, e.dtype)
            return cast if e.value.dtype == e.dtype else self._round_half(cast, e.dtype)
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, Call):
            text = self._call(e, [self.expr(a) for a in e.args])
            return text if e.fn in _EXACT else self._round_half(text, e.dtype)
        raise ModelError(f"the opencl codegen cannot emit expression {type(e).__name__}")

    def _binary(self, e: Binary, a: str, b: str) -> str:
        dt = e.a.dtype
        ctype = self._type(dt)
        if e.op in COMPARISONS or e.op in ("and", "or"):
            return f"({a} {_SYMBOL[e.op]} {b})"
        if is_float(dt):
            r = functools.partial(self._round_half, dtype=dt)  # each rounding of half
            if e.op in ("add", "sub", "mul", "div"):
                return r(f"({a} {_SYMBOL[e.op]} {b})")
            if e.op in ("max", "min"):  # one of the operands
                return self.helpers.call(e.op, ctype, a, b)
            if e.op in ("floordiv", "floormod"):
                floor = f"floor({r(f'({a} / {b})')})"
                return floor if e.op == "floordiv" else r(f"({a} - {r(f'({floor} * {b})')})")
            if e.op in ("fmod", "pow"):  # (fmod is exact, pow is not)
                return r(f"{e.op}({a}, {b})")
            raise ModelError(f"the opencl codegen has no float operator {e.op!r}")
        if e.op in ("max", "min"):
            return f"{e.op}({a}, {b})"
        if e.op in ("floordiv", "div", "floormod", "fmod"):
            symbol = "/" if e.op in ("floordiv", "div") else "%"
            plain = is_unsigned(dt) or e.op == "fmod" or (_nonnegative(e.a)
                                                          and _nonnegative(e.b))
            if plain:
                return _wrap(f"({a} {symbol} {b})", dt, ctype)
            return self.helpers.call("floordiv" if symbol == "/" else "floormod", ctype, a, b)
        if e.op in _SYMBOL:
            return _wrap(f"({a} {_SYMBOL[e.op]} {b})", dt, ctype)
        raise ModelError(f"the opencl codegen has no integer operator {e.op!r}"
                         + (" (integer pow is lowered by the op)" if e.op == "pow" else ""))

    def _cast(self, v: str, src: str, dst: str) -> str:
        if src == dst:
            return v
        if dst == "bool":
            return f"({v} != {self._literal(0, src)})"
        return f"(({self._type(dst)})({v}))"

    def _call(self, e: Call, args: list[str]) -> str:
        dt = e.args[0].dtype
        ctype = self._type(dt)
        fn = e.fn
        if not is_float(dt) and fn in _INTEGER_IDENTITY:
            return args[0]
        if fn in _SAME_NAME or fn in _RENAMED:
            return f"{_RENAMED.get(fn, fn)}({', '.join(args)})"
        if fn in ("isnan", "isinf"):
            return f"({fn}({args[0]}) != 0)"
        if fn == "iabs":
            return f"(({ctype})abs({args[0]}))"
        if fn == "neg":
            return f"(-{args[0]})"
        if fn == "sigmoid":
            one = self._literal(1, dt)
            return f"({one} / ({one} + exp(-{args[0]})))"
        raise ModelError(f"the opencl codegen has no math function {fn!r}")


def _unrounded(value: str) -> str:
    """``value`` without the float16 rounding around it, if any (for a store that rounds).
    Only a call starts with the helper's name: every operator is written in parentheses."""
    prefix = "tsm_round_half_float("
    return value[len(prefix):-1] if value.startswith(prefix) else value


def _wrap(text: str, dtype: str, ctype: str) -> str:
    """Integer arithmetic on char/short is done in int by C; cast back so it wraps."""
    return f"(({ctype}){text})" if dtype in NARROW_INTS else text


def _nonnegative(e: Expr) -> bool:
    """True when ``e`` is built from loop variables and non-negative constants only."""
    if isinstance(e, Const):
        return bool(e.value >= 0)
    if isinstance(e, Var):
        return True
    if isinstance(e, Binary) and e.op in ("add", "mul", "floordiv", "floormod", "max"):
        return _nonnegative(e.a) and _nonnegative(e.b)
    return False


def _sink_guard(cond: Expr, s: Stmt) -> Stmt:
    """``if (cond) s`` with the ``if`` moved inside ``s``'s loops and sequences: each loop
    of ``s`` runs whatever ``cond`` is and guards its body instead. Equivalent when
    ``cond`` reads no memory (nothing in ``s`` can change it)."""
    if isinstance(s, Seq):
        return Seq([_sink_guard(cond, x) for x in s.stmts])
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _sink_guard(cond, s.body))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _sink_guard(cond, s.body))
    return IfThenElse(cond, s)


def _unrollable(s: Stmt) -> bool:
    """Whether ``s`` fully unrolled stays within :data:`SKIPPABLE_UNROLL_MAX` statements."""
    size = _unrolled_size(s)
    return size is not None and size <= SKIPPABLE_UNROLL_MAX


def _unrolled_size(s: Stmt) -> int | None:
    """How many statements ``s`` becomes with every loop in it fully unrolled; None when
    a loop's extent is known only at run time."""
    if isinstance(s, For):
        body = _unrolled_size(s.body)
        return s.extent * body if isinstance(s.extent, int) and body is not None else None
    parts: list[Stmt | None] = []
    if isinstance(s, Seq):
        parts = list(s.stmts)
    elif isinstance(s, Allocate):
        parts = [s.body]
    elif isinstance(s, IfThenElse):
        parts = [s.then, s.otherwise]
    else:
        return 1
    total = 0
    for x in parts:
        n = _unrolled_size(x) if x is not None else 0
        if n is None:
            return None
        total += n
    return max(total, 1)


def _stored_buffers(s: Stmt) -> set[int]:
    """ids of the buffers ``s`` stores to (the others become ``const`` parameters)."""
    out: set[int] = set()
    for x in _walk(s):
        if isinstance(x, Store):
            out.add(id(x.buffer))
    return out


def _shared_allocations(s: Stmt) -> list[Buffer]:
    return [x.buffer for x in _walk(s) if isinstance(x, Allocate) and x.buffer.scope == "shared"]


def _walk(s: Stmt) -> list[Stmt]:
    out = [s]
    if isinstance(s, Seq):
        for x in s.stmts:
            out += _walk(x)
    elif isinstance(s, (For, Allocate)):
        out += _walk(s.body)
    elif isinstance(s, IfThenElse):
        out += _walk(s.then)
        if s.otherwise is not None:
            out += _walk(s.otherwise)
    return out
