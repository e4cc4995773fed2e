"""non_max_suppression and nonzero compiled for every target (their kernels are written
directly as tensor IR, ir/direct.py): the padded result and the count each run gives
equal the NumPy reference (itself checked against ONNX Runtime in
packages/ir/tests/test_detection_ops.py), with static and run-time sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.op_registry import get_op
from tensorsmith.ir.symbolic import Dim, symbol

F = np.float32


def _load(graph: Graph, target: str, path: Path) -> rt.Module:
    path.mkdir(parents=True, exist_ok=True)
    file = path / ("model.so" if target == "llvm" else "model.tsm")
    build(graph, target=target).export_library(file)
    return rt.load(file)


def _nms_graph(batch: Dim, classes: Dim, n: Dim, attrs: dict[str, Any]) -> Graph:
    b = GraphBuilder()
    inputs = [b.input("boxes", (batch, n, 4), "float32"),
              b.input("scores", (batch, classes, n), "float32"),
              b.input("iou", (), "float32"), b.input("floor", (1,), "float32")]
    return b.finish(list(b.add("non_max_suppression", inputs, attrs, "nms")))


def _nms_feeds(rng: np.random.Generator, batch: int, classes: int, n: int, iou: float,
               floor: float) -> dict[str, np.ndarray]:
    boxes = rng.uniform(0, 10, (batch, n, 4)).astype(F)
    scores = rng.uniform(0, 1, (batch, classes, n)).astype(F)
    scores[:, 0, ::4] = scores[:, 0, 1:2]  # equal scores: the lower index first
    return {"boxes": boxes, "scores": scores, "iou": np.array(iou, F),
            "floor": np.array([floor], F)}


def _check(module: rt.Module, op: str, feeds: dict[str, np.ndarray], attrs: dict[str, Any]
           ) -> int:
    got_rows, got_count = module.run(feeds)
    want_rows, want_count = get_op(op).reference(list(feeds.values()), attrs)
    assert got_rows.dtype == got_count.dtype == np.int64
    assert int(got_count) == int(want_count)
    np.testing.assert_array_equal(got_rows, want_rows)
    return int(want_count)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_matches_the_reference(target: str, center: int, tmp_path: Path) -> None:
    attrs = {"center_point_box": center, "max_output": 40}  # above the boxes: K = 37
    module = _load(_nms_graph(2, 3, 37, attrs), target, tmp_path)
    counts = []
    for seed in range(3):
        feeds = _nms_feeds(np.random.default_rng(seed), 2, 3, 37, 0.2 + 0.15 * seed, 0.3)
        if center:
            feeds["boxes"][..., 2:] = np.abs(feeds["boxes"][..., 2:]) / 2
        counts.append(_check(module, "non_max_suppression", feeds, attrs))
    feeds["floor"][:] = 2.0  # no score is above it
    assert _check(module, "non_max_suppression", feeds, attrs) == 0
    feeds["floor"][:] = -np.inf  # no threshold
    counts.append(_check(module, "non_max_suppression", feeds, attrs))
    assert min(counts) > 0 and max(counts) < 2 * 3 * 37  # some suppressed, some kept


def test_nms_with_run_time_sizes(target: str, tmp_path: Path) -> None:
    attrs = {"center_point_box": 0, "max_output": 6}
    module = _load(_nms_graph(symbol("batch"), 3, symbol("n"), attrs), target, tmp_path)
    rng = np.random.default_rng(5)
    for batch, n in ((2, 11), (1, 4), (3, 23)):
        feeds = _nms_feeds(rng, batch, 3, n, 0.3, 0.1)
        assert _check(module, "non_max_suppression", feeds, attrs) > 0


def test_nms_keeping_no_boxes(target: str, tmp_path: Path) -> None:
    attrs = {"center_point_box": 0, "max_output": 0}
    module = _load(_nms_graph(2, 3, 5, attrs), target, tmp_path)
    feeds = _nms_feeds(np.random.default_rng(0), 2, 3, 5, 0.5, 0.0)
    assert _check(module, "non_max_suppression", feeds, attrs) == 0


def _nonzero_graph(shape: tuple[Dim, ...], dtype: str) -> Graph:
    b = GraphBuilder()
    x = b.input("x", shape, dtype)
    return b.finish(list(b.add("nonzero", [x], {}, "nz")))


@pytest.mark.parametrize("dtype", ["bool", "float32", "int32", "int64"])
def test_nonzero_matches_the_reference(target: str, dtype: str, tmp_path: Path) -> None:
    module = _load(_nonzero_graph((3, 7, 5), dtype), target, tmp_path)
    rng = np.random.default_rng(1)
    for density in (0.3, 0.9):
        x = (rng.integers(1, 4, (3, 7, 5)) * (rng.uniform(size=(3, 7, 5)) < density))
        assert _check(module, "nonzero", {"x": x.astype(dtype)}, {}) > 0
    assert _check(module, "nonzero", {"x": np.zeros((3, 7, 5), dtype)}, {}) == 0


def test_nonzero_with_run_time_sizes(target: str, tmp_path: Path) -> None:
    module = _load(_nonzero_graph((symbol("h"), 6), "float32"), target, tmp_path)
    rng = np.random.default_rng(2)
    for h in (1, 9, 4):
        x = rng.standard_normal((h, 6)).astype(F) * (rng.uniform(size=(h, 6)) < 0.5)
        _check(module, "nonzero", {"x": x}, {})


def test_an_unread_count_is_scratch(target: str, tmp_path: Path) -> None:
    """A graph that reads only the padded indices: the kernel still writes its count,
    to scratch; the indices feed an elementwise op in a kernel of its own."""
    b = GraphBuilder()
    x = b.input("x", (4, 9), "float32")
    indices, _ = b.add("nonzero", [x], {}, "nz")
    module = _load(b.finish([b.add1("add", [indices, indices], {}, "double")]), target,
                   tmp_path)
    x = np.random.default_rng(3).standard_normal((4, 9)).astype(F)
    x[x < 0] = 0
    (got,) = module.run({"x": x})
    np.testing.assert_array_equal(got, 2 * get_op("nonzero").reference([x], {})[0])
