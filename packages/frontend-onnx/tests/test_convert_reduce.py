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


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (2, 0, 1)])
def test_arg_reduce(op: str, axis: int, keepdims: int, last: int) -> None:
    m = one_node(op, {"x": ("float32", [3, 4, 5])}, {"y": "int64"}, axis=axis,
                 keepdims=keepdims, select_last_index=last)
    x = np.round(rand(3, 4, 5)).astype(np.float32)  # ties, so the index rule matters
    check(m, {"x": x})


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1])
def test_lp_normalization(p: int, axis: int) -> None:
    m = one_node("LpNormalization", {"x": ("float32", [3, 4])}, ["y"], axis=axis, p=p)
    x = rand(3, 4)
    x[0, 0] = x[:, 0] = 0  # a zero norm on axis 0, gives 0 rather than NaN
    check(m, {"x": x})
