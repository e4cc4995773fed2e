"""non_max_suppression and nonzero (ops/detection.py): the NumPy references against ONNX
Runtime's NonMaxSuppression and NonZero, row for row (the padded rows zero), and shape
inference with sizes known only at run time. The kernels are checked on every target in
tests/test_detection_kernels.py."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.op_registry import get_op
from tensorsmith.ir.passes.fuse import fuse_ops
from tensorsmith.ir.symbolic import dim_min, symbol

F = np.float32


def _ort_nms(boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float,
             floor: float | None, center: int) -> np.ndarray:
    names = ["boxes", "scores", "limit", "iou"] + ([] if floor is None else ["floor"])
    node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=center)
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, boxes.shape),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, scores.shape),
              helper.make_tensor_value_info("limit", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("iou", TensorProto.FLOAT, [1]),
              helper.make_tensor_value_info("floor", TensorProto.FLOAT, [1])]
    graph = helper.make_graph([node], "g", inputs[:len(names)],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    feeds = {"boxes": boxes, "scores": scores, "limit": np.array([limit], np.int64),
             "iou": np.array([iou], F)}
    if floor is not None:
        feeds["floor"] = np.array([floor], F)
    return ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]


def _reference_nms(boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float,
                   floor: float | None, center: int) -> tuple[np.ndarray, int]:
    out, count = get_op("non_max_suppression").reference(
        [boxes, scores, np.array(iou, F), np.array(-np.inf if floor is None else floor, F)],
        {"center_point_box": center, "max_output": limit})
    return out, int(count)


def _check_nms(boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float,
               floor: float | None, center: int = 0) -> int:
    want = _ort_nms(boxes, scores, limit, iou, floor, center)
    got, count = _reference_nms(boxes, scores, limit, iou, floor, center)
    batch, classes, n = scores.shape
    assert got.shape == (batch * classes * min(n, limit), 3)
    assert count == len(want)
    np.testing.assert_array_equal(got[:count], want)
    assert not got[count:].any()
    return count


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("seed", range(6))
def test_random_boxes_match_onnx_runtime(seed: int, center: int) -> None:
    rng = np.random.default_rng(seed)
    batch, classes, n = 2, 3, 37
    boxes = rng.uniform(0, 10, (batch, n, 4)).astype(F)
    if center:
        boxes[..., 2:] = rng.uniform(0.5, 6, (batch, n, 2))
    scores = rng.uniform(0, 1, (batch, classes, n)).astype(F)
    scores[0, 1, ::3] = scores[0, 1, 1]  # ties: equal scores, several boxes
    limit = 40 if seed % 2 else 8  # above the boxes' count, or below
    count = _check_nms(boxes, scores, limit, float(rng.uniform(0.1, 0.5)), 0.25, center)
    candidates = np.minimum((scores > 0.25).sum(axis=2), limit).sum()
    assert 0 < count <= candidates
    if limit > n:
        assert count < candidates  # and suppression happened


def test_no_threshold_ties_and_flipped_corners_match_onnx_runtime() -> None:
    rng = np.random.default_rng(7)
    boxes = rng.uniform(0, 10, (1, 29, 4)).astype(F)
    boxes[0, ::2] = boxes[0, ::2][:, [2, 3, 0, 1]]  # the other corner first
    scores = np.round(rng.uniform(0, 1, (1, 2, 29)), 1).astype(F)  # many ties
    scores[0, 0, :4] = -np.inf  # no threshold: even these are candidates
    _check_nms(boxes, scores, 29, 0.3, None)


def test_crafted_edges_match_onnx_runtime() -> None:
    boxes = np.array([[[0, 0, 1, 2],     # IoU with box 1 exactly 0.5: not above it
                       [0, 0, 1, 1],
                       [2, 2, 2, 5],     # zero area: never suppressed, never suppresses
                       [2, 2, 2, 5],
                       [5, 5, 6, 6],     # touching box 5 along an edge: no intersection
                       [6, 5, 7, 6],
                       [5.1, 5, 6.1, 6]]], F)  # IoU 0.82 with box 4: suppressed
    scores = np.array([[[0.9, 0.8, 0.7, 0.7, 0.5, 0.5, 0.4]]], F)
    assert _check_nms(boxes, scores, 7, 0.5, 0.0) == 6
    assert _check_nms(boxes, scores, 7, 0.49, 0.0) == 5
    assert _check_nms(boxes, scores, 3, 0.5, 0.0) == 3
    assert _check_nms(boxes, scores, 7, 0.5, 0.5) == 4  # a score at the threshold is out
    assert _check_nms(boxes, scores, 7, 0.5, 0.95) == 0
    assert _check_nms(boxes, scores, 0, 0.5, 0.0) == 0


def test_center_boxes_with_negative_sizes_match_onnx_runtime() -> None:
    boxes = np.array([[[1, 1, 2, 2], [1.2, 1, 2, 2], [1, 1, -2, 2], [1.1, 1, -2, 2]]], F)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6]]], F)
    assert _check_nms(boxes, scores, 4, 0.2, None, center=1) == 3


def _ort_nonzero(x: np.ndarray) -> np.ndarray:
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", dtype, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype", ["bool", "float32", "int32", "int64"])
@pytest.mark.parametrize("shape", [(11,), (3, 4, 5)])
def test_nonzero_matches_onnx_runtime(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    x = (rng.integers(-2, 3, shape) * (rng.uniform(size=shape) < 0.4)).astype(dtype)
    for case in (x, np.zeros(shape, dtype)):
        want = _ort_nonzero(case)
        got, count = get_op("nonzero").reference([case], {})
        assert got.shape == (case.size, len(shape)) and int(count) == want.shape[1]
        np.testing.assert_array_equal(got[:int(count)].T, want)
        assert not got[int(count):].any()


def test_shapes_with_run_time_sizes() -> None:
    batch, classes, n = symbol("batch"), symbol("classes"), symbol("n")
    b = GraphBuilder()
    boxes = b.input("boxes", (batch, n, 4), "float32")
    scores = b.input("scores", (batch, classes, n), "float32")
    iou, floor = b.input("iou", (1,), "float32"), b.input("floor", (), "float32")
    selected, count = b.add("non_max_suppression", [boxes, scores, iou, floor],
                            {"max_output": 10}, "nms")
    indices, found = b.add("nonzero", [scores], {}, "nz")
    assert selected.shape == (batch * classes * dim_min(n, 10), 3)
    assert count.shape == () and count.dtype == selected.dtype == "int64"
    assert indices.shape == (batch * classes * n, 3) and found.shape == ()


@pytest.mark.parametrize("boxes, scores, attrs, message", [
    ((2, 5, 3), (2, 1, 5), {}, "boxes must be"),
    ((2, 5, 4), (1, 1, 5), {}, "same batch"),
    ((2, 5, 4), (2, 1, 6), {}, "one per box"),
    ((2, 5, 4), (2, 1, 5), {"max_output": -1}, "max_output must be >= 0"),
    ((2, 5, 4), (2, 1, 5), {"center_point_box": 2}, "center_point_box must be 0 or 1"),
])
def test_inconsistent_inputs_are_refused(boxes: tuple[int, ...], scores: tuple[int, ...],
                                         attrs: dict[str, int], message: str) -> None:
    b = GraphBuilder()
    inputs = [b.input("boxes", boxes, "float32"), b.input("scores", scores, "float32"),
              b.input("iou", (), "float32"), b.input("floor", (), "float32")]
    with pytest.raises(ShapeError, match=message):
        b.add("non_max_suppression", inputs, {"max_output": 3, **attrs}, "nms")


def test_a_direct_kernel_stays_alone_in_its_group() -> None:
    """An elementwise op reading its only used output would otherwise fuse into its
    group (an epilogue of an opaque anchor), which no directly written kernel computes."""
    b = GraphBuilder()
    x = b.input("x", (4, 5), "float32")
    indices, _ = b.add("nonzero", [b.add1("relu", [x], {}, "relu")], {}, "nz")
    shifted = b.add1("add", [indices, indices], {}, "shift")
    groups = fuse_ops(b.finish([shifted]))
    assert [[n.op for n in g.nodes] for g in groups] == [["relu"], ["nonzero"], ["add"]]
