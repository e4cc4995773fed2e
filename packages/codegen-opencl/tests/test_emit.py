"""Hand-built tensor-IR functions through the OpenCL C emitter, run on the device directly.

Graph ops reach only part of the tensor IR; these functions reach the rest: every math
call, float constants inf/nan, floor semantics of negative integers, NaN-propagating
max/min, bool buffers, private and workgroup (``__local``) allocations, barriers and
if/else. All functions go into ONE program, compiled once for the module, so the file
stays fast on PoCL. Expectations are NumPy's (with the LLVM backend's semantics).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from tensorsmith.codegen.opencl import emit as emit_module
from tensorsmith.codegen.opencl import emit_program
from tensorsmith.codegen.opencl.dtypes import literal
from tensorsmith.codegen.opencl.emit import SKIPPABLE_UNROLL_MAX
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Select, Var, const
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

pytestmark = pytest.mark.opencl

WG = 8  # work-group size of the hand-built functions
N = 20  # elements: not a multiple of WG, so the bounds check matters


def gpu_nest(n: int, body: Callable[[Expr, Var, Var], Stmt]) -> Stmt:
    """``for blockIdx.x: for threadIdx.x: if (i < n) body(i)`` as schedules/gpu.py makes it."""
    bx, tx = Var("blockIdx"), Var("threadIdx")
    i = bx * WG + tx
    inner = IfThenElse(i < n, body(i, bx, tx))
    return For(bx, -(-n // WG), "blockIdx.x", For(tx, WG, "threadIdx.x", inner))


def ld(buf: Buffer, i: Expr) -> Expr:
    return Load(buf, (i,), buf.dtype)


def bin_(op: str, a: Expr, b: Expr) -> Expr:
    dtype = "bool" if op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or") else a.dtype
    return Binary(op, a, b, dtype)  # unfolded, so the codegen sees the node itself


@dataclass
class Case:
    """A function with one output, its input arrays and the expected output."""

    func: PrimFunc
    inputs: list[np.ndarray]
    expected: np.ndarray
    exact: bool = False


def elementwise(name: str, in_dtypes: list[str], out_dtype: str,
                fn: Callable[..., Expr], inputs: list[np.ndarray], expected: np.ndarray,
                exact: bool = False) -> Case:
    ins = [Buffer(f"x{k}", (N,), dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("out", (N,), out_dtype)
    body = gpu_nest(N, lambda i, bx, tx: Store(out, i, fn(*[ld(b, i) for b in ins])))
    return Case(PrimFunc(name, [*ins, out], body, len(ins), 1), inputs, expected, exact)


def _floats(*values: float) -> np.ndarray:
    out = np.resize(np.array(values, "float32"), N)
    return out.astype("float32")


SPECIAL = _floats(np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, 1.5, 2.5, -2.5, -1.7, 3.3, 1e-30)
OTHER = _floats(1.0, np.nan, 2.0, -3.0, 0.25, 7.0, -1.0)
POSITIVE = np.linspace(0.1, 0.9, N).astype("float32")
INTS = np.resize(np.array([7, -7, 6, -6, 0, 13, -13, 1, -1, 100], "int64"), N)
DIVISORS = np.resize(np.array([2, 2, -4, -4, 3, -5, 5, 1, -1, 7], "int64"), N)
ERF = np.vectorize(math.erf, otypes=["float64"])


def _cases() -> list[Case]:
    f32, i64 = "float32", "int64"
    c = []

    def unary_call(fn: str, data: np.ndarray, want: np.ndarray) -> None:
        c.append(elementwise(f"call_{fn}", [f32], f32, lambda a: Call(fn, (a,), f32), [data],
                             want.astype(f32)))

    with np.errstate(all="ignore"):
        for fn, ref in [("exp", np.exp), ("tanh", np.tanh), ("abs", np.abs),
                        ("floor", np.floor), ("ceil", np.ceil), ("round", np.round),
                        ("trunc", np.trunc), ("sin", np.sin), ("cos", np.cos)]:
            unary_call(fn, SPECIAL, ref(SPECIAL))
        unary_call("erf", SPECIAL, ERF(SPECIAL))
        for fn, ref in [("log", np.log), ("sqrt", np.sqrt)]:
            unary_call(fn, POSITIVE, ref(POSITIVE))
        c.append(elementwise("call_pow", [f32, f32], f32, lambda a, b: Call("pow", (a, b), f32),
                             [POSITIVE, SPECIAL], np.power(POSITIVE, SPECIAL)))
        for fn, ref in [("isnan", np.isnan), ("isinf", np.isinf)]:
            c.append(elementwise(f"call_{fn}", [f32], "bool",
                                 lambda a, fn=fn: Call(fn, (a,), "bool"), [SPECIAL],
                                 ref(SPECIAL), exact=True))
        for op, ref in [("max", np.maximum), ("min", np.minimum)]:
            c.append(elementwise(f"nan_{op}", [f32, f32], f32,
                                 lambda a, b, op=op: bin_(op, a, b), [SPECIAL, OTHER],
                                 ref(SPECIAL, OTHER)))
        # float floordiv is floor(a / b) and floormod a - floor(a / b) * b, as in the LLVM
        # backend (NumPy's divmod-based versions differ at infinities)
        quotient = np.floor(SPECIAL / OTHER)
        for op, want in [("floordiv", quotient), ("floormod", SPECIAL - quotient * OTHER)]:
            c.append(elementwise(f"f_{op}", [f32, f32], f32, lambda a, b, op=op: bin_(op, a, b),
                                 [SPECIAL, OTHER], want))
        for op, ref in [("floordiv", np.floor_divide), ("floormod", np.mod)]:
            c.append(elementwise(f"i_{op}", [i64, i64], i64, lambda a, b, op=op: bin_(op, a, b),
                                 [INTS, DIVISORS], ref(INTS, DIVISORS), exact=True))
        for op, ref in [("ne", np.not_equal), ("lt", np.less), ("ge", np.greater_equal)]:
            c.append(elementwise(f"cmp_{op}", [f32, f32], "bool",
                                 lambda a, b, op=op: bin_(op, a, b), [SPECIAL, OTHER],
                                 ref(SPECIAL, OTHER), exact=True))
    # constants inf, -inf, nan and a float that needs all its digits
    consts = [Const(math.inf, f32), Const(-math.inf, f32), Const(math.nan, f32),
              Const(0.1, f32), Const(-3.4028234663852886e38, f32), Const(1 / 3, f32)]
    for k, k_const in enumerate(consts):
        c.append(elementwise(f"const{k}", [f32], f32, lambda a, k_const=k_const: k_const,
                             [SPECIAL], np.full(N, np.float32(k_const.value)), exact=True))
    # casts: float -> bool is true for NaN, bool -> float, float -> int truncates, int8 wraps
    c.append(elementwise("cast_bool", [f32], "bool", lambda a: Cast(a, "bool"), [SPECIAL],
                         SPECIAL != 0, exact=True))
    c.append(elementwise("cast_int", [f32], "int32", lambda a: Cast(a, "int32"),
                         [np.nan_to_num(SPECIAL, posinf=0, neginf=0)],
                         np.nan_to_num(SPECIAL, posinf=0, neginf=0).astype("int32"), exact=True))
    wrap = np.resize(np.array([100, -100, 127, -128, 5], "int8"), N)
    c.append(elementwise("int8_mul", ["int8", "int8"], "int8", lambda a, b: bin_("mul", a, b),
                         [wrap, wrap], wrap * wrap, exact=True))
    c.append(elementwise("int64_const", [i64], i64,
                         lambda a: bin_("add", a, const(-(2**62), i64)), [INTS],
                         INTS - 2**62, exact=True))
    # bool in and out (uchar in memory), select, and/or, iabs
    flags = np.resize(np.array([True, False, False, True, True]), N)
    c.append(elementwise(
        "bool_logic", ["bool", f32], "bool",
        lambda a, b: Select(bin_("and", a, bin_("ge", b, Const(0.0, f32))),
                            bin_("lt", b, Const(1.5, f32)), bin_("or", a, bin_("ne", b, b)),
                            "bool"),
        [flags, OTHER], np.where(flags & (OTHER >= 0), OTHER < 1.5, flags | np.isnan(OTHER)),
        exact=True))
    c.append(elementwise("iabs", [i64], i64, lambda a: Call("iabs", (a,), i64), [INTS],
                         np.abs(INTS), exact=True))
    c.append(_local_and_private_memory())
    c.append(_prefetch_behind_a_guard())
    return c


def _local_and_private_memory() -> Case:
    """Reverse each work-group's slice through __local memory (barrier between write and
    read), then sum a private array filled by an unrolled loop; if/else picks the sign."""
    n = 4 * WG
    x = Buffer("x", (n,), "float32")
    out = Buffer("out", (n,), "float32")
    shared = Buffer("tile", (WG,), "float32", scope="shared")
    private = Buffer("acc", (3,), "float32", scope="local")
    bx, tx, k, m = Var("bx"), Var("tx"), Var("k"), Var("m")
    i = bx * WG + tx
    rev = ld(shared, (WG - 1) - tx)
    fill = For(k, 3, "unrolled", Store(private, k, rev * Cast(k, "float32")))
    total = Load(private, (const(0),), "float32")
    add = For(m, 2, "serial", Store(private, const(0),
                                    total + Load(private, (m + 1,), "float32")))
    pick = IfThenElse(bin_("lt", tx, const(4)), Store(out, i, total),
                      Store(out, i, Binary("sub", Const(0.0, "float32"), total, "float32")))
    body = Seq([Store(shared, tx, ld(x, i)), Barrier(),
                Allocate(private, Seq([fill, add, pick]))])
    nest = For(bx, 4, "blockIdx.x", For(tx, WG, "threadIdx.x", Allocate(shared, body)))
    data = np.arange(n, dtype="float32")
    reversed_ = data.reshape(4, WG)[:, ::-1].reshape(-1)
    sign = np.where(np.arange(n) % WG < 4, 1, -1)
    want = (reversed_ * 3 * sign).astype("float32")
    return Case(PrimFunc("memory", [x, out], nest, 1, 1), [data], want)


def _prefetch_behind_a_guard() -> Case:
    """The shape of a tile prefetch (te/tiles.py): in a loop with barriers, the next
    step's values are loaded into registers under ``if (i + 1 < steps)``, by a copy loop
    that stays a loop (36 copies, the index a division), then a per-work-item test of
    the next load. PoCL 3.1 (LLVM 15, AVX-512 host) gave every work-item work-item 0's
    side of that test unless the copy loop is unrolled, so ``out`` came back all zeros.

    Each work-item sums ``x[i - 1]`` over the steps when its id is odd (0 when even) times
    a weight that ``w`` holds once per step; the copy loop stages a row of ``w`` through
    ``__local`` memory."""
    f32 = "float32"
    steps, rows = 64, 36
    x = Buffer("x", (steps,), f32)
    w = Buffer("w", (steps * rows * PREFETCH_WG,), f32)
    out = Buffer("out", (PREFETCH_WG,), f32)
    tile = Buffer("tile", (rows * PREFETCH_WG,), f32, scope="shared")
    held = Buffer("held", (PREFETCH_WG,), f32, scope="shared")
    acc = Buffer("acc", (1,), f32, scope="local")
    w_next = Buffer("w_next", (rows,), f32, scope="local")
    x_next = Buffer("x_next", (1,), f32, scope="local")
    bx, tx, i, r1, r2, r3 = (Var(n) for n in ("bx", "tx", "i", "r1", "r2", "r3"))
    zero = Const(0.0, f32)
    first = const(0)

    def w_row(r: Var, step: Expr) -> Expr:
        # element r * WG + tx of the step's tile: w[step][(r * WG + tx) // rows]
        return bin_("add", bin_("mul", step, const(rows * PREFETCH_WG)),
                    bin_("floordiv", r * PREFETCH_WG + tx, const(rows)))

    following = bin_("add", i, const(1))
    prefetch = Seq([
        For(r3, rows, "serial", Store(w_next, r3, ld(w, w_row(r3, following)))),
        IfThenElse(bin_("eq", bin_("floormod", tx, const(2)), const(1)),
                   Store(x_next, first, ld(x, i)), Store(x_next, first, zero)),
    ])
    step = Seq([
        Barrier(),
        For(r2, rows, "serial", Store(tile, r2 * PREFETCH_WG + tx, ld(w_next, r2))),
        Store(held, tx, ld(x_next, first)),
        Barrier(),
        IfThenElse(bin_("lt", following, const(steps)), prefetch),
        Store(acc, first, ld(acc, first) + ld(held, tx) * ld(tile, tx * rows)),
    ])
    body = Seq([
        Store(acc, first, zero),
        Store(x_next, first, zero),
        For(r1, rows, "serial", Store(w_next, r1, ld(w, w_row(r1, first)))),
        For(i, steps, "serial", step),
        Store(out, tx, ld(acc, first)),
    ])
    for buf in (x_next, w_next, acc, held, tile):
        body = Allocate(buf, body)
    nest = For(bx, 1, "blockIdx.x", For(tx, PREFETCH_WG, "threadIdx.x", body))
    rng = np.random.default_rng(1)
    xs = rng.standard_normal(steps).astype(f32)
    ws = rng.standard_normal(steps * rows * PREFETCH_WG).astype(f32)
    # work-item t reads tile[t * rows], staged by step s as w[s * rows * WG + t]; the x it
    # reads at step s was loaded at step s - 1 (x[s - 1], zero at step 0), odd t only
    t = np.arange(PREFETCH_WG)
    weights = ws.reshape(steps, rows * PREFETCH_WG)[1:, t]  # steps 1.., per work-item
    want = (xs[:-1, None] * weights).sum(0) * (t % 2)
    return Case(PrimFunc("prefetch", [x, w, out], nest, 2, 1), [xs, ws], want.astype(f32))


PREFETCH_WG = 64  # the prefetch case's work-group: one group
CASES = _cases()


@pytest.fixture(scope="module")
def results() -> dict[str, np.ndarray]:
    """Every case compiled into one program and run once."""
    return run_cases(CASES)


def run_cases(cases: list[Case]) -> dict[str, np.ndarray]:
    """``cases`` emitted into one program, run on the first OpenCL device: the output of
    each, by function name."""
    import pyopencl as cl

    from tensorsmith.runtime.opencl import list_devices

    program = emit_program([case.func for case in cases])
    ctx = cl.Context([list_devices()[0]])
    queue = cl.CommandQueue(ctx)
    built = cl.Program(ctx, program.source).build()
    out = {}
    mf = cl.mem_flags
    for case in cases:
        arrays = [a.astype("uint8") if a.dtype == bool else a for a in case.inputs]
        result = np.zeros(case.expected.shape, "uint8" if case.expected.dtype == bool
                          else case.expected.dtype)
        bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a) for a in arrays]
        bufs.append(cl.Buffer(ctx, mf.READ_WRITE, result.nbytes))
        for d in program.dispatches[case.func.name]:
            kernel = cl.Kernel(built, d["entry"])
            kernel.set_args(*bufs)
            global_size = [g * w for g, w in zip(d["grid"], d["workgroup"])]
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, d["workgroup"])
        cl.enqueue_copy(queue, result, bufs[-1])
        out[case.func.name] = result.astype(bool) if case.expected.dtype == bool else result
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.func.name for c in CASES])
def test_function(case: Case, results: dict[str, np.ndarray]) -> None:
    got = results[case.func.name]
    if case.exact:
        np.testing.assert_array_equal(got, case.expected)
    else:
        np.testing.assert_allclose(got, case.expected, rtol=1e-5, atol=1e-6)


def test_prefetch_too_large_to_unroll_behind_a_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_prefetch_behind_a_guard`` with its copy loop over the unroll limit: the loop stays
    and the guard moves into it, which PoCL runs correctly too."""
    monkeypatch.setattr(emit_module, "SKIPPABLE_UNROLL_MAX", 8)
    case = _prefetch_behind_a_guard()
    source = emit_program([case.func]).source
    assert "#pragma unroll" not in source
    got = run_cases([case])[case.func.name]
    np.testing.assert_allclose(got, case.expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value, dtype, text", [
    (0.1, "float32", "0.10000000149011612f"),
    (-2.5, "float32", "(-2.5f)"),
    (1, "float32", "1.0f"),
    (math.inf, "float32", "INFINITY"),
    (-math.inf, "float64", "((double)(-INFINITY))"),
    (math.nan, "float16", "((half)NAN)"),
    (0.1, "float64", "0.1"),
    (-(2**63), "int64", "(-9223372036854775807L - 1L)"),
    (-3, "int32", "(-3)"),
    (200, "uint8", "((uchar)200)"),
    (True, "bool", "1"),
])
def test_literals(value: float, dtype: str, text: str) -> None:
    assert literal(value, dtype) == text


def test_literal_out_of_range_is_refused() -> None:
    with pytest.raises(ModelError, match="does not fit in int8"):
        literal(300, "int8")


def test_dispatch_table_and_extensions() -> None:
    x, y = Buffer("x", (N,), "float16"), Buffer("y", (N,), "float16")
    body = gpu_nest(N, lambda i, bx, tx: Store(y, i, ld(x, i)))
    func = PrimFunc("copy_half", [x, y], Seq([body, body]), 1, 1)
    assert emit_program([func]).extensions == []  # half memory needs no extension
    program = emit_program([func], float16_arithmetic=True)
    assert program.extensions == ["cl_khr_fp16"]
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in program.source
    assert program.dispatches == {"copy_half": [
        {"entry": "copy_half_d0", "grid": [3, 1, 1], "workgroup": [WG, 1, 1]},
        {"entry": "copy_half_d1", "grid": [3, 1, 1], "workgroup": [WG, 1, 1]}]}
    assert "__global const half* restrict x" in program.source


def test_bound_loop_inside_a_stage_is_refused() -> None:
    x = Buffer("x", (N,), "float32")
    t = Var("t")
    inner = For(t, WG, "threadIdx.x", Store(x, t, Const(0.0, "float32")))
    func = PrimFunc("bad", [x], For(Var("s"), 2, "serial", inner), 0, 1)
    with pytest.raises(ModelError, match=r"bound to threadIdx\.x but is not one of the outermost"):
        emit_program([func])


@pytest.mark.parametrize("barrier", [True, False], ids=["barrier", "no_barrier"])
def test_loops_a_uniform_if_skips_are_unrolled_in_kernels_with_barriers(barrier: bool) -> None:
    """The PoCL workaround of ``_prefetch_behind_a_guard``: when the kernel has barriers, a
    constant loop under an ``if`` every work-item decides alike is fully unrolled, and one
    too large to unroll takes the ``if`` inside; a loop under a per-work-item ``if`` and
    the loops of a kernel without barriers are left as they are."""
    x = Buffer("x", (N,), "float32")
    bx, tx = Var("bx"), Var("tx")
    loops = {name: Var(name) for name in ("uniform_r", "divergent_r", "large_r")}

    def copy(name: str, extent: int) -> Stmt:
        r = loops[name]
        return For(r, extent, "serial", Store(x, bin_("floormod", r, const(N)), ld(x, tx)))

    body = Seq([
        *([Barrier()] if barrier else []),
        IfThenElse(bin_("lt", bx, const(1)), copy("uniform_r", 36)),
        IfThenElse(bin_("lt", tx, const(4)), copy("divergent_r", 36)),
        IfThenElse(bin_("lt", bx, const(1)), copy("large_r", SKIPPABLE_UNROLL_MAX + 1)),
    ])
    nest = For(bx, 1, "blockIdx.x", For(tx, WG, "threadIdx.x", body))
    lines = [line.strip() for line in
             emit_program([PrimFunc("skips", [x], nest, 0, 1)]).source.splitlines()]
    at = {name: next(k for k, line in enumerate(lines) if f"for (long {name} = 0;" in line)
          for name in loops}
    unrolled = {name for name, k in at.items() if lines[k - 1] == "#pragma unroll"}
    assert unrolled == ({"uniform_r"} if barrier else set())
    large = at["large_r"]
    guard = "if ((bx < 1L)) {"
    if barrier:  # the guard moved inside the loop
        assert lines[large - 1] != guard and lines[large + 1] == guard
    else:
        assert lines[large - 1] == guard and lines[large + 1] != guard
