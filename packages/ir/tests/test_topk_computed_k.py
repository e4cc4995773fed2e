"""topk with a k computed from an input's value (ONNX TopK's K given at run time): the
output's axis is that size, and since only the run knows whether k fits the axis, shape
inference records min(k, length) == k, which every run checks."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, ModelError, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.host_sizes import input_value
from tensorsmith.ir.symbolic import SymbolicDimError, symbol

F = "float32"


def _topk_graph(shape: tuple[object, ...], axis: int, largest: int = 1) -> Graph:
    b = GraphBuilder()
    x = b.input("x", shape, F)
    b.input("k", (1,), "int64")
    k = b.size(input_value("k", 0), "k", "node 'topk'")
    values, indices = b.add("topk", [x], {"k": k, "axis": axis, "largest": largest}, "topk")
    return b.finish([values, indices])


def _want(x: np.ndarray, k: int, axis: int, largest: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


def test_the_output_axis_is_the_computed_k_and_the_fit_is_assumed() -> None:
    g = _topk_graph((3, 6), axis=1)
    assert [str(v) for v in g.outputs[0].shape] == ["3", "k"]
    assert [(str(a.lhs), str(a.rhs)) for a in g.assumptions] == [("min(6, k)", "k")]
    text = str(g)
    assert "size k = value('k', 0)" in text and "assume min(6, k) == k" in text


@pytest.mark.parametrize("largest", [1, 0])
def test_each_run_takes_its_own_k(largest: int) -> None:
    g = _topk_graph((4, 6), axis=1, largest=largest)
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(F)
    x[2, 1] = x[2, 4]  # a tie: the lower index first
    for k in (1, 3, 6):
        values, indices = run_graph(g, {"x": x, "k": np.array([k], np.int64)})
        want_values, want_indices = _want(x, k, 1, largest)
        np.testing.assert_array_equal(values, want_values)
        np.testing.assert_array_equal(indices, want_indices)


def test_a_k_the_axis_cannot_hold_is_refused_by_the_run() -> None:
    g = _topk_graph((3, 6), axis=-1)
    x = np.zeros((3, 6), F)
    with pytest.raises(ModelError, match=r"topk k=k for an axis of 6"):
        run_graph(g, {"x": x, "k": np.array([7], np.int64)})
    with pytest.raises(ModelError, match=r"but it must be at least 1"):
        run_graph(g, {"x": x, "k": np.array([0], np.int64)})


def test_a_computed_k_along_a_symbolic_axis() -> None:
    g = _topk_graph((symbol("batch"), symbol("seq")), axis=1)
    assert [(str(a.lhs), str(a.rhs)) for a in g.assumptions] == [("min(k, seq)", "k")]
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(F)
    values, _ = run_graph(g, {"x": x, "k": np.array([2], np.int64)})
    np.testing.assert_array_equal(values, _want(x, 2, 1, 1)[0])
    with pytest.raises(ModelError, match=r"topk k=k for an axis of seq"):
        run_graph(g, {"x": x, "k": np.array([6], np.int64)})


def test_a_symbolic_k_that_is_not_computed_still_needs_a_decidable_fit() -> None:
    b = GraphBuilder()
    x = b.input("x", (symbol("batch"), 6), F)
    with pytest.raises(SymbolicDimError, match=r"topk k=batch for an axis of 6"):
        b.add("topk", [x], {"k": symbol("batch"), "axis": 1}, "topk")
