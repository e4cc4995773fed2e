"""Graphs compiled for vulkan, checked by spirv-val, run on the Vulkan device, compared
with the interpreter: the same kinds of graphs as codegen-llvm's test_llvm_build.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check, compile_vulkan, dense_bias_relu

from tensorsmith.ir import GraphBuilder, build

pytestmark = pytest.mark.vulkan
UNARY = ["relu", "neg", "exp", "tanh", "erf", "abs", "sigmoid", "floor", "ceil", "reciprocal"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op: str, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 37), "float32")
    g = b.finish([b.add1(op, [x], name=op)])
    check(g, {"x": rng.standard_normal((3, 37)).astype("float32") * 3}, tmp_path)


@pytest.mark.parametrize("op", ["log", "sqrt"])
def test_unary_of_positive(op: str, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 9), "float32")
    g = b.finish([b.add1(op, [x], name=op)])
    check(g, {"x": rng.uniform(0.01, 50, (5, 9)).astype("float32")}, tmp_path)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min", "lt", "eq", "pow"])
def test_broadcast_binary(op: str, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5), "float32")
    y = b.input("y", (3, 1), "float32")
    g = b.finish([b.add1(op, [x, y], name=op)])
    xs = rng.standard_normal((2, 3, 5)).astype("float32")
    if op == "pow":  # negative bases need integral exponents
        ys = np.array([[2.0], [3.0], [0.5]], "float32")
        xs[:, 2] = np.abs(xs[:, 2])
    else:
        ys = rng.uniform(0.5, 2, (3, 1)).astype("float32")
    if op == "eq":
        xs[0, 0, :2] = ys[0, 0]
    check(g, {"x": xs, "y": ys}, tmp_path)


@pytest.mark.parametrize("shape", [(1, 784, 256), (7, 33, 130), (64, 64, 300)])
def test_matmul_bias_relu(shape: tuple[int, int, int], tmp_path: Path,
                          rng: np.random.Generator) -> None:
    graph, inputs = dense_bias_relu(*shape, rng)
    check(graph, inputs, tmp_path, 1e-4)


def test_batched_matmul_broadcast(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 6), "float32")
    y = b.input("y", (4, 6, 3), "float32")
    g = b.finish([b.add1("matmul", [x, y], name="bmm")])
    check(g, {"x": rng.standard_normal((2, 4, 5, 6)).astype("float32"),
              "y": rng.standard_normal((4, 6, 3)).astype("float32")}, tmp_path, 1e-4)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis: int, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 50), "float32")
    g = b.finish([b.add1("softmax", [x], {"axis": axis}, name="sm")])
    check(g, {"x": rng.standard_normal((4, 50)).astype("float32") * 5}, tmp_path)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_mean"])
def test_reductions(op: str, tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 4, 70), "float32")
    g = b.finish([b.add1(op, [x], {"axes": [1, 2], "keepdims": False}, name="r")])
    check(g, {"x": rng.standard_normal((3, 4, 70)).astype("float32")}, tmp_path, 1e-4)


def test_reduction_to_a_scalar(tmp_path: Path, rng: np.random.Generator) -> None:
    """No spatial axis left: a dispatch of one invocation."""
    b = GraphBuilder()
    x = b.input("x", (6, 7), "float32")
    g = b.finish([b.add1("reduce_sum", [x], {"axes": [0, 1], "keepdims": False}, name="r")])
    check(g, {"x": rng.standard_normal((6, 7)).astype("float32")}, tmp_path, 1e-5)


def test_transpose_reshape_and_int_cast(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4), "float32")
    t = b.add1("transpose", [x], {"perm": [2, 0, 1]}, name="t")
    r = b.add1("reshape", [t], {"shape": [4, 6]}, name="r")
    i = b.add1("cast", [r], {"dtype": "int32"}, name="c")
    g = b.finish([r, i])
    check(g, {"x": rng.standard_normal((2, 3, 4)).astype("float32") * 10}, tmp_path)


def test_output_that_is_an_input_and_a_constant_output(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (3,), "float32")
    c = b.constant("c", np.arange(4, dtype="int64"))
    g = b.finish([x, c])
    check(g, {"x": np.array([1, 2, 3], "float32")}, tmp_path)


def test_stateful_interface_and_profile(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 10), "float32")
    w = b.constant("w", rng.standard_normal((10, 3)).astype("float32"))
    h = b.add1("softmax", [b.add1("matmul", [x, w], name="mm")], {"axis": -1}, name="sm")
    _, m = compile_vulkan(b.finish([h]), tmp_path)
    xs = rng.standard_normal((4, 10)).astype("float32")
    (first,) = m.run({"x": xs})
    m.set_input("x", xs)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), first)
    report = m.profile(repeat=2)
    assert [e["calls"] for e in report] == [2] * len(report)
    assert all(e["total_ms"] >= 0 for e in report) and len(report.run_ms) == 2
    m.close()


def test_tir_and_spirv_source_available() -> None:
    b = GraphBuilder()
    x = b.input("x", (8,), "float32")
    lib = build(b.finish([b.add1("exp", [x], name="e")]), target="vulkan")
    assert "func tsm_kernel_0" in lib.get_source("tir")
    text = lib.get_source("spirv")
    assert "OpEntryPoint GLCompute" in text and "LocalSize 8 1 1" in text
    assert "GLSL.std.450" in text


def test_empty_tensor(tmp_path: Path) -> None:
    """Zero elements: zero workgroups (and a LocalSize of at least 1) in every dispatch."""
    b = GraphBuilder()
    x = b.input("x", (0, 3), "float32")
    check(b.finish([b.add1("relu", [x], name="r")]), {"x": np.zeros((0, 3), "float32")},
          tmp_path)
