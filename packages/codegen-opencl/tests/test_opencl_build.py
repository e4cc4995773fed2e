"""Graphs compiled for opencl, exported, loaded on the OpenCL device, compared to the interpreter.

The same kinds of graphs as codegen-llvm's tests, but several ops share one graph (one
output each), because every graph is one OpenCL program and PoCL compiles each program
with LLVM: fewer, larger programs keep this file fast. PoCL (pocl-opencl-icd) is enough.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, TargetError, build, run_graph
from tensorsmith.ir.graph import Graph

pytestmark = pytest.mark.opencl

rng = np.random.default_rng(3)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def compile_run(graph: Graph, inputs: dict[str, np.ndarray], tmp_path: Path) -> list[np.ndarray]:
    lib = build(graph, target="opencl")
    path = tmp_path / "m.tsm"
    lib.export_library(path)
    with rt.load(path, device="opencl") as module:
        return module.run(inputs)


def check(graph: Graph, inputs: dict[str, np.ndarray], tmp_path: Path, tol: float = 1e-5) -> None:
    got = compile_run(graph, inputs, tmp_path)
    want = run_graph(graph, inputs)
    assert len(got) == len(want)
    for v, g, w in zip(graph.outputs, got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, v.name
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=v.name)


def test_unary_ops(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 37), "float32")
    p = b.input("p", (3, 37), "float32")
    outs = [b.add1(op, [x], name=op) for op in ["relu", "neg", "exp", "tanh", "erf", "abs",
                                                "sigmoid", "floor", "ceil"]]
    outs += [b.add1(op, [p], name=op) for op in ["log", "sqrt", "reciprocal"]]
    outs.append(b.add1("clip", [x], {"min": -0.5, "max": 0.75}, name="clip"))
    outs.append(b.add1("leaky_relu", [x], {"alpha": 0.1}, name="leaky"))
    x_in = rng.standard_normal((3, 37)).astype("float32") * 3
    x_in[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    check(b.finish(outs), {"x": x_in, "p": rng.uniform(0.1, 5, (3, 37)).astype("float32")},
          tmp_path)


def test_broadcast_binary_ops(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5), "float32")
    y = b.input("y", (3, 1), "float32")
    ops = ["add", "sub", "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq"]
    outs = [b.add1(op, [x, y], name=op) for op in ops]
    x_in = rng.standard_normal((2, 3, 5)).astype("float32")
    x_in[0, 0, 0] = np.nan  # max/min propagate NaN, comparisons with NaN are false
    x_in[1, 2, :] = 1.25  # equal to y[2] below, so eq has true lanes
    y_in = rng.uniform(0.5, 2, (3, 1)).astype("float32")
    y_in[2, 0] = 1.25
    check(b.finish(outs), {"x": x_in, "y": y_in}, tmp_path)


def test_integer_and_bool_ops(tmp_path: Path) -> None:
    """Integer Div truncates (floordiv/floormod of negatives), int8 wraps, bool is uchar."""
    b = GraphBuilder()
    i = b.input("i", (4, 6), "int64")
    j = b.input("j", (6,), "int64")
    s = b.input("s", (4, 6), "int32")
    c = b.input("c", (4, 6), "bool")
    t = b.input("t", (4, 6), "int8")
    outs = [b.add1(op, [i, j], name=f"{op}64") for op in ["div", "max", "min", "mul", "sub"]]
    outs.append(b.add1("abs", [i], name="iabs"))
    outs.append(b.add1("div", [s, b.add1("cast", [j], {"dtype": "int32"})], name="div32"))
    outs.append(b.add1("add", [t, t], name="add8"))  # wraps around at 8 bits
    lt = b.add1("lt", [i, j], name="lt")
    outs += [lt, b.add1("and", [lt, c], name="and"), b.add1("or", [lt, c], name="or")]
    outs.append(b.add1("where", [c, i, j], name="where"))
    outs.append(b.add1("cast", [c], {"dtype": "float32"}, name="bool2f"))
    outs.append(b.add1("cast", [s], {"dtype": "bool"}, name="i2bool"))
    j_in = np.array([3, -3, 7, -7, 1, -2], "int64")
    check(b.finish(outs), {
        "i": rng.integers(-50, 50, (4, 6)).astype("int64"),
        "j": j_in,
        "s": rng.integers(-3, 3, (4, 6)).astype("int32"),
        "c": rng.random((4, 6)) < 0.5,
        "t": rng.integers(-128, 128, (4, 6)).astype("int8"),
    }, tmp_path)


def test_matmul_bias_relu_odd_sizes(tmp_path: Path) -> None:
    b = GraphBuilder()
    feed, outs = {}, []
    for n, (m, k, width) in enumerate([(1, 784, 256), (7, 33, 130), (64, 64, 300)]):
        x = b.input(f"x{n}", (m, k), "float32")
        w = b.constant(f"w{n}", rng.standard_normal((k, width)).astype("float32"))
        c = b.constant(f"c{n}", rng.standard_normal((width,)).astype("float32"))
        mm = b.add1("matmul", [x, w], name=f"mm{n}")
        outs.append(b.add1("relu", [b.add1("add", [mm, c], name=f"a{n}")], name=f"r{n}"))
        feed[f"x{n}"] = rng.standard_normal((m, k)).astype("float32")
    check(b.finish(outs), feed, tmp_path, 1e-4)


def test_batched_matmul_broadcast(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 6), "float32")
    y = b.input("y", (4, 6, 3), "float32")
    g = b.finish([b.add1("matmul", [x, y], name="bmm")])
    check(g, {"x": rng.standard_normal((2, 4, 5, 6)).astype("float32"),
              "y": rng.standard_normal((4, 6, 3)).astype("float32")}, tmp_path, 1e-4)


def test_softmax_over_each_axis(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 9, 50), "float32")
    outs = [b.add1("softmax", [x], {"axis": axis}, name=f"sm{axis}") for axis in (-1, 0, 1)]
    check(b.finish(outs), {"x": rng.standard_normal((4, 9, 50)).astype("float32") * 5},
          tmp_path)


def test_reductions(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 4, 70), "float32")
    outs = [b.add1(op, [x], {"axes": [1, 2], "keepdims": False}, name=op)
            for op in ["reduce_sum", "reduce_max", "reduce_min", "reduce_mean"]]
    outs.append(b.add1("reduce_sum", [x], {"axes": [0], "keepdims": True}, name="keep"))
    outs.append(b.add1("reduce_max", [x], {"axes": [0, 1, 2], "keepdims": False}, name="all"))
    check(b.finish(outs), {"x": rng.standard_normal((3, 4, 70)).astype("float32")}, tmp_path,
          1e-4)


def test_transpose_reshape_and_casts(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4), "float32")
    t = b.add1("transpose", [x], {"perm": [2, 0, 1]}, name="t")
    r = b.add1("reshape", [t], {"shape": [4, 6]}, name="r")
    i = b.add1("cast", [r], {"dtype": "int32"}, name="c")
    d = b.add1("cast", [r], {"dtype": "float64"}, name="d")
    e = b.add1("exp", [d], name="e64")
    g = b.finish([r, i, e])
    check(g, {"x": rng.standard_normal((2, 3, 4)).astype("float32") * 10}, tmp_path)


def test_output_that_is_an_input_and_a_constant_output(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (3,), "float32")
    c = b.constant("c", np.arange(4, dtype="int64"))
    g = b.finish([x, c])
    check(g, {"x": np.array([1, 2, 3], "float32")}, tmp_path)


def test_mlp_example_matches_onnxruntime(tmp_path: Path) -> None:
    # Only the package's own nox session (test-codegen-opencl) lacks the frontend; the
    # full-stack `tests` session that CI runs has it and onnxruntime, so this runs there.
    frontend = pytest.importorskip("tensorsmith.frontend.onnx",
                                   reason="tensorsmith-frontend-onnx is not installed")
    ort = pytest.importorskip("onnxruntime")

    graph, params = frontend.from_onnx(EXAMPLES / "mlp.onnx", shape={"input": (3, 784)})
    path = tmp_path / "mlp.tsm"
    build(graph, target="opencl", params=params).export_library(path)
    x = rng.standard_normal((3, 784)).astype("float32")
    with rt.load(path, device="opencl") as module:
        (got,) = module.run({"input": x})
    session = ort.InferenceSession(str(EXAMPLES / "mlp.onnx"), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"input": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_float16_runs_without_cl_khr_fp16(tmp_path: Path) -> None:
    """float16 kernels run on every device by default (half memory, float arithmetic);
    ``-float16-arithmetic=1`` computes in half, runs where the device has cl_khr_fp16
    and fails clearly elsewhere."""
    from tensorsmith.runtime.opencl import list_devices

    b = GraphBuilder()
    x = b.input("x", (5, 7), "float16")
    g = b.finish([b.add1("relu", [b.add1("mul", [x, x], name="sq")], name="r")])
    x_in = rng.standard_normal((5, 7)).astype("float16")
    want = run_graph(g, {"x": x_in})[0]

    lib = build(g, target="opencl")
    assert lib.kernels.metadata()["extensions"] == []
    lib.export_library(tmp_path / "half.tsm")
    with rt.load(tmp_path / "half.tsm", device="opencl") as module:
        np.testing.assert_array_equal(module.run({"x": x_in})[0], want)  # one rounding

    lib = build(g, target="opencl -float16-arithmetic=1")
    assert lib.kernels.metadata()["extensions"] == ["cl_khr_fp16"]
    path = tmp_path / "half_arithmetic.tsm"
    lib.export_library(path)
    if "cl_khr_fp16" in list_devices()[0].extensions.split():
        with rt.load(path, device="opencl") as module:
            np.testing.assert_array_equal(module.run({"x": x_in})[0], want)
    else:  # PoCL on CPUs
        with pytest.raises(rt.DeviceError, match="needs the OpenCL extension cl_khr_fp16"):
            rt.load(path, device="opencl")


def test_bad_float16_arithmetic_option_is_refused() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float16")
    g = b.finish([b.add1("relu", [x], name="r")])
    with pytest.raises(TargetError, match=r"target 'opencl -float16-arithmetic=half': "
                                          "-float16-arithmetic=half is not 0 or 1"):
        build(g, target="opencl -float16-arithmetic=half")


def test_sources_and_artifact_layout(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (8,), "float32")
    w = b.constant("w", np.full(8, 2.0, "float32"))
    lib = build(b.finish([b.add1("mul", [b.add1("exp", [x], name="e"), w], name="m")]),
                target="opencl")
    assert "func tsm_kernel_0" in lib.get_source("tir")
    assert "__kernel" in lib.get_source("opencl")
    assert "void tsm_kernel_0_d0(" in lib.get_source("opencl")
    with pytest.raises(ValueError, match="no 'llvm' source for the opencl target"):
        lib.get_source("llvm")
    path = tmp_path / "m.tsm"
    lib.export_library(path)
    artifact = rt.read_artifact(path)
    assert artifact.target == "opencl" and artifact.payload_length == 0
    assert artifact.section_names() == ["opencl.source", "params"]
    assert artifact.section("opencl.source").decode() == lib.get_source("opencl")
    assert artifact.section("params")[:32] == np.full(8, 2.0, "float32").tobytes()
    entry = artifact.metadata["opencl"]
    assert entry["version"] == 1 and entry["extensions"] == []
    dispatches = entry["kernels"]["tsm_kernel_0"]
    assert dispatches == [{"entry": "tsm_kernel_0_d0", "grid": [1, 1, 1],
                           "workgroup": [8, 1, 1]}]
