"""float16 in OpenCL C with and without ``half`` arithmetic (``-float16-arithmetic``).

Without it (the default) float16 lives in memory only, read and written by
``vload_half``/``vstore_half_rte``, and is computed in ``float`` rounded to float16 after
each operation that ``half`` arithmetic rounds; so these kernels run on PoCL, which has no
``cl_khr_fp16``, and give NumPy's float16 results bit for bit where NumPy rounds each op
(+ - * /, sqrt, casts). Each such case also checks that a float32 chain rounded once at
the store would have given other bits, so the test can tell the two apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from tensorsmith.codegen.opencl import emit_program
from tensorsmith.ir.te.expr import Binary, Call, Cast, Const, Expr, Load, Var
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

WG = 8
N = 64
F16, F32 = "float16", "float32"
rng = np.random.default_rng(7)


def gpu_nest(n: int, body: Callable[[Expr, Var, Var], Stmt]) -> Stmt:
    bx, tx = Var("blockIdx"), Var("threadIdx")
    i = bx * WG + tx
    return For(bx, -(-n // WG), "blockIdx.x",
               For(tx, WG, "threadIdx.x", IfThenElse(i < n, body(i, bx, tx))))


def ld(buf: Buffer, i: Expr) -> Expr:
    return Load(buf, (i,), buf.dtype)


def op(name: str, a: Expr, b: Expr) -> Expr:
    return Binary(name, a, b, a.dtype)


def elementwise(name: str, in_dtypes: list[str], out_dtype: str,
                fn: Callable[..., Expr]) -> PrimFunc:
    ins = [Buffer(f"x{k}", (N,), dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("out", (N,), out_dtype)
    body = gpu_nest(N, lambda i, bx, tx: Store(out, i, fn(*[ld(b, i) for b in ins])))
    return PrimFunc(name, [*ins, out], body, len(ins), 1)


def fma_chain() -> PrimFunc:
    """``a * b + c`` in float16: two roundings with half arithmetic."""
    return elementwise("fma_chain", [F16, F16, F16], F16,
                       lambda a, b, c: op("add", op("mul", a, b), c))


def cast_round_trip() -> PrimFunc:
    """``float32(float16(x)) * 3`` in float32: the cast inside the kernel must round."""
    return elementwise("cast_round_trip", [F32], F32,
                       lambda x: op("mul", Cast(Cast(x, F16), F32), Const(3.0, F32)))


def local_and_private() -> PrimFunc:
    """Each work-group's slice of ``x / 3`` reversed through a ``__local`` float16 tile,
    then kept in a private float16 array and added to itself there."""
    x, out = Buffer("x", (N,), F16), Buffer("out", (N,), F16)
    tile = Buffer("tile", (WG,), F16, scope="shared")
    private = Buffer("keep", (1,), F16, scope="local")
    bx, tx = Var("bx"), Var("tx")
    i = bx * WG + tx
    zero = Const(0, "int64")
    body = Seq([Store(tile, tx, op("div", ld(x, i), Const(3.0, F16))), Barrier(),
                Allocate(private, Seq([
                    Store(private, zero, ld(tile, (WG - 1) - tx)),
                    Store(out, i, op("add", ld(private, zero), ld(private, zero)))]))])
    nest = For(bx, N // WG, "blockIdx.x", For(tx, WG, "threadIdx.x", Allocate(tile, body)))
    return PrimFunc("local_and_private", [x, out], nest, 1, 1)


def run(funcs: list[PrimFunc], inputs: dict[str, list[np.ndarray]],
        out_dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    """``funcs`` in one program without float16 arithmetic, run on the first device."""
    import pyopencl as cl

    from tensorsmith.runtime.opencl import list_devices

    program = emit_program(funcs)
    ctx = cl.Context([list_devices()[0]])
    queue = cl.CommandQueue(ctx)
    built = cl.Program(ctx, program.source).build()
    mf = cl.mem_flags
    out = {}
    for func in funcs:
        result = np.zeros(N, out_dtypes[func.name])
        bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
                for a in inputs[func.name]]
        bufs.append(cl.Buffer(ctx, mf.READ_WRITE, result.nbytes))
        for d in program.dispatches[func.name]:
            kernel = cl.Kernel(built, d["entry"])
            kernel.set_args(*bufs)
            cl.enqueue_nd_range_kernel(queue, kernel,
                                       [g * w for g, w in zip(d["grid"], d["workgroup"])],
                                       d["workgroup"])
        cl.enqueue_copy(queue, result, bufs[-1])
        out[func.name] = result
    return out


DOUBLES = np.resize(np.array([1 + 2**-11 + 2**-40, -(1 + 3 * 2**-11 - 2**-40), 0.1,
                               65519.0, 2.0**-24 * 1.5], "float64"), N)


def _half(n: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(n) * scale).astype(F16)


def test_storage_only_source_has_no_half_values() -> None:
    """Without float16 arithmetic: no pragma, ``half`` only as a pointer's target, every
    float16 element of a parameter read by vload_half and written by vstore_half_rte,
    the workgroup tile and the private array in float, and rounding where half would."""
    source = emit_program([fma_chain(), cast_round_trip(), local_and_private()]).source
    assert "cl_khr_fp16" not in source
    assert [m.group(0) for m in re.finditer(r"\bhalf\b(?!\s*\*)", source)] == []
    assert "__global const half* restrict x0" in source
    assert "vload_half(" in source and "vstore_half_rte(" in source
    assert "__local float tile[8];" in source
    assert re.search(r"\bfloat keep\[1\];", source)
    fma = source[source.index("void fma_chain_d0"):source.index("void cast_round_trip_d0")]
    # the product rounded, the sum rounded by its store
    i = "((blockIdx * 8L) + threadIdx)"
    assert (f"vstore_half_rte((tsm_round_half_float((vload_half({i}, x0) * vload_half({i}, "
            f"x1))) + vload_half({i}, x2)), {i}, out);") in fma
    cast = source[source.index("void cast_round_trip_d0"):]
    assert f"tsm_round_half_float(((float)(x0[{i}])))" in cast


def test_half_arithmetic_source() -> None:
    """With float16 arithmetic: the pragma, ``half`` values and plain indexing, no
    vload/vstore_half and no rounding helper."""
    program = emit_program([fma_chain(), cast_round_trip(), local_and_private()],
                           float16_arithmetic=True)
    source = program.source
    assert program.extensions == ["cl_khr_fp16"]
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in source
    assert "__local half tile[8];" in source and "half keep[1];" in source
    i = "((blockIdx * 8L) + threadIdx)"
    assert f"out[{i}] = ((x0[{i}] * x1[{i}]) + x2[{i}]);" in source
    assert f"((half)(x0[{i}]))" in source
    assert "vload_half" not in source and "tsm_round_half" not in source


@pytest.mark.opencl
def test_storage_only_kernels_round_like_half_arithmetic() -> None:
    a, b, c = _half(N, 4), _half(N, 4), _half(N, 4)
    # ties and near-ties of float16 (spacing 2**-10 at 1): ties round to even
    x32 = np.resize(np.array([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, 65519.0,
                              65520.0, -2.0**-25, 3.1415927, 1e-8, np.inf, np.nan],
                             F32), N)
    xs = _half(N, 100)
    got = run([fma_chain(), cast_round_trip(), local_and_private()],
              {"fma_chain": [a, b, c], "cast_round_trip": [x32],
               "local_and_private": [xs]},
              {"fma_chain": F16, "cast_round_trip": F32, "local_and_private": F16})

    want = a * b + c  # NumPy rounds the product to float16, then the sum
    once = (a.astype(F32) * b.astype(F32) + c.astype(F32)).astype(F16)
    assert (want != once).any(), "inputs that tell one rounding from two"
    np.testing.assert_array_equal(got["fma_chain"], want)

    with np.errstate(over="ignore"):  # 65520 and up become inf, as they should
        want = x32.astype(F16).astype(F32) * np.float32(3)
    assert (want != x32 * np.float32(3)).any()
    np.testing.assert_array_equal(got["cast_round_trip"], want)

    third = (xs / np.float16(3)).reshape(-1, WG)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(got["local_and_private"], third + third)


@pytest.mark.opencl
def test_storage_only_math_and_casts() -> None:
    """Math functions within float16's rounding of the float result; sqrt, floor(div),
    NaN-propagating max, casts to int and bool, and float16 constants exactly."""
    x = np.abs(_half(N, 3)) + np.float16(0.01)
    y = _half(N, 3)
    ints = rng.integers(-5000, 5000, N).astype("int32")
    exact = [
        ("sqrt", [F16], F16, lambda a: Call("sqrt", (a,), F16), [x], np.sqrt(x)),
        ("fdiv", [F16, F16], F16, lambda a, b: op("floordiv", a, b), [y, x],
         np.floor(y / x)),
        ("fmax", [F16, F16], F16, lambda a, b: op("max", a, b),
         [y, np.where(np.arange(N) % 5 == 0, np.float16(np.nan), x)],
         np.maximum(y, np.where(np.arange(N) % 5 == 0, np.float16(np.nan), x))),
        ("to_int", [F16], "int32", lambda a: Cast(a, "int32"), [y * np.float16(100)],
         (y * np.float16(100)).astype("int32")),
        ("to_bool", [F16], "uint8", lambda a: Cast(Cast(a, "bool"), "uint8"),
         [np.where(np.arange(N) % 3 == 0, np.float16(0), y)],
         (np.where(np.arange(N) % 3 == 0, np.float16(0), y) != 0).astype("uint8")),
        ("from_int", ["int32"], F16, lambda a: Cast(a, F16), [ints], ints.astype(F16)),
        ("const", [F16], F16, lambda a: op("add", a, Const(0.1, F16)), [y],
         y + np.float16(0.1)),
        # from float64 in one rounding: through float32, 1 + 2**-11 + 2**-40 would become
        # the tie 1 + 2**-11 and round to 1
        ("from_double", ["float64"], F16, lambda a: Cast(a, F16), [DOUBLES],
         DOUBLES.astype(F16)),
    ]
    approx = [
        ("exp", [F16], F16, lambda a: Call("exp", (a,), F16), [y], np.exp(y)),
        ("sigmoid", [F16], F16, lambda a: Call("sigmoid", (a,), F16), [y],
         (1 / (1 + np.exp(-y.astype(F32)))).astype(F16)),
    ]
    cases = exact + approx
    funcs = [elementwise(name, ins, out, fn) for name, ins, out, fn, _, _ in cases]
    got = run(funcs, {name: data for name, _, _, _, data, _ in cases},
              {name: out for name, _, out, _, _, _ in cases})
    for name, _, _, _, _, want in exact:
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    for name, _, _, _, _, want in approx:  # one float16 rounding of float's result
        np.testing.assert_allclose(got[name].astype(F32), want.astype(F32), rtol=2**-10,
                                   err_msg=name)
