"""Reductions in both forms: axes as an attribute and (ReduceSum from 13, the rest from
18) as an input, with keepdims and noop_with_empty_axes."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, one_node, rand
from onnx import helper

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES = [None, [1], [-1], [0, 2], [2, 0, 1]]


def _positive(op: str) -> bool:
    return op == "ReduceLogSum"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_attribute(op: str, axes: list[int] | None, keepdims: int) -> None:
    attrs = {"keepdims": keepdims} | ({} if axes is None else {"axes": axes})
    m = one_node(op, {"x": ("float32", [2, 3, 4])}, ["y"], opset=11 if op != "ReduceSum"
                 else 12, **attrs)
    check(m, {"x": rand(2, 3, 4, low=0.2 if _positive(op) else -1.5, high=1.5)}, atol=2e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES)
def test_axes_input(op: str, axes: list[int] | None) -> None:
    inputs = ["x"] if axes is None else ["x", "axes"]
    node = helper.make_node(op, inputs, ["y"], name="r", keepdims=0)
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    m = make_model([node], {"x": ("float32", [2, 3, 4])}, ["y"], inits, opset=18)
    check(m, {"x": rand(2, 3, 4, low=0.2 if _positive(op) else -1.5, high=1.5)}, atol=2e-5)


def test_reduce_sum_opset13_axes_input() -> None:
    m = one_node("ReduceSum", {"x": ("float32", [2, 3, 4])}, ["y"],
                 {"axes": np.array([1], np.int64)}, opset=13)
    check(m, {"x": rand(2, 3, 4)})


@pytest.mark.parametrize("noop", [0, 1])
def test_noop_with_empty_axes(noop: int) -> None:
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], noop_with_empty_axes=noop)
    m = make_model([node], {"x": ("float32", [2, 3])}, ["y"],
                   {"axes": np.array([], np.int64)}, opset=18)
    graph = check(m, {"x": rand(2, 3)})
    assert (graph.outputs[0].shape == (2, 3)) == bool(noop)


def test_int_reduce() -> None:
    m = one_node("ReduceMax", {"x": ("int64", [3, 4])}, {"y": "int64"}, opset=13, axes=[1])
    check(m, {"x": rand(3, 4, dtype="int64")})
