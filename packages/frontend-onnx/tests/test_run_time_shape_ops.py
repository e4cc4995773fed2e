"""Reshape, Squeeze, Unsqueeze, Expand and Tile whose target, axes or repeats are a graph
input: the model compiles once, the sizes those values decide are computed on the host
before each run, and every run matches ONNX Runtime. Values that do not fit the input are
refused by the run rather than answered wrongly."""

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
from tensorsmith.ir.text import print_graph
from tensorsmith.runtime.errors import TensorsmithError


def _model(op: str, x_shape: list[int], operand: str, count: int, rank: int,
           opset: int = 13, **attrs: int) -> onnx.ModelProto:
    """``y = op(x, operand)`` with the operand (int64[count]) a graph input and ``y`` of
    ``rank`` axes of sizes not given."""
    node = helper.make_node(op, ["x", operand], ["y"], **attrs)
    graph = helper.make_graph(
        [node], f"run_time_{op.lower()}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
         helper.make_tensor_value_info(operand, TensorProto.INT64, [count])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                     [f"y{i}" for i in range(rank)])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compile_once(model: onnx.ModelProto, tmp_path: Path) -> Path:
    """The artifact, after checking that the operand became sizes computed at run time
    (a ``size`` line) instead of a value the compiler needed."""
    mod, params = from_onnx(model)
    assert "\n  size " in print_graph(mod)
    path = tmp_path / f"{model.graph.name}.so"
    build(mod, target="llvm", params=params).export_library(path)
    return path


def _check_runs(model: onnx.ModelProto, tmp_path: Path, operand: str,
                values: list[list[int]], refused: list[list[int]] = ()) -> None:
    path = _compile_once(model, tmp_path)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with rt.load(path) as module:
        for value in values:
            feeds = {"x": x, operand: np.asarray(value, dtype=np.int64)}
            got = module.run(feeds)[0]
            want = session.run(None, feeds)[0]
            assert got.shape == want.shape, value
            np.testing.assert_array_equal(got, want)
        for value in refused:
            with pytest.raises(TensorsmithError):
                module.run({"x": x, operand: np.asarray(value, dtype=np.int64)})


def test_reshape_target_given_at_run_time(tmp_path: Path) -> None:
    """0 copies the input's dim and -1 takes what is left, wherever they are."""
    _check_runs(_model("Reshape", [2, 3, 4], "shape", 3, 3), tmp_path, "shape",
                [[4, -1, 2], [0, -1, 1], [-1, 2, 2], [2, 3, 4]],
                refused=[[5, -1, 1], [-1, -1, 2], [7, 1, 1]])


def test_reshape_allowzero_target_given_at_run_time(tmp_path: Path) -> None:
    _check_runs(_model("Reshape", [2, 3, 4], "shape", 2, 2, opset=14, allowzero=1), tmp_path,
                "shape", [[6, 4], [-1, 8]], refused=[[0, 24]])


def test_unsqueeze_axes_given_at_run_time(tmp_path: Path) -> None:
    """Axes count against the output's rank, in any order, from either end."""
    _check_runs(_model("Unsqueeze", [3, 4], "axes", 2, 4), tmp_path, "axes",
                [[0, 3], [-1, 1], [2, 0], [1, 2]], refused=[[1, 1], [0, 4]])


def test_squeeze_axes_given_at_run_time(tmp_path: Path) -> None:
    _check_runs(_model("Squeeze", [1, 3, 1, 4], "axes", 1, 3), tmp_path, "axes",
                [[0], [2], [-2], [-4]], refused=[[1], [4]])


def test_expand_target_given_at_run_time(tmp_path: Path) -> None:
    """The input's 1s take the target's sizes; its 3 admits a target of 1 or 3."""
    _check_runs(_model("Expand", [3, 1], "shape", 3, 3), tmp_path, "shape",
                [[2, 1, 6], [1, 3, 1], [4, 3, 5], [1, 1, 1]], refused=[[2, 2, 2]])


def test_expand_checks_a_target_that_changes_no_size(tmp_path: Path) -> None:
    """Every input dim is more than 1: the output is the input, and the target must still
    be 1 or the same at each axis."""
    _check_runs(_model("Expand", [3, 4], "shape", 2, 2), tmp_path, "shape",
                [[3, 4], [1, 4], [1, 1]], refused=[[2, 4], [3, 5]])


def test_tile_repeats_given_at_run_time(tmp_path: Path) -> None:
    _check_runs(_model("Tile", [2, 3], "repeats", 2, 2), tmp_path, "repeats",
                [[1, 1], [2, 3], [3, 1]], refused=[[0, 1]])


def test_a_constant_operand_keeps_the_static_graph() -> None:
    """With the operand a constant nothing is computed at run time: the shape is known."""
    model = _model("Reshape", [2, 3, 4], "shape", 3, 3)
    model.graph.initializer.append(
        onnx.numpy_helper.from_array(np.asarray([4, -1, 2], dtype=np.int64), "shape"))
    del model.graph.input[1]
    mod, _ = from_onnx(model)
    assert "size " not in print_graph(mod)
    assert mod.outputs[0].shape == (4, 3, 2)
