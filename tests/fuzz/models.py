"""The valid models the campaigns start from, and the reference they are checked against.

Small on purpose: a case compiles in a tenth of a second, so a slice of a few dozen cases
per campaign fits the normal test session."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensorsmith.ir.graph import Graph

OPSET = 17
#: Cases whose inputs or outputs exceed this many elements are compiled, not run: a
#: mutated dim may make a model that is valid but far too big to run in a test.
MAX_RUN_ELEMENTS = 1 << 20


def _weights(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.standard_normal(shape).astype("float32"), name)


def _model(nodes: list[onnx.NodeProto], name: str, inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def mlp() -> onnx.ModelProto:
    """MatMul + Add + Relu, Gemm, Softmax."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "b1"], ["h2"], name="add1"),
        helper.make_node("Relu", ["h2"], ["h3"], name="relu1"),
        helper.make_node("Gemm", ["h3", "w2", "b2"], ["h4"], name="gemm", alpha=1.0, beta=1.0),
        helper.make_node("Softmax", ["h4"], ["y"], name="softmax", axis=-1),
    ]
    inits = [_weights(rng, "w1", (8, 16)), _weights(rng, "b1", (16,)),
             _weights(rng, "w2", (16, 4)), _weights(rng, "b2", (4,))]
    return _model(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)


def convnet() -> onnx.ModelProto:
    """Conv + Relu, MaxPool, Flatten, MatMul."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         strides=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc"),
    ]
    inits = [_weights(rng, "w", (4, 3, 3, 3)), _weights(rng, "b", (4,)),
             _weights(rng, "fc", (64, 5))]
    return _model(nodes, "convnet",
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)


def shapes() -> onnx.ModelProto:
    """Reshape, Gather, Concat and Transpose: the graph of shape and index ops."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(np.array([6, 4], dtype=np.int64), "shape"),
        numpy_helper.from_array(np.array([0, 2, 5], dtype=np.int64), "idx"),
        _weights(rng, "extra", (2, 4)),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Gather", ["r", "idx"], ["g"], name="gather", axis=0),
        helper.make_node("Concat", ["g", "extra"], ["c"], name="concat", axis=0),
        helper.make_node("Transpose", ["c"], ["y"], name="transpose", perm=[1, 0]),
    ]
    return _model(nodes, "shapes",
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])], inits)


def indexing() -> onnx.ModelProto:
    """Run-time indices into every indexing op: an embedding Gather, GatherElements,
    GatherND and a ScatterND, each of whose indices the fuzz case draws."""
    rng = np.random.default_rng(4)
    inits = [_weights(rng, "table", (7, 3)), _weights(rng, "grid", (4, 5))]
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["g"], name="gather", axis=0),
        helper.make_node("GatherElements", ["grid", "cols"], ["e"], name="gather_elements",
                         axis=1),
        helper.make_node("GatherND", ["grid", "cells"], ["n"], name="gather_nd"),
        helper.make_node("ScatterND", ["grid", "rows", "patch"], ["s"], name="scatter_nd"),
    ]
    int64 = TensorProto.INT64
    return _model(
        nodes, "indexing",
        [helper.make_tensor_value_info("ids", int64, [5]),
         helper.make_tensor_value_info("cols", int64, [4, 2]),
         helper.make_tensor_value_info("cells", int64, [3, 2]),
         helper.make_tensor_value_info("rows", int64, [2, 1]),
         helper.make_tensor_value_info("patch", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
         for n, shape in [("g", [5, 3]), ("e", [4, 2]), ("n", [3]), ("s", [4, 5])]], inits)


BASE_MODELS = {"mlp": mlp, "convnet": convnet, "shapes": shapes}


def random_inputs(graph: Graph, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    """Inputs for every graph input, or None when the model is too big to run here."""
    out: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        shape = tuple(int(d) for d in v.shape)
        if int(np.prod(shape, dtype=object)) > MAX_RUN_ELEMENTS:
            return None
        out[v.name] = _array(shape, np.dtype(v.dtype), rng)
    if any(int(np.prod(tuple(v.shape), dtype=object)) > MAX_RUN_ELEMENTS for v in graph.outputs):
        return None
    return out


def _array(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 3, shape).astype(dtype)  # small: valid indices of most axes


def mismatch(got: list[np.ndarray], want: list[Any]) -> str | None:
    """Why ``got`` differs from the reference ``want``, or None when they agree."""
    if len(got) != len(want):
        return f"{len(got)} outputs, reference has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, reference {w.shape}"
        try:
            if g.dtype.kind == "f" or w.dtype.kind == "f":
                np.testing.assert_allclose(g.astype("float64"), w.astype("float64"),
                                           rtol=1e-3, atol=1e-4, equal_nan=True)
            else:
                np.testing.assert_array_equal(g, w)
        except AssertionError as e:
            return f"output {i}: " + " ".join(str(e).split())[:300]
    return None


def record_convnet() -> Graph:
    """conv + bias + relu, pool, dense: the graph whose convolution the records tune, the
    one the autotune tests' record checks use (so a record case found here replays there)."""
    return _autotune_testing().convnet()


def _autotune_testing() -> Any:
    """The autotune tests' shared helpers module, from its folder (not a package)."""
    folder = str(Path(__file__).resolve().parents[2] / "packages" / "autotune" / "tests")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("autotune_testing")
