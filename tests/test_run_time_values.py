"""Sizes computed from input values (ir/host_sizes.py): a model whose shapes depend on
the values of small inputs -- a ReduceMean's axes, a Reshape's target fed as an input --
compiles once and runs with any values, on every target, matching ONNX Runtime; values
the model cannot take are refused with a message naming the node, in the same words on
the CPU library and the GPU executors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.ir.text import parse_graph, print_graph
from tensorsmith.runtime.errors import InputError


def _reduce_mean_model(keepdims: int) -> onnx.ModelProto:
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=keepdims,
                            name="mean")
    rank = 3 if keepdims else 1
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
                      helper.make_tensor_value_info("axes", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * rank)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _compile(model: onnx.ModelProto, target: str, tmp_path: Path) -> rt.Module:
    graph, params = from_onnx(model)
    text = print_graph(graph)
    assert "  size " in text, "the values should be read at run time, not frozen"
    assert print_graph(parse_graph(text)) == text  # the text form keeps computed sizes
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / ("model.so" if target == "llvm" else "model.tsm")
    build(graph, target=target, params=params).export_library(path)
    return rt.load(path)


@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_with_run_time_axes_compiles_once(target: str, keepdims: int,
                                                 tmp_path: Path) -> None:
    model = _reduce_mean_model(keepdims)
    module = _compile(model, target, tmp_path)
    session = ort.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    for axes in ([0, 2], [-1, 1], [1, 0], [2, -3]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        (want,) = session.run(None, feeds)
        (got,) = module.run(feeds)
        assert got.shape == want.shape, axes
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_values_the_model_cannot_take_are_refused_naming_the_node(target: str,
                                                                  tmp_path: Path) -> None:
    module = _compile(_reduce_mean_model(0), target, tmp_path)
    x = np.ones((3, 4, 5), np.float32)
    with pytest.raises(InputError, match=r"node 'mean' \(ReduceMean, opset 18\)"):
        module.run({"x": x, "axes": np.array([1, 1], np.int64)})  # an axis twice
    (got,) = module.run({"x": x, "axes": np.array([0, 1], np.int64)})  # and runs again
    np.testing.assert_array_equal(got, np.ones(5, np.float32))


def test_reshape_target_of_run_time_values(tmp_path: Path) -> None:
    """A computed size below 1 is refused before any step runs, naming the node."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1, name="sum")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                      helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    module = _compile(model, "llvm", tmp_path)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (got,) = module.run({"x": x, "axes": np.array([1], np.int64)})
    np.testing.assert_array_equal(got, x.sum(1, keepdims=True))
    assert module.output_shape(0) == (2, 1) if hasattr(module, "output_shape") else True
    with pytest.raises(InputError, match=r"node 'sum' \(ReduceSum, opset 13\)"):
        module.run({"x": x, "axes": np.array([5], np.int64)})  # no such axis


def test_inspect_lists_the_computed_sizes(tmp_path: Path) -> None:
    import subprocess
    import sys

    graph, params = from_onnx(_reduce_mean_model(1))
    path = tmp_path / "model.so"
    build(graph, target="llvm", params=params).export_library(path)
    shown = subprocess.run([sys.executable, "-m", "tensorsmith.cli.main", "inspect", str(path)],
                           capture_output=True, text=True, check=True).stdout
    assert "computed   " in shown and "  y_kept0 = (1 if " in shown, shown


def test_reductions_over_an_empty_axis_the_run_names(tmp_path: Path) -> None:
    """An input with an empty axis: the reduced and kept extents may be 0 (computed as
    one more, less 1), and every reducer gives ONNX Runtime's identity there."""
    for op in ("ReduceSum", "ReduceMax", "ReduceLogSumExp"):
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1, name="r")
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4]),
                          helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 3)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        module = _compile(model, "llvm", tmp_path / op)
        session = ort.InferenceSession(model.SerializeToString())
        x = np.zeros((2, 0, 4), np.float32)
        for axes in ([1], [2]):
            feeds = {"x": x, "axes": np.array(axes, np.int64)}
            (want,) = session.run(None, feeds)
            (got,) = module.run(feeds)
            assert got.shape == want.shape, (op, axes)
            np.testing.assert_array_equal(got, want)
