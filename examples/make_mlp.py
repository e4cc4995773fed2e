"""Build the bundled example model, examples/mlp.onnx: a small MLP classifier.

    input float32[N,784]
      -> fc1 MatMul W1[784,256] -> add1 Add b1[256] -> relu1 Relu
      -> fc2 Gemm(transB=1) W2[128,256], b2[128]    -> relu2 Relu
      -> fc3 MatMul W3[128,10]  -> add3 Add b3[10]  -> softmax Softmax(axis=-1)
    -> output float32[N,10]

The batch dimension is symbolic ("N"), so compiling it takes
``--input-shape input:B,784``. Weights are random (numpy seed 0) and scaled by
1/sqrt(fan_in), so the output is not saturated. Opset 17.

Usage: python examples/make_mlp.py [OUTPUT]   (default: examples/mlp.onnx)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the IR version of opset 17: readable by older onnx/onnxruntime too


def make_mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def weight(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    def bias(n: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    initializers = {
        "W1": weight((784, 256), 784),
        "b1": bias(256),
        "W2": weight((128, 256), 256),  # Gemm with transB=1: [out, in]
        "b2": bias(128),
        "W3": weight((128, 10), 128),
        "b3": bias(10),
    }
    nodes = [
        helper.make_node("MatMul", ["input", "W1"], ["fc1_out"], name="fc1"),
        helper.make_node("Add", ["fc1_out", "b1"], ["add1_out"], name="add1"),
        helper.make_node("Relu", ["add1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("Gemm", ["relu1_out", "W2", "b2"], ["fc2_out"], name="fc2", transB=1),
        helper.make_node("Relu", ["fc2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MatMul", ["relu2_out", "W3"], ["fc3_out"], name="fc3"),
        helper.make_node("Add", ["fc3_out", "b3"], ["add3_out"], name="add3"),
        helper.make_node("Softmax", ["add3_out"], ["output"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        inputs=[helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 784])],
        outputs=[helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(v, name=k) for k, v in initializers.items()],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="tensorsmith-examples",
        producer_version="0.1.0",
        doc_string="784-256-128-10 MLP with random weights (numpy seed 0); batch dimension N",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("mlp.onnx")
    model = make_mlp()
    onnx.save(model, out)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
