"""Pointwise convolutions computed as matrix products (passes/pointwise_convs.py), end
to end against ONNX Runtime.

``build`` rewrites them only for a GPU whose float16 products run on cooperative matrices
(build._pointwise_products), and no device here runs those artifacts (lavapipe has no
cooperative matrices). So the rewrite is forced on the GPU targets that do run here:
the rewritten graph (the reshaped input, the product with the 2-D weight, the epilogue
moved onto the 3-D value, the reshape back) must give ONNX Runtime's result there, in
float32 and float16, through the ordinary product kernels."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from bench.measure import relative_error
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, build

RTOL = {"fp32": 1e-4, "fp16": 2e-3}


def pointwise_block() -> onnx.ModelProto:
    """Conv 1x1 (bias) + BatchNorm + Relu, Conv 3x3, a 1x1 shortcut Conv added to it,
    Relu, and a last Conv 1x1 whose result is the output: 16 -> 32 -> 32 -> 16 channels
    on 8x8 images, batch 2."""
    rng = np.random.default_rng(4)

    def init(name: str, *shape: int, scale: float = 0.25) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    inits = [init("w1", 32, 16, 1, 1), init("b1", 32), init("gamma", 32, scale=0.1),
             init("beta", 32), init("mean", 32, scale=0.1),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 32).astype(np.float32), "var"),
             init("w2", 32, 32, 3, 3, scale=0.1), init("w3", 32, 16, 1, 1),
             init("w4", 16, 32, 1, 1), init("b4", 16)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], kernel_shape=[1, 1]),
             helper.make_node("BatchNormalization", ["a", "gamma", "beta", "mean", "var"],
                              ["bn"]),
             helper.make_node("Relu", ["bn"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w3"], ["shortcut"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["c", "shortcut"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["r2"]),
             helper.make_node("Conv", ["r2", "w4", "b4"], ["y"], kernel_shape=[1, 1])]
    graph = helper.make_graph(
        nodes, "pointwise_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("target", "precision"), [
    pytest.param("vulkan", "fp32", marks=pytest.mark.vulkan),
    pytest.param("vulkan", "fp16", marks=pytest.mark.vulkan),
    pytest.param("vulkan -float16-arithmetic=1", "fp16", marks=pytest.mark.vulkan),
    pytest.param("opencl", "fp32", marks=pytest.mark.opencl),
])
def test_forced_rewrite_matches_onnx_runtime(target: str, precision: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    build_module = importlib.import_module("tensorsmith.ir.build")
    monkeypatch.setattr(build_module, "_pointwise_products", lambda tgt: lambda a, b: True)
    model = pointwise_block()
    x = np.random.default_rng(1).standard_normal((2, 16, 8, 8)).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, {"x": x})
    mod, params = from_onnx(model)
    lib = build(mod, target=target, params=params, precision=precision)
    ops = [n.op for n in lib.graph.nodes]
    # the three pointwise convolutions became products, the 3x3 one did not
    assert ops.count("matmul") == 3 and ops.count("conv2d") == 1, ops
    artifact = tmp_path / f"block{Target.parse(target).info.suffix}"
    lib.export_library(artifact)
    with rt.load(artifact, device=Target.parse(target).info.device) as module:
        (got,) = module.run({"x": x})
    assert got.shape == want.shape and got.dtype == np.float32
    assert relative_error(got, want) < RTOL[precision]


@pytest.mark.vulkan
def test_without_forcing_plain_vulkan_keeps_the_convolutions() -> None:
    mod, params = from_onnx(pointwise_block())
    lib = build(mod, target="vulkan", params=params, precision="fp16")
    assert [n.op for n in lib.graph.nodes].count("conv2d") == 4
