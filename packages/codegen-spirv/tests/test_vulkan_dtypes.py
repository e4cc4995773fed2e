"""Every dtype through storage, registers and casts; integer semantics; math accuracy;
grids wider than the portable workgroup count."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check, compile_vulkan

from tensorsmith.ir import GraphBuilder

pytestmark = pytest.mark.vulkan

CASTS = ["int8", "uint8", "int16", "int32", "int64", "float16", "float64", "bool"]


@pytest.mark.parametrize("dtype", CASTS)
def test_cast_there_and_back(dtype: str, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 13), "float32")
    there = b.add1("cast", [x], {"dtype": dtype}, name="there")
    back = b.add1("cast", [there], {"dtype": "float32"}, name="back")
    g = b.finish([there, back])
    low = 0 if dtype in ("uint8", "bool") else -100
    xs = rng.uniform(low, 100, (5, 13)).astype("float32")
    xs[0, :3] = 0.0
    check(g, {"x": xs}, tmp_path, tol=1e-3 if dtype == "float16" else 1e-6)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_integer_arithmetic_wraps_like_numpy(dtype: str, tmp_path: Path,
                                             rng: np.random.Generator) -> None:
    info = np.iinfo(dtype)
    b = GraphBuilder()
    x = b.input("x", (4, 9), dtype)
    y = b.input("y", (9,), dtype)
    s = b.add1("add", [x, y], name="s")
    p = b.add1("mul", [x, y], name="p")
    m = b.add1("max", [x, y], name="m")
    lt = b.add1("lt", [x, y], name="lt")
    g = b.finish([s, p, m, lt])
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    xs = rng.integers(lo, hi, (4, 9), dtype=dtype, endpoint=True)
    ys = rng.integers(lo, hi, (9,), dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        check(g, {"x": xs, "y": ys}, tmp_path, tol=0)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_truncates_toward_zero(dtype: str, tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (8,), dtype)
    y = b.input("y", (8,), dtype)
    g = b.finish([b.add1("div", [x, y], name="d")])
    xs = np.array([7, -7, 7, -7, 0, 13, -2**30, 5], dtype)
    ys = np.array([2, 2, -2, -2, 3, 13, 7, -1], dtype)
    check(g, {"x": xs, "y": ys}, tmp_path, tol=0)


def test_int64_values_beyond_32_bits(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (6,), "int64")
    big = b.constant("big", np.array([2**40], "int64"))
    g = b.finish([b.add1("add", [b.add1("mul", [x, x], name="sq"), big], name="a")])
    check(g, {"x": np.array([3, -5, 2**20, -(2**21), 0, 7], "int64")}, tmp_path, tol=0)


def test_booleans_and_where(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    c = b.input("c", (3, 7), "bool")
    x = b.input("x", (3, 7), "float32")
    pos = b.add1("gt", [x, b.constant("zero", np.zeros((1,), "float32"))], name="pos")
    both = b.add1("and", [c, pos], name="both")
    either = b.add1("or", [c, pos], name="either")
    w = b.add1("where", [both, x, b.add1("neg", [x], name="n")], name="w")
    g = b.finish([both, either, w])
    check(g, {"c": rng.random((3, 7)) > 0.5,
              "x": rng.standard_normal((3, 7)).astype("float32")}, tmp_path, tol=0)


@pytest.mark.parametrize("dtype,tol", [("float16", 2e-3), ("float64", 1e-6)])
def test_float16_and_float64(dtype: str, tol: float, tmp_path: Path,
                             rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 11), dtype)
    y = b.input("y", (11,), dtype)
    e = b.add1("exp", [b.add1("mul", [x, y], name="m")], name="e")
    s = b.add1("softmax", [b.add1("add", [x, y], name="a")], {"axis": -1}, name="sm")
    g = b.finish([e, s])
    check(g, {"x": rng.standard_normal((4, 11)).astype(dtype),
              "y": rng.standard_normal((11,)).astype(dtype)}, tmp_path, tol)


@pytest.mark.parametrize("op,bound", [("erf", 2e-7), ("tanh", 3e-7)])
def test_erf_and_tanh_accuracy(op: str, bound: float, tmp_path: Path) -> None:
    """Max absolute error against the float64 functions over a dense grid: erf has no
    GLSL.std.450 instruction and tanh's is imprecise, so both are the emitter's own."""
    xs = np.concatenate([np.linspace(-6, 6, 60001), [0.0, -0.0, 1e-30, 40.0, -40.0]])
    xs = xs.astype("float32")
    b = GraphBuilder()
    x = b.input("x", xs.shape, "float32")
    _, m = compile_vulkan(b.finish([b.add1(op, [x], name=op)]), tmp_path)
    (got,) = m.run({"x": xs})
    fn = math.erf if op == "erf" else math.tanh
    want = np.array([fn(float(v)) for v in xs])
    assert np.abs(got - want).max() < bound
    assert np.isnan(m.run({"x": np.full(xs.shape, np.nan, "float32")})[0]).all()


def test_grid_wider_than_65535_workgroups(tmp_path: Path, rng: np.random.Generator) -> None:
    """65535 x 64 invocations is the portable limit of one dispatch axis: fold into y."""
    n = 65535 * 64 + 1000
    b = GraphBuilder()
    x = b.input("x", (n,), "float32")
    lib, m = compile_vulkan(b.finish([b.add1("neg", [x], name="n")]), tmp_path)
    (module,) = lib.kernels.modules()
    assert module.grid[1] == 2 and module.grid[0] == 65535
    xs = rng.standard_normal(n).astype("float32")
    (got,) = m.run({"x": xs})
    np.testing.assert_array_equal(got, -xs)
