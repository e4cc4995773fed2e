"""Matrix products and convolutions through the tiled GPU schedules on OpenCL (PoCL):
``__local`` tiles filled between barriers, register tiles, fused epilogues; shapes no
tile divides. One program per test: PoCL compiles each with LLVM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.graph import Graph

pytestmark = pytest.mark.opencl

rng = np.random.default_rng(7)


def check_program(graph: Graph, inputs: dict[str, np.ndarray], tmp_path: Path) -> None:
    lib = build(graph, target="opencl")
    source = lib.kernels.source()
    assert "__local float" in source and "barrier(CLK_LOCAL_MEM_FENCE" in source
    path = tmp_path / "m.tsm"
    lib.export_library(path)
    with rt.load(path, device="opencl") as module:
        got = module.run(inputs)
    for v, g, w in zip(graph.outputs, got, run_graph(graph, inputs)):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3, err_msg=v.name)


def test_gemm_shapes_in_one_program(tmp_path: Path) -> None:
    b = GraphBuilder()
    inputs: dict[str, np.ndarray] = {}
    outs = []
    for i, (m, k, n) in enumerate([(197, 768, 192), (1, 512, 1000), (130, 7, 33)]):
        x = b.input(f"x{i}", (m, k), "float32")
        inputs[f"x{i}"] = rng.standard_normal((m, k)).astype("float32")
        w = b.constant(f"w{i}", rng.standard_normal((k, n)).astype("float32"))
        c = b.constant(f"c{i}", rng.standard_normal((n,)).astype("float32"))
        mm = b.add1("matmul", [x, w], name=f"mm{i}")
        outs.append(b.add1("relu", [b.add1("add", [mm, c], name=f"a{i}")], name=f"r{i}"))
    x = b.input("bx", (2, 4, 33, 20), "float32")
    y = b.input("by", (4, 20, 17), "float32")
    inputs["bx"] = rng.standard_normal((2, 4, 33, 20)).astype("float32")
    inputs["by"] = rng.standard_normal((4, 20, 17)).astype("float32")
    outs.append(b.add1("matmul", [x, y], name="bmm"))
    check_program(b.finish(outs), inputs, tmp_path)


def test_convolutions_in_one_program(tmp_path: Path) -> None:
    b = GraphBuilder()
    inputs: dict[str, np.ndarray] = {}
    outs = []
    cases = [(1, 3, 32, 64, 7, 2, 3), (2, 5, 16, 40, 3, 2, 1), (1, 64, 7, 96, 3, 1, 1),
             (1, 24, 10, 70, 1, 1, 0)]
    for i, (n, c, size, o, k, stride, pad) in enumerate(cases):
        x = b.input(f"x{i}", (n, c, size, size), "float32")
        inputs[f"x{i}"] = rng.standard_normal((n, c, size, size)).astype("float32")
        w = b.constant(f"w{i}", rng.standard_normal((o, c, k, k)).astype("float32"))
        bias = b.constant(f"b{i}", rng.standard_normal((o, 1, 1)).astype("float32"))
        y = b.add1("conv2d", [x, w], {"strides": [stride, stride], "pads": [pad] * 4},
                   name=f"conv{i}")
        outs.append(b.add1("relu", [b.add1("add", [y, bias], name=f"a{i}")], name=f"r{i}"))
    check_program(b.finish(outs), inputs, tmp_path)


def test_workgroup_reductions_in_one_program(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 1000), "float32")
    p = b.input("p", (2, 40, 7, 7), "float32")
    outs = [b.add1("softmax", [x], {"axis": -1}, name="sm"),
            b.add1("argmax", [x], {"axis": 1, "keepdims": False}, name="am"),
            b.add1("reduce_mean", [p], {"axes": [2, 3], "keepdims": True}, name="gap"),
            b.add1("reduce_max", [x], {"axes": [0, 1], "keepdims": False}, name="all")]
    check_program(b.finish(outs), {"x": rng.standard_normal((2, 1000)).astype("float32"),
                                   "p": rng.standard_normal((2, 40, 7, 7)).astype("float32")},
                  tmp_path)
