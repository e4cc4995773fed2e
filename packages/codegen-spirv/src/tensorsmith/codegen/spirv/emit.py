"""One dispatch of a GPU-scheduled tensor-IR function -> one SPIR-V 1.3 compute module.

Conventions (the contract with the runtime and with docs/spirv-manifest.md):

* Parameter ``i`` of the function is binding ``i`` of descriptor set 0: a storage buffer
  ``struct { T data[]; }`` of the parameter's element type. Only the parameters a
  dispatch touches are declared; read-only ones are decorated NonWritable, all Restrict
  (the memory plan never lets two live tensors overlap).
* A kernel with run-time sizes (``attrs["symbols"]``) reads them from the binding after
  its parameters (the plan's symbols buffer: int64 values in that order), as the low
  int32 word of each: the runtime keeps every run-time size within int32 (ranges.py).
  Each dispatch loads the values it uses once, at its entry.
* ``blockIdx.*`` variables read ``WorkgroupId``, ``threadIdx.*`` ``LocalInvocationId``.
  A grid wider than 65535 workgroups (the Vulkan minimum of maxComputeWorkGroupCount) is
  folded into x and y, with a guard for the extra workgroups. A workgroup count of
  run-time size along x is always folded that way (its count is only known per run).
* Values live in 32-bit registers whatever their storage: bool/int8/uint8/int16 load
  into int32 (bool into OpTypeBool), float16 into float32; stores convert back. Only
  int64 and float64 data use 64-bit registers; int64 indices are narrowed to int32 where
  ranges.py proves it safe. With ``float16`` (target option ``-float16-arithmetic=1``)
  float16 values stay float16 (capability Float16, feature shaderFloat16): what the
  graph computes in float32 (a cast, a matmul's sum) is float32 already, and functions
  GLSL.std.450 lacks for 16-bit floats (erf, tanh, pow) run in float32.
* With ``integer_dot`` (target option ``-integer-dot-product=1``) the four-byte dots of
  the integer ops are one ``OpSUDot`` each (dot4.py).
* Structured control flow: loops are ``OpLoopMerge`` headers with an ``OpPhi`` counter,
  conditionals ``OpSelectionMerge``; local arrays are Function-storage variables,
  shared ones Workgroup-storage variables; Barrier is OpControlBarrier. Short
  "unrolled" loops are emitted unrolled, longer ones as loops with the Unroll hint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.symbolic import Dim, dim_min
from tensorsmith.ir.te.dispatch import Dispatch
from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Select, SymVar, Var
from tensorsmith.ir.te.matrix import CHUNK_DTYPE, Fragment, FragmentMulAdd
from tensorsmith.ir.te.stmt import (
    Allocate,
    Barrier,
    Buffer,
    For,
    IfThenElse,
    Intrinsic,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)
from tensorsmith.ir.te.symbols import dim_of
from tensorsmith.ir.te.visit import stmt_exprs, walk, walk_stmts

from . import dot4, mathlib, matrix
from .builder import FunctionBuilder, ModuleBuilder
from .ranges import INT32_MAX, INT32_MIN, RangeAnalysis
from .spec import (
    BUILTIN,
    GLSL,
    LOOP_CONTROL,
    MEMORY_ACCESS_SHARED_LOAD,
    MEMORY_ACCESS_SHARED_STORE,
    SCOPE_WORKGROUP,
    SEMANTICS_MAKE_AVAILABLE_VISIBLE,
    SEMANTICS_WORKGROUP_ACQREL,
    VERSION_1_3,
)

#: The largest workgroup count per dimension every Vulkan device accepts.
MAX_GROUPS = 65535
#: "unrolled" loops of at most this many trips, whose unrolled body stays within this
#: many statements, are unrolled by the emitter; longer ones get the Unroll hint.
UNROLL_MAX_TRIPS = 16
UNROLL_MAX_STATEMENTS = 4096

# dtype -> register kind
REGISTER = {"bool": "bool", "int8": "i32", "uint8": "i32", "int16": "i32", "int32": "i32",
            "int64": "i64", "float16": "f32", "float32": "f32", "float64": "f64"}
#: dtype -> register kind where float16 values are computed in float16
REGISTER_FLOAT16 = {**REGISTER, "float16": "f16"}
# dtype -> (kind, width) of its storage-buffer element type
STORAGE = {"bool": ("uint", 8), "uint8": ("uint", 8), "int8": ("int", 8),
           "int16": ("int", 16), "int32": ("int", 32), "int64": ("int", 64),
           "float16": ("float", 16), "float32": ("float", 32), "float64": ("float", 64)}
# capability -> the Vulkan device feature that allows it (what the runtime enables)
FEATURE_OF = {"Int64": "shaderInt64", "Float64": "shaderFloat64", "Int16": "shaderInt16",
              "Int8": "shaderInt8", "Float16": "shaderFloat16",
              "StorageBuffer8BitAccess": "storageBuffer8BitAccess",
              "StorageBuffer16BitAccess": "storageBuffer16BitAccess",
              "CooperativeMatrixKHR": "cooperativeMatrix",
              "DotProduct": "shaderIntegerDotProduct",
              "DotProductInput4x8BitPacked": "shaderIntegerDotProduct",
              "VulkanMemoryModel": "vulkanMemoryModel"}

_UNARY_GLSL = {"exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "FAbs", "floor": "Floor",
               "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
               "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
               "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "round": "RoundEven",
               "trunc": "Trunc", "rsqrt": "InverseSqrt"}
# GLSL.std.450 functions defined for 64-bit floats; the others run in float32.
_GLSL_F64 = {"FAbs", "Floor", "Ceil", "Trunc", "RoundEven", "Sqrt", "InverseSqrt", "FMin",
             "FMax"}
_FLOAT_CMP = {"lt": "FOrdLessThan", "le": "FOrdLessThanEqual", "gt": "FOrdGreaterThan",
              "ge": "FOrdGreaterThanEqual", "eq": "FOrdEqual", "ne": "FUnordNotEqual"}
_INT_CMP = {"lt": "SLessThan", "le": "SLessThanEqual", "gt": "SGreaterThan",
            "ge": "SGreaterThanEqual", "eq": "IEqual", "ne": "INotEqual"}


@dataclass
class Binding:
    """A storage buffer a dispatch uses: the function parameter it is, and how."""

    param: int
    access: str  # "read", "write" or "read_write"


@dataclass
class SpirvModule:
    """The binary of one dispatch and what running it needs."""

    name: str
    entry_point: str
    binary: bytes
    #: workgroup counts; a dim of run-time sizes where they depend on them
    grid: tuple[Dim, Dim, Dim]
    workgroup_size: tuple[int, int, int]
    bindings: list[Binding]
    capabilities: list[str]
    features: list[str] = field(default_factory=list)
    shared_bytes: int = 0  # Workgroup-storage memory the module declares
    #: cooperative-matrix products it multiplies with (``MatrixShape`` text), if any
    matrix_shapes: list[str] = field(default_factory=list)
    #: products of matrices its whole workgroup holds (``128x256x32/256 float16*float16+
    #: float32``: the block and the workgroup's invocations), if any
    workgroup_matrix_shapes: list[str] = field(default_factory=list)
    #: SPIR-V version of the binary (``spec.VERSION_*``)
    version: int = VERSION_1_3


@dataclass(frozen=True)
class Value:
    """An SSA id and the register kind it lives in ("bool", "i32", "i64", "f16", "f32",
    "f64")."""

    id: int
    reg: str


@dataclass
class _Param:
    variable: int
    dtype: str
    element: int  # storage element type id
    pointer: int  # StorageBuffer pointer to one element


@dataclass
class _Local:
    variable: int
    reg: str
    pointer: int  # pointer to one element, in the variable's storage class
    shared: bool = False  # Workgroup storage


class DispatchEmitter:
    """Emits one :class:`Dispatch` of ``func`` as a complete SPIR-V module."""

    def __init__(self, func: PrimFunc, dispatch: Dispatch, float16: bool = False,
                 integer_dot: bool = False) -> None:
        self.func = func
        self.integer_dot = integer_dot  # four-byte dots as OpSUDot (dot4.py)
        #: dtype -> register kind: REGISTER, or with float16 values in float16
        self.register = REGISTER_FLOAT16 if float16 else REGISTER
        self.matrix_shapes: set[str] = set()
        self.workgroup_matrix_shapes: set[str] = set()
        #: (id(Buffer), what) -> a wider view of its binding (binding_view)
        self.views: dict[tuple[int, str], int] = {}
        self.intrinsics = any(isinstance(x, Intrinsic) for x in walk_stmts(dispatch.body))
        self.dispatch = dispatch
        self.m = ModuleBuilder()
        self.ranges = RangeAnalysis()
        self.values: dict[int, Value] = {}  # id(Var) -> its value
        self.params: dict[int, _Param] = {}  # id(Buffer) -> storage buffer
        self.locals: dict[int, _Local] = {}  # id(Buffer) -> Allocate'd array
        self.interface: list[int] = []
        self.shared_bytes = 0
        self.fb: FunctionBuilder

    # ---- module ------------------------------------------------------------------------

    def emit(self) -> SpirvModule:
        d = self.dispatch
        if self.intrinsics:  # (before anything that depends on the memory model)
            matrix.use_cooperative_matrices(self)
        bindings = self._declare_params()
        fid, self.fb = self.m.function()
        bindings += self._load_sizes()
        grid, body = self._bind_ids()
        self.stmt(body)
        self.m.end_function(fid, self.fb)
        self.m.name(fid, d.name)
        # A loop of extent 0 (an empty tensor) makes an empty dispatch: LocalSize must
        # still be at least 1, and zero workgroups run nothing.
        local = (max(d.workgroup[0], 1), max(d.workgroup[1], 1), max(d.workgroup[2], 1))
        if 0 in d.grid or 0 in d.workgroup:
            grid = (0, 0, 0)
        grid = (dim_of(grid[0]), dim_of(grid[1]), dim_of(grid[2]))
        self.m.entry_point(fid, d.name, self.interface, local)
        caps = list(self.m.capabilities)
        return SpirvModule(d.name, d.name, self.m.to_bytes(), grid, local, bindings, caps,
                           sorted({FEATURE_OF[c] for c in caps if c in FEATURE_OF}),
                           self.shared_bytes, sorted(self.matrix_shapes),
                           sorted(self.workgroup_matrix_shapes), self.m.version)

    def _declare_params(self) -> list[Binding]:
        reads, writes = _accesses(self.dispatch.body)
        bindings = []
        for index, buf in enumerate(self.func.params):
            r, w = id(buf) in reads, id(buf) in writes
            if not (r or w):
                continue
            element = self._storage_type(buf.dtype)
            block = self.m.t_storage_block(element, _itemsize(buf.dtype), readonly=not w)
            var = self.m.global_variable(self.m.t_pointer("StorageBuffer", block),
                                         "StorageBuffer")
            self.m.decorate(var, "DescriptorSet", 0)
            self.m.decorate(var, "Binding", index)
            self.m.decorate(var, "Restrict")
            self.m.name(var, buf.name)
            self.params[id(buf)] = _Param(var, buf.dtype, element,
                                          self.m.t_pointer("StorageBuffer", element))
            bindings.append(Binding(index, "read_write" if r and w else "write" if w else "read"))
        return bindings

    def chunk_view(self, buf: Buffer) -> int:
        """A read-only ``struct { uvec4 data[]; }`` view of parameter ``buf``'s binding,
        for 16-byte loads (see matrix.py)."""
        return self.binding_view(buf, self.m.t_vector(self.m.t_int(32, False), 4), 16,
                                 "chunks")

    def binding_view(self, buf: Buffer, element: int, stride: int, what: str) -> int:
        """A read-only ``struct { element data[]; }`` view (elements ``stride`` bytes
        apart) of parameter ``buf``'s binding, named ``<buf>_<what>``: Vulkan lets
        variables of one binding alias, so a kernel reads the same bytes as wider words
        (16-byte chunks, matrix.py; four-byte words, dot4.py)."""
        key = (id(buf), what)
        view = self.views.get(key)
        if view is not None:
            return view
        if id(buf) not in self.params:
            raise TargetError(f"{what} are loaded only from parameters, not {buf.name}")
        block = self.m.t_storage_block(element, stride, readonly=True)
        view = self.m.global_variable(self.m.t_pointer("StorageBuffer", block), "StorageBuffer")
        self.m.decorate(view, "DescriptorSet", 0)
        self.m.decorate(view, "Binding", self.func.params.index(buf))
        self.m.name(view, f"{buf.name}_{what}")
        self.views[key] = view
        return view

    def _load_sizes(self) -> list[Binding]:
        """Load every run-time size the dispatch reads (its body, its workgroup counts)
        from the symbols binding, at the entry (so every later use is dominated)."""
        names = list(self.func.attrs.get("symbols") or ())
        used: dict[str, SymVar] = {}
        exprs = [g for g in self.dispatch.grid if isinstance(g, Expr)]
        exprs += [e for x in walk_stmts(self.dispatch.body) for e in stmt_exprs(x)]
        for s in walk_stmts(self.dispatch.body):
            if isinstance(s, For) and isinstance(s.extent, Expr):
                exprs.append(s.extent)
        for e in exprs:
            for x in walk(e):
                if isinstance(x, SymVar):
                    used[x.name] = x
        if not used:
            return []
        i32 = self._type("i32")
        block = self.m.t_storage_block(i32, 4, readonly=True)
        var = self.m.global_variable(self.m.t_pointer("StorageBuffer", block), "StorageBuffer")
        index = len(self.func.params)
        self.m.decorate(var, "DescriptorSet", 0)
        self.m.decorate(var, "Binding", index)
        self.m.decorate(var, "Restrict")
        self.m.name(var, "sizes")
        pointer = self.m.t_pointer("StorageBuffer", i32)
        for name, sv in sorted(used.items()):
            word = self._c32(2 * names.index(name))  # the low word of its int64
            address = self.fb.op("AccessChain", pointer, var, self._c32(0), word)
            self.values[id(sv)] = Value(self.fb.op("Load", i32, address), "i32")
        return [Binding(index, "read")]

    def _bind_ids(self) -> tuple[tuple[int | Expr, int | Expr, int | Expr], Stmt]:
        """Bind blockIdx/threadIdx variables to the built-in IDs; fold too-wide grids."""
        d = self.dispatch
        grid = d.grid
        if isinstance(grid[0], Expr) and grid[1] == grid[2] == 1 and "x" in d.block_vars:
            return self._fold_sized(grid[0])
        body: Stmt = d.body
        groups = self._builtin("WorkgroupId") if d.block_vars else None
        threads = self._builtin("LocalInvocationId") if d.thread_vars else None
        for axis, var in d.thread_vars.items():
            slot = "xyz".index(axis)
            assert threads is not None
            self._bind_builtin(var, threads, slot, d.workgroup[slot])
        folded = (isinstance(grid[0], int) and grid[0] > MAX_GROUPS and grid[1] == grid[2] == 1
                  and "x" in d.block_vars)
        for axis, var in d.block_vars.items():
            slot = "xyz".index(axis)
            assert groups is not None
            count = grid[slot]
            if isinstance(count, Expr):  # the runtime checks it against MAX_GROUPS per run
                self.values[id(var)] = Value(self._component(groups, slot), "i32")
                self.ranges.bind_sized(var)
                continue
            if count > MAX_GROUPS and not (folded and axis == "x"):
                raise TargetError(f"dispatch {d.name} needs {grid[slot]} workgroups along "
                                  f"{axis}; at most {MAX_GROUPS} are portable")
            if not (folded and axis == "x"):
                self._bind_builtin(var, groups, slot, grid[slot])
        if folded:
            assert groups is not None
            gx = grid[0]
            assert isinstance(gx, int)
            var = d.block_vars["x"]
            x = self._component(groups, 0)
            y = self._component(groups, 1)
            i32 = self._type("i32")
            flat = self.fb.op("IAdd", i32, self.fb.op("IMul", i32, y, self._c32(MAX_GROUPS)), x)
            self.values[id(var)] = Value(flat, "i32")
            self.ranges.bind(var, 0, gx - 1)
            body = IfThenElse(var < gx, body)
            grid = (MAX_GROUPS, -(-gx // MAX_GROUPS), 1)
        return grid, body

    def _fold_sized(self, gx: Expr) -> tuple[tuple[int | Expr, int | Expr, int | Expr], Stmt]:
        """A run-time count of workgroups along x, folded into x and y like a static one
        over :data:`MAX_GROUPS` (the count decides per run whether y is more than 1)."""
        d = self.dispatch
        for axis, var in d.thread_vars.items():
            slot = "xyz".index(axis)
            self._bind_builtin(var, self._builtin("LocalInvocationId"), slot, d.workgroup[slot])
        groups = self._builtin("WorkgroupId")
        var = d.block_vars["x"]
        i32 = self._type("i32")
        x, y = self._component(groups, 0), self._component(groups, 1)
        flat = self.fb.op("IAdd", i32, self.fb.op("IMul", i32, y, self._c32(MAX_GROUPS)), x)
        self.values[id(var)] = Value(flat, "i32")
        self.ranges.bind_sized(var)
        count = dim_of(gx)
        grid = (dim_min(count, MAX_GROUPS), (count + (MAX_GROUPS - 1)) // MAX_GROUPS, 1)
        return grid, IfThenElse(var < gx, d.body)  # type: ignore[return-value]

    def _builtin(self, name: str) -> int:
        u32 = self.m.t_int(32, False)
        ptr = self.m.t_pointer("Input", self.m.t_vector(u32, 3))
        var = self.m.global_variable(ptr, "Input")
        self.m.decorate(var, "BuiltIn", BUILTIN[name])
        self.m.name(var, name)
        self.interface.append(var)
        return self.fb.op("Load", self.m.t_vector(u32, 3), var)

    def _component(self, vector: int, slot: int) -> int:
        u = self.fb.op("CompositeExtract", self.m.t_int(32, False), vector, slot)
        return self.fb.op("Bitcast", self._type("i32"), u)

    def _bind_builtin(self, var: Var, vector: int, slot: int, extent: int) -> None:
        self.values[id(var)] = Value(self._component(vector, slot), "i32")
        self.ranges.bind(var, 0, max(extent - 1, 0))

    # ---- types -------------------------------------------------------------------------

    def _type(self, reg: str) -> int:
        if reg == "bool":
            return self.m.t_bool()
        if reg == "i64":
            self.m.capability("Int64")
        if reg == "f64":
            self.m.capability("Float64")
        if reg == "f16":
            self.m.capability("Float16")
        return self.m.t_int(int(reg[1:])) if reg[0] == "i" else self.m.t_float(int(reg[1:]))

    def _storage_type(self, dtype: str) -> int:
        if dtype not in STORAGE:
            raise TargetError(f"the vulkan target has no storage for dtype {dtype!r}")
        kind, width = STORAGE[dtype]
        if width == 8:
            self.m.capability("StorageBuffer8BitAccess")
        elif width == 16:
            self.m.capability("StorageBuffer16BitAccess")
        elif width == 64:
            self.m.capability("Float64" if kind == "float" else "Int64")
        if kind == "float":
            return self.m.t_float(width)
        return self.m.t_int(width, kind == "int")

    def _c32(self, v: int) -> int:
        return self.m.const(self._type("i32"), v)

    def _const(self, reg: str, value: float | int | bool) -> Value:
        return Value(self.m.const(self._type(reg), value), reg)

    # ---- statements --------------------------------------------------------------------

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, Store):
            self._store(s)
        elif isinstance(s, IfThenElse):
            self._if(s)
        elif isinstance(s, Allocate):
            self._allocate(s)
        elif isinstance(s, Intrinsic):
            if isinstance(s, FragmentMulAdd):
                types = f"{s.a.dtype}*{s.b.dtype}+{s.acc.dtype}"
                dims = f"{s.a.rows}x{s.b.cols}x{s.a.cols}"
                if s.acc.held_by == "workgroup":
                    held = math.prod(self.dispatch.workgroup)
                    self.workgroup_matrix_shapes.add(f"{dims}/{held} {types}")
                else:
                    self.matrix_shapes.add(f"{dims} {types}")
            matrix.emit_intrinsic(self, s)
        elif isinstance(s, Barrier):
            u32 = self.m.t_int(32, False)
            scope = self.m.const(u32, SCOPE_WORKGROUP)
            semantics = SEMANTICS_WORKGROUP_ACQREL
            if self.vulkan_memory_model:
                semantics |= SEMANTICS_MAKE_AVAILABLE_VISIBLE
            self.fb.do("ControlBarrier", scope, scope, self.m.const(u32, semantics))
        else:
            raise TargetError(f"the vulkan target cannot emit {type(s).__name__} statements")

    def _for(self, s: For) -> None:
        if s.kind.startswith(("blockIdx", "threadIdx")):
            raise TargetError(f"loop {s.var.name} is bound to {s.kind} below the top of "
                              f"dispatch {self.dispatch.name}; bind only the outermost loops")
        if isinstance(s.extent, Expr):
            self._sized_for(s)
            return
        if s.extent <= 0:
            return
        self.ranges.bind(s.var, 0, s.extent - 1)
        if s.extent == 1:
            self.values[id(s.var)] = Value(self._c32(0), "i32")
            self.stmt(s.body)
            return
        if s.extent > 2**31 - 1:
            raise TargetError(f"loop {s.var.name} has {s.extent} iterations; at most 2^31-1")
        if s.kind == "unrolled" and s.extent <= UNROLL_MAX_TRIPS \
                and s.extent * _straight_size(s.body) <= UNROLL_MAX_STATEMENTS:
            # Unrolled here rather than hinted: register tiles (local arrays) are then
            # indexed by constants, which every driver keeps in registers.
            for i in range(s.extent):
                self.values[id(s.var)] = Value(self._c32(i), "i32")
                self.stmt(s.body)
            return
        control = LOOP_CONTROL["Unroll"] if s.kind == "unrolled" else LOOP_CONTROL["None"]
        self._loop(s, self._c32(s.extent), control)

    def _sized_for(self, s: For) -> None:
        """A loop over a run-time extent: never unrolled, its bound computed before it."""
        assert isinstance(s.extent, Expr)
        bound = self._coerce(self.expr(s.extent), "i32").id
        self.ranges.bind_sized(s.var)
        self._loop(s, bound, LOOP_CONTROL["None"])

    def _loop(self, s: For, bound: int, control: int) -> None:
        """The structured loop ``for counter in [0, bound)`` around ``s.body``."""
        fb, i32 = self.fb, self._type("i32")
        header, body, cont, merge = (self.m.new_id() for _ in range(4))
        pre = fb.block
        fb.do("Branch", header)
        fb.label(header)
        counter, following = self.m.new_id(), self.m.new_id()
        fb.op_as("Phi", i32, counter, self._c32(0), pre, following, cont)
        cond = fb.op("SLessThan", self.m.t_bool(), counter, bound)
        fb.do("LoopMerge", merge, cont, control)
        fb.do("BranchConditional", cond, body, merge)
        fb.label(body)
        self.values[id(s.var)] = Value(counter, "i32")
        self.m.name(counter, s.var.name)
        self.stmt(s.body)
        fb.do("Branch", cont)
        fb.label(cont)
        fb.op_as("IAdd", i32, following, counter, self._c32(1))
        fb.do("Branch", header)
        fb.label(merge)

    def _if(self, s: IfThenElse) -> None:
        if isinstance(s.cond, Const):
            branch = s.then if s.cond.value else s.otherwise
            if branch is not None:
                self.stmt(branch)
            return
        fb = self.fb
        cond = self._as_bool(self.expr(s.cond))
        then, merge = self.m.new_id(), self.m.new_id()
        otherwise = self.m.new_id() if s.otherwise is not None else merge
        fb.do("SelectionMerge", merge, 0)
        fb.do("BranchConditional", cond.id, then, otherwise)
        fb.label(then)
        self.stmt(s.then)
        fb.do("Branch", merge)
        if s.otherwise is not None:
            fb.label(otherwise)
            self.stmt(s.otherwise)
            fb.do("Branch", merge)
        fb.label(merge)

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if isinstance(buf, Fragment):
            var, pointer = matrix.allocate_fragment(self, buf)
            self.locals[id(buf)] = _Local(var, "fragment", pointer)
            self.stmt(s.body)
            return
        if buf.dtype == CHUNK_DTYPE:  # 16-byte words: register chunks, shared tiles
            reg = "chunk" if buf.scope != "shared" else "tile"
            element = self.m.t_vector(self.m.t_int(32, False), 4)
        elif buf.dtype == "float16" and buf.scope == "shared" and self.intrinsics:
            # an operand tile of cooperative matrices in float16 elements (matrix.py)
            self.m.capability("Float16")
            reg, element = "half", self.m.t_float(16)
        else:
            reg = self.register[buf.dtype]
            element = self._type(reg)
        array = self.m.t_array(element, max(buf.size, 1))
        if buf.scope == "shared":
            var = self.m.global_variable(self.m.t_pointer("Workgroup", array), "Workgroup")
            width = {"tile": 16, "half": 2, "f16": 2}.get(reg, 8 if reg.endswith("64") else 4)
            self.shared_bytes += max(buf.size, 1) * width
            pointer = self.m.t_pointer("Workgroup", element)
        else:
            var = self.fb.variable(self.m.t_pointer("Function", array))
            pointer = self.m.t_pointer("Function", element)
        self.m.name(var, buf.name)
        self.locals[id(buf)] = _Local(var, reg, pointer, buf.scope == "shared")
        self.stmt(s.body)

    def _store(self, s: Store) -> None:
        value = self.expr(s.value)
        address = self._address(s.buffer, s.index)
        local = self.locals.get(id(s.buffer))
        if local is not None:
            word = self._coerce(value, local.reg).id
            self.fb.do("Store", address, word, *self.shared_access(local, load=False))
            return
        self.fb.do("Store", address, self._to_storage(value, s.buffer.dtype))

    @property
    def vulkan_memory_model(self) -> bool:
        return "VulkanMemoryModel" in self.m.capabilities

    def shared_access(self, local: _Local | None, load: bool) -> tuple[int, ...]:
        """Memory operands of a load or store of ``local``: under the Vulkan memory model
        a shared-memory access is non-private and made visible or available to the
        workgroup (so the barriers order it between invocations); none otherwise."""
        if local is None or not local.shared or not self.vulkan_memory_model:
            return ()
        scope = self.m.const(self.m.t_int(32, False), SCOPE_WORKGROUP)
        return (MEMORY_ACCESS_SHARED_LOAD if load else MEMORY_ACCESS_SHARED_STORE, scope)

    def _address(self, buf: Buffer, index: Expr) -> int:
        idx = self.expr(index)
        local = self.locals.get(id(buf))
        if local is not None and local.reg in ("tile", "half", "chunk", "fragment"):
            raise TargetError(f"{buf.name} holds cooperative-matrix data; only the matrix "
                              f"statements may read or write it ({self.dispatch.name})")
        if local is not None:
            return self.fb.op("AccessChain", local.pointer, local.variable, idx.id)
        param = self.params.get(id(buf))
        if param is None:
            raise TargetError(f"buffer {buf.name} is neither a parameter of "
                              f"{self.func.name} nor allocated in it")
        return self.fb.op("AccessChain", param.pointer, param.variable, self._c32(0), idx.id)

    # ---- storage conversions -----------------------------------------------------------

    def _from_storage(self, raw: int, dtype: str) -> Value:
        fb = self.fb
        kind, width = STORAGE[dtype]
        reg = self.register[dtype]
        if dtype == "bool":
            u32 = self.m.t_int(32, False)
            wide = fb.op("UConvert", u32, raw)
            return Value(fb.op("INotEqual", self.m.t_bool(), wide, self.m.const(u32, 0)), "bool")
        if kind == "float" and width == 16:
            if reg == "f16":
                return Value(raw, "f16")
            return Value(fb.op("FConvert", self._type("f32"), raw), "f32")
        if width < 32:
            if kind == "uint":
                wide = fb.op("UConvert", self.m.t_int(32, False), raw)
                return Value(fb.op("Bitcast", self._type("i32"), wide), "i32")
            return Value(fb.op("SConvert", self._type("i32"), raw), "i32")
        return Value(raw, reg)

    def _to_storage(self, value: Value, dtype: str) -> int:
        fb = self.fb
        kind, width = STORAGE[dtype]
        element = self._storage_type(dtype)
        if dtype == "bool":
            u32 = self.m.t_int(32, False)
            word = fb.op("Select", u32, self._as_bool(value).id, self.m.const(u32, 1),
                         self.m.const(u32, 0))
            return fb.op("UConvert", element, word)
        v = self._coerce(value, self.register[dtype])
        if kind == "float" and width == 16:
            return v.id if v.reg == "f16" else fb.op("FConvert", element, v.id)
        if width < 32:
            if kind == "uint":
                word = fb.op("Bitcast", self.m.t_int(32, False), v.id)
                return fb.op("UConvert", element, word)
            return fb.op("SConvert", element, v.id)
        return v.id

    def _coerce(self, v: Value, reg: str) -> Value:
        """Move a value into another register kind of the same family (i32 <-> i64 ...)."""
        if v.reg == reg:
            return v
        if v.reg[0] == reg[0] == "i":
            return Value(self.fb.op("SConvert", self._type(reg), v.id), reg)
        if v.reg[0] == reg[0] == "f":
            return Value(self.fb.op("FConvert", self._type(reg), v.id), reg)
        if v.reg == "bool":
            return self._from_bool(v, reg)
        if reg == "bool":
            return self._as_bool(v)
        raise TargetError(f"cannot use a {v.reg} value as {reg}")

    # ---- expressions -------------------------------------------------------------------

    def expr(self, e: Expr) -> Value:
        if isinstance(e, Const):
            return self._const(self._reg_of(e), e.value)
        if isinstance(e, Var):  # (a SymVar's value is loaded at the entry)
            v = self.values.get(id(e))
            if v is None:
                raise TargetError(f"variable {e.name} is used outside its loop in "
                                  f"{self.dispatch.name}")
            return v
        if isinstance(e, Load):
            buf = e.buffer
            assert isinstance(buf, Buffer)
            address = self._address(buf, e.indices[0])
            local = self.locals.get(id(buf))
            if local is not None:
                raw = self.fb.op("Load", self._type(local.reg), address,
                                 *self.shared_access(local, load=True))
                return Value(raw, local.reg)
            raw = self.fb.op("Load", self.params[id(buf)].element, address)
            return self._from_storage(raw, buf.dtype)
        if isinstance(e, Binary):
            packed = dot4.emit(self, e) if self.integer_dot else None
            return packed if packed is not None else self._binary(e)
        if isinstance(e, Cast):
            return self._cast(self.expr(e.value), e.value.dtype, e.dtype)
        if isinstance(e, Select):
            cond = self._as_bool(self.expr(e.cond))
            a, b = self._unify(self.expr(e.a), self.expr(e.b))
            return Value(self.fb.op("Select", self._type(a.reg), cond.id, a.id, b.id), a.reg)
        if isinstance(e, Call):
            return self._call(e)
        raise TargetError(f"the vulkan target cannot emit {type(e).__name__} expressions")

    def _reg_of(self, e: Expr) -> str:
        if e.dtype == "int64" and self.ranges.fits32(e):
            return "i32"
        if e.dtype not in self.register:
            raise TargetError(f"the vulkan target does not support dtype {e.dtype!r}")
        return self.register[e.dtype]

    def _unify(self, a: Value, b: Value) -> tuple[Value, Value]:
        if a.reg == b.reg:
            return a, b
        if a.reg[0] == b.reg[0] and a.reg[0] in "if":  # the wider of two widths
            wide = max(a.reg, b.reg, key=lambda r: int(r[1:]))
            return self._coerce(a, wide), self._coerce(b, wide)
        if a.reg == "bool":
            return self._coerce(a, b.reg), b
        if b.reg == "bool":
            return a, self._coerce(b, a.reg)
        raise TargetError(f"mixed {a.reg} and {b.reg} operands")

    def _operands(self, e: Binary) -> tuple[Value, Value]:
        """Emit both operands in one register kind; a constant takes its partner's kind."""
        if isinstance(e.b, Const) and not isinstance(e.a, Const):
            a = self.expr(e.a)
            return self._unify(a, self._const_like(e.b, a))
        if isinstance(e.a, Const) and not isinstance(e.b, Const):
            b = self.expr(e.b)
            return self._unify(self._const_like(e.a, b), b)
        return self._unify(self.expr(e.a), self.expr(e.b))

    def _const_like(self, c: Const, partner: Value) -> Value:
        """``c`` in the register kind of ``partner``, when that loses nothing."""
        fits = partner.reg != "i32" or INT32_MIN <= int(c.value) <= INT32_MAX
        if partner.reg[0] == "i" and c.dtype.startswith(("int", "uint")) and fits:
            return self._const(partner.reg, c.value)
        return self.expr(c)

    def _binary(self, e: Binary) -> Value:
        a, b = self._operands(e)
        fb, reg = self.fb, a.reg
        boolean = self.m.t_bool()
        if reg == "bool":
            return self._bool_binary(e, a, b)
        ty = self._type(reg)
        if reg[0] == "f":
            if e.op in _FLOAT_CMP:
                return Value(fb.op(_FLOAT_CMP[e.op], boolean, a.id, b.id), "bool")
            simple = {"add": "FAdd", "sub": "FSub", "mul": "FMul", "div": "FDiv",
                      "fmod": "FRem"}.get(e.op)
            if simple:
                return Value(fb.op(simple, ty, a.id, b.id), reg)
            if e.op in ("max", "min"):
                return Value(fb.ext(ty, GLSL["FMax" if e.op == "max" else "FMin"], a.id, b.id),
                             reg)
            if e.op in ("floordiv", "floormod"):
                q = fb.ext(ty, GLSL["Floor"], fb.op("FDiv", ty, a.id, b.id))
                if e.op == "floordiv":
                    return Value(q, reg)
                return Value(fb.op("FSub", ty, a.id, fb.op("FMul", ty, q, b.id)), reg)
            if e.op == "pow":
                return self._pow(e, a, b)
            raise TargetError(f"the vulkan target has no float operation {e.op!r}")
        if e.op in _INT_CMP:
            return Value(fb.op(_INT_CMP[e.op], boolean, a.id, b.id), "bool")
        if e.op == "fmod":
            return Value(self._truncating_division(a, b)[1], reg)
        simple = {"add": "IAdd", "sub": "ISub", "mul": "IMul", "bitand": "BitwiseAnd",
                  "bitor": "BitwiseOr", "bitxor": "BitwiseXor", "shl": "ShiftLeftLogical"
                  }.get(e.op)
        if simple:
            return Value(fb.op(simple, ty, a.id, b.id), reg)
        if e.op == "shr":
            shift = "ShiftRightLogical" if e.a.dtype == "uint8" else "ShiftRightArithmetic"
            return Value(fb.op(shift, ty, a.id, b.id), reg)
        if e.op in ("max", "min"):
            cmp = fb.op("SGreaterThan" if e.op == "max" else "SLessThan", boolean, a.id, b.id)
            return Value(fb.op("Select", ty, cmp, a.id, b.id), reg)
        if e.op in ("floordiv", "div", "floormod"):
            return self._int_division(e, a, b)
        raise TargetError(f"the vulkan target has no integer operation {e.op!r}")

    def _bool_binary(self, e: Binary, a: Value, b: Value) -> Value:
        boolean = self.m.t_bool()
        op = {"and": "LogicalAnd", "mul": "LogicalAnd", "min": "LogicalAnd",
              "or": "LogicalOr", "add": "LogicalOr", "max": "LogicalOr",
              "eq": "LogicalEqual", "ne": "LogicalNotEqual", "bitxor": "LogicalNotEqual",
              "bitand": "LogicalAnd", "bitor": "LogicalOr"}.get(e.op)
        if op is not None:
            return Value(self.fb.op(op, boolean, a.id, b.id), "bool")
        if e.op in _INT_CMP:  # ordering of booleans: compare them as 0/1
            x, y = self._from_bool(a, "i32"), self._from_bool(b, "i32")
            return Value(self.fb.op(_INT_CMP[e.op], boolean, x.id, y.id), "bool")
        raise TargetError(f"the vulkan target has no boolean operation {e.op!r}")

    def _int_division(self, e: Binary, a: Value, b: Value) -> Value:
        """Floor division and modulo (Python semantics), unsigned when both sides are >= 0."""
        fb, reg = self.fb, a.reg
        ty = self._type(reg)
        modulo = e.op == "floormod"
        if self.ranges.nonnegative(e.a) and self.ranges.positive(e.b):
            uty = self.m.t_int(int(reg[1:]), False)
            x, y = fb.op("Bitcast", uty, a.id), fb.op("Bitcast", uty, b.id)
            r = fb.op("UMod" if modulo else "UDiv", uty, x, y)
            return Value(fb.op("Bitcast", ty, r), reg)
        # Truncating quotient and remainder, corrected where the signs differ.
        q, r = self._truncating_division(a, b)
        boolean = self.m.t_bool()
        zero = self._const(reg, 0).id
        signs = fb.op("LogicalNotEqual", boolean, fb.op("SLessThan", boolean, r, zero),
                      fb.op("SLessThan", boolean, b.id, zero))
        adjust = fb.op("LogicalAnd", boolean, fb.op("INotEqual", boolean, r, zero), signs)
        if modulo:
            return Value(fb.op("Select", ty, adjust, fb.op("IAdd", ty, r, b.id), r), reg)
        one = self._const(reg, 1).id
        return Value(fb.op("Select", ty, adjust, fb.op("ISub", ty, q, one), q), reg)

    def _truncating_division(self, a: Value, b: Value) -> tuple[int, int]:
        """C's ``a / b`` and ``a % b``, the remainder as ``a - q * b``.

        Not OpSRem/OpSMod: drivers get them wrong for negative operands (NVIDIA 580
        computes OpSRem as an unsigned modulo, Mesa 22.3's lavapipe OpSMod as OpSRem),
        while OpSDiv is right everywhere we ran.
        """
        fb, ty = self.fb, self._type(a.reg)
        q = fb.op("SDiv", ty, a.id, b.id)
        return q, fb.op("ISub", ty, a.id, fb.op("IMul", ty, q, b.id))

    def _pow(self, e: Binary, a: Value, b: Value) -> Value:
        if isinstance(e.b, Const):
            y = float(e.b.value)
            if y == 1.0:
                return a
            if y == 2.0:
                return Value(self.fb.op("FMul", self._type(a.reg), a.id, a.id), a.reg)
            if y == 0.5:
                return Value(self.fb.ext(self._type(a.reg), GLSL["Sqrt"], a.id), a.reg)
        x32, y32 = self._coerce(a, "f32"), self._coerce(b, "f32")
        r = mathlib.pow_(self._math(), x32.id, y32.id)
        return self._coerce(Value(r, "f32"), a.reg)

    def _math(self) -> mathlib.Float32Math:
        return mathlib.Float32Math(self.fb, self._type("f32"), self.m.t_bool())

    def _call(self, e: Call) -> Value:
        fn = e.fn
        args = [self.expr(a) for a in e.args]
        x = args[0]
        if fn == "iabs":
            ty = self._type(x.reg)
            zero = self._const(x.reg, 0)
            neg = self.fb.op("SLessThan", self.m.t_bool(), x.id, zero.id)
            return Value(self.fb.op("Select", ty, neg, self.fb.op("SNegate", ty, x.id), x.id),
                         x.reg)
        if x.reg[0] != "f":
            raise TargetError(f"the vulkan target has no {fn}() of {e.args[0].dtype}")
        if fn in ("isnan", "isinf"):
            op = "IsNan" if fn == "isnan" else "IsInf"
            return Value(self.fb.op(op, self.m.t_bool(), x.id), "bool")
        if fn == "fmod":
            a, b = self._unify(x, args[1])
            return Value(self.fb.op("FRem", self._type(a.reg), a.id, b.id), a.reg)
        if fn == "pow":
            return self._pow(Binary("pow", e.args[0], e.args[1], e.dtype), *self._unify(x, args[1]))
        if fn in _UNARY_GLSL:
            name = _UNARY_GLSL[fn]
            if x.reg == "f64" and name not in _GLSL_F64:
                narrow = self._coerce(x, "f32")
                r = self.fb.ext(self._type("f32"), GLSL[name], narrow.id)
                return self._coerce(Value(r, "f32"), "f64")
            return Value(self.fb.ext(self._type(x.reg), GLSL[name], x.id), x.reg)
        if fn in ("erf", "tanh"):
            narrow = self._coerce(x, "f32")
            r = (mathlib.erf if fn == "erf" else mathlib.tanh)(self._math(), narrow.id)
            return self._coerce(Value(r, "f32"), x.reg)
        if fn == "sigmoid":
            ty = self._type(x.reg)
            one = self._const(x.reg, 1.0).id
            ex = self.fb.ext(ty, GLSL["Exp"], self.fb.op("FNegate", ty, x.id))
            return Value(self.fb.op("FDiv", ty, one, self.fb.op("FAdd", ty, one, ex)), x.reg)
        raise TargetError(f"the vulkan target has no math function {fn!r}")

    # ---- casts -------------------------------------------------------------------------

    def _as_bool(self, v: Value) -> Value:
        if v.reg == "bool":
            return v
        boolean = self.m.t_bool()
        if v.reg[0] == "f":
            zero = self._const(v.reg, 0.0)
            return Value(self.fb.op("FUnordNotEqual", boolean, v.id, zero.id), "bool")
        return Value(self.fb.op("INotEqual", boolean, v.id, self._const(v.reg, 0).id), "bool")

    def _from_bool(self, v: Value, reg: str) -> Value:
        one = 1.0 if reg[0] == "f" else 1
        zero = 0.0 if reg[0] == "f" else 0
        return Value(self.fb.op("Select", self._type(reg), v.id, self._const(reg, one).id,
                                self._const(reg, zero).id), reg)

    def _cast(self, v: Value, src: str, dst: str) -> Value:
        if dst not in self.register:
            raise TargetError(f"the vulkan target does not support dtype {dst!r}")
        if dst == "bool":
            return self._as_bool(v)
        reg = self.register[dst]
        if v.reg == "bool":
            return self._from_bool(v, reg)
        fb = self.fb
        if v.reg[0] == "f" and reg[0] == "f":
            return self._coerce(v, reg)
        if v.reg[0] == "f":
            out = Value(fb.op("ConvertFToS", self._type(reg), v.id), reg)
        elif reg[0] == "f":
            return Value(fb.op("ConvertSToF", self._type(reg), v.id), reg)
        else:
            out = self._coerce(v, reg)
        return self._wrap(out, dst) if dst != src else out

    def _wrap(self, v: Value, dtype: str) -> Value:
        """Reduce an int32 register to the range of a narrower dtype (two's complement)."""
        if dtype == "uint8":
            mask = self._c32(0xFF)
            return Value(self.fb.op("BitwiseAnd", self._type("i32"), v.id, mask), "i32")
        if dtype in ("int8", "int16"):
            shift = self._c32(32 - (8 if dtype == "int8" else 16))
            i32 = self._type("i32")
            up = self.fb.op("ShiftLeftLogical", i32, v.id, shift)
            return Value(self.fb.op("ShiftRightArithmetic", i32, up, shift), "i32")
        return v


def _straight_size(s: Stmt) -> int:
    """Statements ``s`` becomes once its small unrolled loops are unrolled."""
    if isinstance(s, Seq):
        return sum(_straight_size(x) for x in s.stmts)
    if isinstance(s, For):
        if not isinstance(s.extent, int):
            return _straight_size(s.body)
        small = s.kind == "unrolled" and s.extent <= UNROLL_MAX_TRIPS
        return (s.extent if small else 1) * _straight_size(s.body)
    if isinstance(s, IfThenElse):
        return 1 + _straight_size(s.then) + (_straight_size(s.otherwise)
                                             if s.otherwise is not None else 0)
    if isinstance(s, Allocate):
        return _straight_size(s.body)
    return 1


def _accesses(s: Stmt) -> tuple[set[int], set[int]]:
    """ids of the buffers ``s`` reads and writes."""
    reads: set[int] = set()
    writes: set[int] = set()
    for x in walk_stmts(s):
        if isinstance(x, Store):
            writes.add(id(x.buffer))
        if isinstance(x, Intrinsic):
            reads.update(id(b) for b in x.reads)
            writes.update(id(b) for b in x.writes)
        for e in stmt_exprs(x):
            reads.update(id(y.buffer) for y in walk(e) if isinstance(y, Load))
    return reads, writes


def _itemsize(dtype: str) -> int:
    return STORAGE[dtype][1] // 8


def emit_dispatch(func: PrimFunc, dispatch: Dispatch, float16: bool = False,
                  integer_dot: bool = False) -> SpirvModule:
    """The module of ``dispatch``; ``float16``: compute float16 values in float16;
    ``integer_dot``: four-byte integer dots as OpSUDot."""
    return DispatchEmitter(func, dispatch, float16, integer_dot).emit()


__all__ = ["FEATURE_OF", "Binding", "DispatchEmitter", "SpirvModule", "Value", "emit_dispatch"]
