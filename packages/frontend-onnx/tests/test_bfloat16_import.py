"""bfloat16 ONNX tensors: graph inputs and outputs, initializers and Cast to and from
BFLOAT16 import as the graph IR's ``bfloat16`` (ml_dtypes arrays) and run on llvm."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build, run_graph

BF16 = np.dtype(ml_dtypes.bfloat16)


def _model():  # noqa: ANN202
    rng = np.random.default_rng(11)
    w = rng.standard_normal((8, 4)).astype(BF16)
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
             helper.make_node("MatMul", ["xb", "w"], ["y"]),
             helper.make_node("Add", ["y", "bias"], ["z"]),
             helper.make_node("Relu", ["z"], ["r"]),
             helper.make_node("Cast", ["r"], ["out"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "bf16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8]),
                        helper.make_tensor_value_info("bias", TensorProto.BFLOAT16, [4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("r", TensorProto.BFLOAT16, [3, 4])],
        [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w


def test_import_types() -> None:
    model, w = _model()
    mod, params = from_onnx(model)
    assert [(v.name, v.dtype) for v in mod.inputs] == [("x", "float32"), ("bias", "bfloat16")]
    assert [(v.name, v.dtype) for v in mod.outputs] == [("out", "float32"), ("r", "bfloat16")]
    assert params["w"].dtype == BF16
    np.testing.assert_array_equal(params["w"].view(np.uint16), w.view(np.uint16))


def test_runs_on_llvm_like_the_interpreter(tmp_path: Path) -> None:
    model, w = _model()
    mod, params = from_onnx(model)
    rng = np.random.default_rng(12)
    feeds = {"x": rng.standard_normal((3, 8)).astype(np.float32),
             "bias": rng.standard_normal(4).astype(BF16)}
    build(mod, "llvm", params=params).export_library(tmp_path / "bf16.so")
    with rt.load(tmp_path / "bf16.so") as module:
        out, r = module.run(feeds)
    assert out.dtype == np.float32 and r.dtype == BF16
    want_out, want_r = run_graph(mod, feeds)
    np.testing.assert_array_equal(r.view(np.uint16), want_r.view(np.uint16))
    np.testing.assert_array_equal(out, want_out)
    # against float64: the matmul of bfloat16 operands, summed exactly, rounded twice
    exact = np.maximum(feeds["x"].astype(BF16).astype(np.float64) @ w.astype(np.float64)
                       + feeds["bias"].astype(np.float64), 0)
    assert np.abs(out - exact).max() <= 2.0 ** -7 * np.abs(exact).max()
