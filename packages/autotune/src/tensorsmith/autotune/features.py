"""Features of a candidate: a fixed-length vector read off its lowered tensor IR.

The cost model never sees knobs or steps, only what the loop nest does, so one model
learns across tasks and schedules. Per store (the unit of work): arithmetic by kind,
memory accesses by stride with respect to the innermost loop (contiguous, broadcast,
strided), local-buffer accesses, the loop structure around it (innermost extent and
kind, vector lanes, unrolled body size, parallel extent and how often the thread pool
is woken) and a small cache model: the bytes the loop nest streams from beyond a
32 KiB and a 1 MiB cache, from the touched footprint of each sub-nest. The vector is
the main store's features (most arithmetic), the sums over all stores, and a few whole
kernel counts; every value is ``log2(1 + x)``, so the vector is finite and its scale
matches how throughput varies.

GPU kernels (vulkan, opencl) have their outer loops bound to workgroups and invocations
(``blockIdx.*``, ``threadIdx.*``): those count as the parallel loops (all of them
together: the invocations of the whole dispatch), each nest under them as one launch,
and reads of workgroup-shared tiles count with the local ones (on-chip, not traffic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Select, Var
from tensorsmith.ir.te.stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Seq, Stmt, Store
from tensorsmith.ir.te.visit import free_vars, walk

CACHES = (32 * 1024, 1024 * 1024)
KINDS = ("serial", "parallel", "vectorized", "unrolled")

STORE_FEATURES = (
    "executions", "float_addsub", "float_mul", "float_div", "float_maxmin", "float_math",
    "select", "compare", "int_ops", "loads_contiguous", "loads_broadcast", "loads_strided",
    "loads_local", "store_contiguous", "store_broadcast", "store_strided", "store_local",
    "flops", "bytes_accessed", "loops", "innermost_extent", "innermost_serial",
    "innermost_parallel", "innermost_vectorized", "innermost_unrolled", "vector_lanes",
    "vector_effective", "unrolled_body", "parallel_extent", "work_per_thread",
    "local_elements", "guarded", "touched_innermost", "touched_per_parallel_iter",
    "touched_total", "traffic_l1", "traffic_l2", "intensity_l1", "intensity_l2",
    "reuse_per_parallel_iter",
)
SUM_FEATURES = ("executions", "flops", "bytes_accessed", "traffic_l1", "traffic_l2",
                "loads_strided", "int_ops")
KERNEL_FEATURES = ("stores", "loop_nests", "parallel_loops", "parallel_launches",
                   "scratch_bytes", "total_flops")
FEATURE_NAMES = (tuple(f"main.{n}" for n in STORE_FEATURES)
                 + tuple(f"sum.{n}" for n in SUM_FEATURES)
                 + tuple(f"kernel.{n}" for n in KERNEL_FEATURES))
NUM_FEATURES = len(FEATURE_NAMES)


@dataclass
class _Access:
    buffer: Buffer
    index: Expr
    deps: frozenset[int] = field(default_factory=frozenset)


def _eval(e: Expr, env: dict[int, int]) -> float:
    """Value of an index expression; variables not in ``env`` are 0."""
    if isinstance(e, Const):
        return float(e.value)
    if isinstance(e, Var):
        return float(env.get(id(e), 0))
    if isinstance(e, Cast):
        return _eval(e.value, env)
    if isinstance(e, Select):
        return _eval(e.a, env) if _eval(e.cond, env) else _eval(e.b, env)
    if isinstance(e, Binary):
        a, b = _eval(e.a, env), _eval(e.b, env)
        op = e.op
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "floordiv":
            return a // b if b else 0.0
        if op == "floormod":
            return a % b if b else 0.0
        if op == "max":
            return max(a, b)
        if op == "min":
            return min(a, b)
        if op == "lt":
            return float(a < b)
        if op == "le":
            return float(a <= b)
        if op == "gt":
            return float(a > b)
        if op == "ge":
            return float(a >= b)
        if op == "eq":
            return float(a == b)
        if op == "ne":
            return float(a != b)
        if op == "and":
            return float(bool(a) and bool(b))
        if op == "or":
            return float(bool(a) or bool(b))
        if op == "div":
            return a / b if b else 0.0
    return 0.0


def _stride(index: Expr, var: Var | None) -> float:
    if var is None:
        return 0.0
    return _eval(index, {id(var): 1}) - _eval(index, {id(var): 0})


def _stride_class(stride: float) -> str:
    if stride == 0:
        return "broadcast"
    return "contiguous" if abs(stride) == 1 else "strided"


def _bound(loop: For) -> bool:
    """A loop bound to GPU workgroups or invocations."""
    return loop.kind.startswith(("blockIdx.", "threadIdx."))


class _Walker:
    def __init__(self) -> None:
        self.loops: list[For] = []
        self.locals: list[Buffer] = []
        self.guards = 0
        self.stores: list[np.ndarray] = []
        self.parallel_loops = 0
        self.parallel_launches = 0.0
        self.loop_nests = 0

    def stmt(self, s: Stmt, depth: int = 0) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, depth)
        elif isinstance(s, For):
            if not self.loops:
                self.loop_nests += 1
            if s.kind == "parallel":
                self.parallel_loops += 1
                self.parallel_launches += math.prod(lp.extent for lp in self.loops)
            elif _bound(s) and not any(_bound(lp) for lp in self.loops):
                self.parallel_loops += 1  # one dispatch of the loops bound below
                self.parallel_launches += math.prod(lp.extent for lp in self.loops)
            self.loops.append(s)
            self.stmt(s.body)
            self.loops.pop()
        elif isinstance(s, Allocate):
            self.locals.append(s.buffer)
            self.stmt(s.body)
            self.locals.pop()
        elif isinstance(s, IfThenElse):
            self.guards += 1
            self.stmt(s.then)
            if s.otherwise is not None:
                self.stmt(s.otherwise)
            self.guards -= 1
        elif isinstance(s, Store):
            self.stores.append(self.store(s))

    def store(self, s: Store) -> np.ndarray:
        f = dict.fromkeys(STORE_FEATURES, 0.0)
        loops = self.loops
        executions = float(math.prod(lp.extent for lp in loops))
        inner = loops[-1] if loops else None
        inner_var = inner.var if inner is not None else None
        f["executions"] = executions
        accesses: list[_Access] = []
        for x in walk(s.value):
            if isinstance(x, Binary):
                if x.dtype.startswith("float"):
                    key = {"add": "float_addsub", "sub": "float_addsub", "mul": "float_mul",
                           "div": "float_div", "max": "float_maxmin", "min": "float_maxmin"
                           }.get(x.op)
                    if key:
                        f[key] += 1
                elif x.dtype == "bool":
                    f["compare"] += 1
                else:
                    f["int_ops"] += 1
            elif isinstance(x, Call):
                f["float_math"] += 1
            elif isinstance(x, Select):
                f["select"] += 1
            elif isinstance(x, Load) and isinstance(x.buffer, Buffer):
                index = x.indices[0]
                f["int_ops"] += sum(1 for y in walk(index) if isinstance(y, Binary))
                if x.buffer.scope in ("local", "shared"):
                    f["loads_local"] += 1
                else:
                    f[f"loads_{_stride_class(_stride(index, inner_var))}"] += 1
                    accesses.append(_Access(x.buffer, index))
        f["int_ops"] += sum(1 for y in walk(s.index) if isinstance(y, Binary))
        if s.buffer.scope == "local":
            f["store_local"] = 1
        else:
            f[f"store_{_stride_class(_stride(s.index, inner_var))}"] = 1
            accesses.append(_Access(s.buffer, s.index))
        flops_per = (f["float_addsub"] + f["float_mul"] + f["float_div"] + f["float_maxmin"]
                     + f["float_math"] + f["select"])
        f["flops"] = flops_per * executions
        itemsize = np.dtype(s.buffer.dtype).itemsize
        f["bytes_accessed"] = len(accesses) * itemsize * executions
        # Loop structure around the store.
        f["loops"] = len(loops)
        if inner is not None:
            f["innermost_extent"] = inner.extent
            kind = (inner.kind if inner.kind in KINDS
                    else "parallel" if _bound(inner) else "serial")
            f[f"innermost_{kind}"] = 1
        vec = [lp for lp in loops if lp.kind == "vectorized"]
        if vec:
            f["vector_lanes"] = vec[-1].extent
            if vec[-1] is inner and f["store_contiguous"] + f["store_local"] > 0:
                f["vector_effective"] = inner.extent if inner.extent <= 64 else 0
        f["unrolled_body"] = math.prod(lp.extent for lp in loops
                                       if lp.kind == "unrolled" and lp.extent <= 64)
        par = [i for i, lp in enumerate(loops) if lp.kind == "parallel"]
        bound = [i for i, lp in enumerate(loops) if _bound(lp)]
        if bound:  # a GPU dispatch: every invocation of every workgroup runs in parallel
            invocations = math.prod(loops[i].extent for i in bound)
            f["parallel_extent"] = invocations
            f["work_per_thread"] = executions / invocations
            par = [bound[-1]]
        elif par:
            f["parallel_extent"] = loops[par[0]].extent
            f["work_per_thread"] = executions / loops[par[0]].extent
        f["local_elements"] = sum(b.size for b in self.locals)
        f["guarded"] = float(self.guards > 0)
        # Footprints and a two-level cache model.
        for a in accesses:
            a.deps = frozenset(id(v) for v in free_vars(a.index))
        touched = [self._touched(accesses, level) for level in range(len(loops) + 1)]
        f["touched_innermost"] = touched[max(len(loops) - 1, 0)]
        p = par[0] + 1 if par else 0
        f["touched_per_parallel_iter"] = touched[p]
        f["touched_total"] = touched[0]
        for name, cap in zip(("traffic_l1", "traffic_l2"), CACHES):
            level = next((lv for lv in range(len(loops) + 1) if touched[lv] <= cap),
                         len(loops))
            traffic = touched[level] * math.prod(lp.extent for lp in loops[:level])
            f[name] = traffic
        f["intensity_l1"] = f["flops"] / max(f["traffic_l1"], 1.0)
        f["intensity_l2"] = f["flops"] / max(f["traffic_l2"], 1.0)
        per_iter = executions / max(math.prod(lp.extent for lp in loops[:p]), 1)
        f["reuse_per_parallel_iter"] = (len(accesses) * itemsize * per_iter
                                        / max(f["touched_per_parallel_iter"], 1.0))
        return np.array([f[n] for n in STORE_FEATURES], dtype=np.float64)

    def _touched(self, accesses: list[_Access], level: int) -> float:
        """Bytes touched by one iteration of the loops above ``level`` (loops level.. run)."""
        below = self.loops[level:]
        per_buffer: dict[int, float] = {}
        for a in accesses:
            n = 1.0
            for lp in below:
                if id(lp.var) in a.deps:
                    n *= lp.extent
            n = min(n, float(a.buffer.size))
            key = id(a.buffer)
            per_buffer[key] = max(per_buffer.get(key, 0.0), n * np.dtype(a.buffer.dtype).itemsize)
        return float(sum(per_buffer.values()))


def extract_features(func: PrimFunc) -> np.ndarray:
    """The feature vector of one lowered candidate (length :data:`NUM_FEATURES`)."""
    w = _Walker()
    w.stmt(func.body)
    if w.stores:
        stores = np.stack(w.stores)
    else:
        stores = np.zeros((1, len(STORE_FEATURES)))
    flops_col = STORE_FEATURES.index("flops")
    main = stores[int(np.argmax(stores[:, flops_col] + 1e-9 * stores[:, 0]))]
    sums = stores[:, [STORE_FEATURES.index(n) for n in SUM_FEATURES]].sum(axis=0)
    kernel = np.array([len(w.stores), w.loop_nests, w.parallel_loops, w.parallel_launches,
                       sum(b.nbytes for b in func.scratch), stores[:, flops_col].sum()])
    vec = np.concatenate([main, sums, kernel])
    return np.log2(1.0 + np.maximum(np.nan_to_num(vec, nan=0.0, posinf=1e30), 0.0))
