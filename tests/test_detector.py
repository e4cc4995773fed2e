"""A detector with NonMaxSuppression at the end (bench/models.py's tiny_detector: conv
backbone, box and class heads, anchors decoded, NMS, the kept boxes, scores and labels
gathered): it compiles once and matches ONNX Runtime on every target, for images that
keep different numbers of boxes, none included, and with a batch size given at run
time. NonZero, Compress with a condition the run gives, and Unique, the other ops whose
output sizes the data decides, are checked here too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import tensorsmith.runtime as rt
from bench.models import sample_inputs, tiny_detector
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.ir.text import print_graph


def _compile(model: onnx.ModelProto, target: str, tmp_path: Path) -> rt.Module:
    graph, params = from_onnx(model)
    assert "  counted " in print_graph(graph), "the output size should be counted, not fixed"
    path = tmp_path / ("model.so" if target == "llvm" else "model.tsm")
    build(graph, target=target, params=params).export_library(path)
    return rt.load(path)


def _assert_matches(model: onnx.ModelProto, module: rt.Module,
                    feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = module.run(feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return got


def test_the_detector_matches_onnx_runtime(target: str, tmp_path: Path) -> None:
    model = tiny_detector()
    module = _compile(model, target, tmp_path)
    kept = {_assert_matches(model, module, sample_inputs(model, seed=seed))[0].shape[0]
            for seed in range(4)}
    assert len(kept) > 1, "the images should keep different numbers of boxes"


def test_a_detector_that_keeps_nothing(target: str, tmp_path: Path) -> None:
    model = tiny_detector(score=1.0)  # no softmax score is above 1
    module = _compile(model, target, tmp_path)
    boxes, scores, labels = _assert_matches(model, module, sample_inputs(model, seed=0))
    assert boxes.shape == (0, 4) and scores.shape == (0,) and labels.shape == (0,)


def test_the_detector_with_a_batch_given_at_run_time(tmp_path: Path) -> None:
    model = tiny_detector(batch="batch")
    module = _compile(model, "llvm", tmp_path)
    for batch in (2, 1, 3):
        _assert_matches(model, module, sample_inputs(model, seed=batch, dims={"batch": batch}))


def _one_node(op: str, inputs: list[tuple[str, int, list[int | str]]], output_rank: int,
              output_type: int, opset: int = 17, **attrs: object) -> onnx.ModelProto:
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], name="node", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", output_type, [None] * output_rank)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_nonzero_finds_what_the_run_gives(target: str, tmp_path: Path) -> None:
    model = _one_node("NonZero", [("x", TensorProto.FLOAT, [3, 5, 4])], 2, TensorProto.INT64)
    module = _compile(model, target, tmp_path)
    rng = np.random.default_rng(0)
    for density in (0.3, 0.0, 1.0, 0.05):
        x = (rng.random((3, 5, 4)) < density) * rng.standard_normal((3, 5, 4))
        _assert_matches(model, module, {"x": x.astype(np.float32)})


def test_compress_with_a_condition_the_run_gives(target: str, tmp_path: Path) -> None:
    model = _one_node("Compress", [("x", TensorProto.FLOAT, [4, 6]),
                                   ("condition", TensorProto.BOOL, [6])], 2, TensorProto.FLOAT,
                      axis=1)
    module = _compile(model, target, tmp_path)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for picked in ([1, 0, 1, 1, 0, 0], [0] * 6, [1] * 6):
        _assert_matches(model, module, {"x": x, "condition": np.array(picked, bool)})


def _unique(shape: list[int | str], elem: int, outputs: list[str], **attrs: object
            ) -> onnx.ModelProto:
    """A Unique node reading graph input ``x`` of ``shape``, giving ``outputs`` (an empty
    name skips one)."""
    node = helper.make_node("Unique", ["x"], outputs, name="node", **attrs)
    types = [elem] + [TensorProto.INT64] * 3
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info(n, t, [None] * (len(shape) if k == 0 and "axis" in attrs
                                                       else 1))
         for k, (n, t) in enumerate(zip(outputs, types)) if n])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


_UNIQUE_OUTPUTS = ["y", "indices", "inverse", "counts"]


@pytest.mark.parametrize("order", [1, 0])
def test_unique_of_what_the_run_gives(target: str, order: int, tmp_path: Path) -> None:
    model = _unique([12], TensorProto.FLOAT, _UNIQUE_OUTPUTS, sorted=order)
    module = _compile(model, target, tmp_path)
    rng = np.random.default_rng(order)
    for x in (np.round(rng.standard_normal(12)).astype(np.float32),  # duplicates
              rng.permutation(12).astype(np.float32),  # all distinct
              np.full(12, 3, np.float32),  # one value
              np.array([0, -0.0, 1, 0, -0.0, 2] * 2, np.float32)):  # -0.0 and 0.0 are one
        _assert_matches(model, module, {"x": x})


def test_unique_of_a_length_given_at_run_time(target: str, tmp_path: Path) -> None:
    model = _unique(["n"], TensorProto.INT64, _UNIQUE_OUTPUTS)
    module = _compile(model, target, tmp_path)
    rng = np.random.default_rng(5)
    for n in (9, 1, 30, 4):
        _assert_matches(model, module, {"x": rng.integers(-3, 4, n).astype(np.int64)})


def test_unique_gives_the_outputs_the_node_asks_for(tmp_path: Path) -> None:
    model = _unique(["n"], TensorProto.FLOAT, ["y", "", "", "counts"], sorted=0)
    module = _compile(model, "llvm", tmp_path)
    got = _assert_matches(model, module, {"x": np.array([4, 2, 4, 4], np.float32)})
    assert len(got) == 2


@pytest.mark.parametrize("shape, axis", [([6, 3], 0), ([3, 6], 1), ([2, 5, 2], -2)])
def test_unique_slices_along_an_axis(target: str, shape: list[int], axis: int,
                                     tmp_path: Path) -> None:
    model = _unique(shape, TensorProto.FLOAT, _UNIQUE_OUTPUTS, axis=axis)
    module = _compile(model, target, tmp_path)
    rng = np.random.default_rng(len(shape) + axis)
    for x in (rng.integers(0, 2, shape), np.zeros(shape), rng.standard_normal(shape)):
        _assert_matches(model, module, {"x": x.astype(np.float32)})


def test_unique_slices_along_a_length_given_at_run_time(target: str, tmp_path: Path) -> None:
    model = _unique([3, "n"], TensorProto.INT64, _UNIQUE_OUTPUTS, axis=1, sorted=0)
    module = _compile(model, target, tmp_path)
    rng = np.random.default_rng(1)
    for n in (7, 1, 12):
        _assert_matches(model, module, {"x": rng.integers(0, 2, (3, n)).astype(np.int64)})


def test_unique_of_a_constant_folds() -> None:
    x = np.array([3, 1, 3, 2], np.int64)
    node = helper.make_node("Unique", ["x"], _UNIQUE_OUTPUTS, name="node", sorted=0)
    graph = helper.make_graph(
        [node], "g", [],
        [helper.make_tensor_value_info(n, TensorProto.INT64, [None]) for n in _UNIQUE_OUTPUTS],
        initializer=[onnx.numpy_helper.from_array(x, "x")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    graph_ir, _ = from_onnx(model)
    assert not graph_ir.nodes
    want = ort.InferenceSession(model.SerializeToString()).run(None, {})
    for v, w in zip(graph_ir.outputs, want):
        np.testing.assert_array_equal(v.data, w)
