"""A small float classifier for the quantization tests, and seeded inputs for it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGE = 16
CLASSES = 10


def classifier(seed: int = 0) -> onnx.ModelProto:
    """Conv-Relu-Conv(stride 2)-Relu-GlobalAveragePool-Flatten-MatMul-Add-Relu-Gemm
    (transB=1), then Softmax: every weight layout the quantizer handles (Conv [M, C, k, k],
    MatMul [K, N], Gemm [N, K]), a float Add and Softmax, two [1, classes] outputs."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int, fan: int) -> onnx.TensorProto:
        w = rng.standard_normal(shape) * np.sqrt(2.0 / fan)
        return numpy_helper.from_array(w.astype(np.float32), name)

    def bias(name: str, n: int) -> onnx.TensorProto:
        return numpy_helper.from_array((0.1 * rng.standard_normal(n)).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], "conv2", pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], "relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], "gap"),
        helper.make_node("Flatten", ["g"], ["f"], "flatten"),
        helper.make_node("MatMul", ["f", "w3"], ["m"], "fc1"),
        helper.make_node("Add", ["m", "b3"], ["h"], "fc1_bias"),
        helper.make_node("Relu", ["h"], ["r3"], "relu3"),
        helper.make_node("Gemm", ["r3", "w4", "b4"], ["logits"], "fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], "softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, CLASSES])],
        [weight("w1", 16, 3, 3, 3, fan=27), bias("b1", 16),
         weight("w2", 32, 16, 3, 3, fan=144), bias("b2", 32),
         weight("w3", 32, 64, fan=32), bias("b3", 64),
         weight("w4", CLASSES, 64, fan=64), bias("b4", CLASSES)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def images(count: int, seed: int) -> np.ndarray:
    """``count`` standard normal images, [count, 1, 3, IMAGE, IMAGE] (a sample axis first)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((count, 1, 3, IMAGE, IMAGE)).astype(np.float32)


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    return [{"x": image} for image in images(count, seed)]
