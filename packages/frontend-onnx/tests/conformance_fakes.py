"""Stand-ins the isolation tests hand to conformance.pool.CaseRunner by name (the worker
process imports them): two tiny cases, and backends that crash, hang or compute."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.backend.base import Backend
from onnx_conformance.cases import NodeCase


def _relu_case(name: str) -> NodeCase:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                      [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    return NodeCase(name, "Relu", False, model, (x,), (np.maximum(x, 0),), 1e-3, 1e-7)


def load_cases() -> dict[str, NodeCase]:
    return {n: _relu_case(n) for n in ("test_crash", "test_hang", "test_ok")}


class CrashingBackend(Backend):
    """Segfaults on test_crash, hangs on test_hang, computes test_ok with NumPy."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> Any:
        if model.graph.name == "test_crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if model.graph.name == "test_hang":
            time.sleep(3600)
        return _NumpyRelu()


class _NumpyRelu:
    def run(self, inputs: list[np.ndarray], **kwargs: Any) -> tuple[np.ndarray]:
        return (np.maximum(inputs[0], 0),)
