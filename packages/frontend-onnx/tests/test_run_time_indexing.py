"""CumSum's axis, CumProd's axis, TopK's k and AffineGrid's size as graph inputs: the
model compiles once (for llvm), the sizes those values decide are computed on the host
before each run, and one artifact answers as onnxruntime does for several values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from frontend_onnx_testing import make_model, rand
from onnx import helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.runtime.errors import TensorsmithError


def _compile_once(model: onnx.ModelProto, path: Path) -> tuple[Any, Any]:
    """The graph and the loaded llvm artifact; the graph must compute a size from an
    input's value (else the converter fell back to a constant operand)."""
    graph, params = from_onnx(model)
    assert "\n  size " in str(graph), str(graph)
    build(graph, target="llvm", params=params).export_library(path)
    return graph, rt.load(path, device="cpu")


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _same(model: onnx.ModelProto, graph: Any, module: Any, feeds: dict[str, np.ndarray],
          rtol: float = 1e-5, atol: float = 1e-6) -> None:
    want = _ort(model, feeds)
    got = module.run(feeds)
    interpreted = run_graph(graph, feeds)
    assert len(got) == len(want) == len(interpreted)
    for g, i, w in zip(got, interpreted, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        np.testing.assert_allclose(i, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op,exclusive,reverse", [
    ("CumSum", 0, 0), ("CumSum", 1, 1), ("CumProd", 1, 0), ("CumProd", 0, 1)])
def test_a_running_op_along_a_run_time_axis(tmp_path: Path, op: str, exclusive: int,
                                            reverse: int) -> None:
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = make_model([node], {"x": ("float32", [2, 3, 4]), "axis": ("int64", [])},
                       ["y"], opset=26 if op == "CumProd" else 17)
    x = rand(2, 3, 4, low=0.5, high=1.5)
    if op == "CumProd":  # onnxruntime has no CumProd kernel: NumPy's, as ONNX's reference
        graph, module = _compile_once(model, tmp_path / "m.so")
        for axis in (0, 1, 2, -1, -3):
            (got,) = module.run({"x": x, "axis": np.array(axis, np.int64)})
            np.testing.assert_allclose(got, _cumprod(x, axis, exclusive, reverse), rtol=1e-5)
        return
    graph, module = _compile_once(model, tmp_path / "m.so")
    for axis in (0, 1, 2, -1, -2):
        _same(model, graph, module, {"x": x, "axis": np.array(axis, np.int64)})


def _cumprod(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    y = np.flip(x, axis) if reverse else x
    r = np.cumprod(y, axis=axis)
    if exclusive:
        r = np.concatenate([np.ones_like(np.take(r, [0], axis=axis)),
                            np.delete(r, -1, axis=axis)], axis=axis)
    return np.flip(r, axis) if reverse else r


def test_a_run_time_axis_out_of_range_is_refused(tmp_path: Path) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    model = make_model([node], {"x": ("float32", [2, 3]), "axis": ("int32", [])}, ["y"])
    graph, module = _compile_once(model, tmp_path / "m.so")
    x = rand(2, 3)
    _same(model, graph, module, {"x": x, "axis": np.array(1, np.int32)})
    for axis in (2, -3):
        with pytest.raises(TensorsmithError, match=r"at least 1|>= 1"):
            module.run({"x": x, "axis": np.array(axis, np.int32)})
        with pytest.raises(ModelError, match="but it must be at least 1"):
            run_graph(graph, {"x": x, "axis": np.array(axis, np.int32)})


def test_a_run_time_axis_of_an_input_of_symbolic_shape(tmp_path: Path) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=1)
    model = make_model([node], {"x": ("float32", ["batch", 5]), "axis": ("int64", [1])},
                       ["y"])
    graph, module = _compile_once(model, tmp_path / "m.so")
    for batch, axis in ((1, 0), (3, 1), (4, 0), (2, -1)):
        _same(model, graph, module, {"x": rand(batch, 5, seed=batch),
                                     "axis": np.array([axis], np.int64)})


@pytest.mark.parametrize("largest,axis", [(1, -1), (0, 0)])
def test_topk_of_a_run_time_k(tmp_path: Path, largest: int, axis: int) -> None:
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis,
                            largest=largest)
    model = make_model([node], {"x": ("float32", [5, 6]), "k": ("int64", [1])},
                       {"values": "float32", "indices": "int64"})
    graph, module = _compile_once(model, tmp_path / "m.so")
    x = rand(5, 6)
    x[1, 2] = x[1, 4]  # a tie: the lower index first, as onnxruntime
    for k in (1, 3, 5):
        _same(model, graph, module, {"x": x, "k": np.array([k], np.int64)})


def test_a_run_time_k_longer_than_the_axis_is_refused(tmp_path: Path) -> None:
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"])
    model = make_model([node], {"x": ("float32", [2, 4]), "k": ("int64", [1])},
                       {"values": "float32", "indices": "int64"})
    graph, module = _compile_once(model, tmp_path / "m.so")
    x = rand(2, 4)
    with pytest.raises(TensorsmithError, match=r"topk k=.* for an axis of 4"):
        module.run({"x": x, "k": np.array([5], np.int64)})
    with pytest.raises(ModelError, match=r"topk k=.* for an axis of 4"):
        run_graph(graph, {"x": x, "k": np.array([5], np.int64)})
    _same(model, graph, module, {"x": x, "k": np.array([4], np.int64)})


@pytest.mark.parametrize("align", [0, 1])
def test_an_affine_grid_of_a_run_time_size(tmp_path: Path, align: int) -> None:
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    model = make_model([node], {"theta": ("float32", [2, 2, 3]), "size": ("int64", [4])},
                       ["grid"], opset=20)
    graph, module = _compile_once(model, tmp_path / "m.so")
    theta = rand(2, 2, 3)
    # one pixel with align_corners: onnxruntime puts it at 1, ONNX's reference (and the
    # static path) at -1, so only the other mode compares there
    for h, w in ((3, 4), (1, 5), (6, 1)) if not align else ((3, 4), (2, 5), (6, 2)):
        _same(model, graph, module, {"theta": theta, "size": np.array([2, 3, h, w], np.int64)})


def test_a_3d_affine_grid_of_a_run_time_size(tmp_path: Path) -> None:
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"])
    model = make_model([node], {"theta": ("float32", [1, 3, 4]), "size": ("int64", [5])},
                       ["grid"], opset=20)
    graph, module = _compile_once(model, tmp_path / "m.so")
    theta = rand(1, 3, 4)
    for d, h, w in ((2, 3, 4), (4, 1, 2)):
        _same(model, graph, module,
              {"theta": theta, "size": np.array([1, 1, d, h, w], np.int64)})
    with pytest.raises(TensorsmithError, match="cannot reshape"):
        module.run({"theta": theta, "size": np.array([2, 1, 2, 3, 4], np.int64)})
