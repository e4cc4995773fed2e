"""DequantizeLinear(QuantizeLinear(x)) with the same per-tensor scale and zero point --
what exporters write around every quantized op -- imports as one clip of the rounded
quotient times the scale: no integer tensor, no casts. The values are ONNX's bit for
bit, ties to even and saturation included, checked against ONNX Runtime's reference
kernels (graph optimizations off: no fused integer kernels)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.passes.dce import eliminate_dead_code
from tensorsmith.ir.text import print_graph


def _qdq(dtype: int, zero: int, scale: float, same: bool = True) -> onnx.ModelProto:
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "s"),
             numpy_helper.from_array(np.array(zero, np_dtype), "z"),
             numpy_helper.from_array(np.array(scale * (1 if same else 2), np.float32), "s2")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s" if same else "s2", "z"], ["y"],
                              name="dq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [13])],
                              [helper.make_tensor_value_info("y", 1, [13])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype, zero", [(TensorProto.UINT8, 3), (TensorProto.UINT8, 128),
                                         (TensorProto.INT8, -5), (TensorProto.INT8, 0)])
def test_a_quantize_dequantize_pair_is_one_clip(dtype: int, zero: int) -> None:
    scale = 0.25
    model = _qdq(dtype, zero, scale)
    graph, _ = from_onnx(model)
    text = print_graph(eliminate_dead_code(graph.copy()))
    assert "cast(" not in text and "int32" not in text and "clip(" in text, text
    # ties to even on both sides of the zero point (odd and even), then saturation
    k = np.arange(-6, 7, dtype=np.float32)
    for x in (k * scale + scale / 2, k * 40.0, k * scale * 0.75):
        want = _reference(model, x.astype(np.float32))
        (got,) = run_graph(graph, {"x": x.astype(np.float32)})
        np.testing.assert_array_equal(got, want)


def test_other_parameters_keep_both_ops() -> None:
    graph, _ = from_onnx(_qdq(TensorProto.UINT8, 3, 0.25, same=False))
    text = print_graph(eliminate_dead_code(graph))
    assert "uint8" in text, "a different scale dequantizes the integers"
