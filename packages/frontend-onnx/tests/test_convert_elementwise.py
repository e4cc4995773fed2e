"""Elementwise converters against onnxruntime: unary, binary, logic, Pow, Clip, Cast,
Where, variadic ops and the composed activations."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, one_node, rand
from onnx import TensorProto, helper

UNARY = ["Relu", "Neg", "Exp", "Tanh", "Erf", "Abs", "Sigmoid", "Floor", "Ceil", "Softsign",
         "Softplus", "Sign", "Identity"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op: str) -> None:
    check(one_node(op, {"x": ("float32", [3, 4])}, ["y"]), {"x": rand(3, 4)})


@pytest.mark.parametrize("op", ["Log", "Sqrt", "Reciprocal"])
def test_unary_positive(op: str) -> None:
    check(one_node(op, {"x": ("float32", [3, 4])}, ["y"]), {"x": rand(3, 4, low=0.1)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", [([2, 3, 4], [2, 3, 4]), ([2, 3, 4], [4]),
                                    ([3, 1], [1, 4]), ([], [2, 3])])
def test_binary_broadcast(op: str, shapes: tuple[list[int], list[int]]) -> None:
    a, b = shapes
    m = one_node(op, {"a": ("float32", a), "b": ("float32", b)}, ["y"])
    check(m, {"a": rand(*a), "b": rand(*b, seed=1, low=0.5)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_int(op: str) -> None:
    m = one_node(op, {"a": ("int64", [6]), "b": ("int64", [6])}, {"y": "int64"})
    check(m, {"a": np.array([7, -7, 7, -7, 0, 5]), "b": np.array([2, 2, -2, -2, 3, 1])})


def test_binary_with_initializer_opset7() -> None:
    m = one_node("Add", {"a": ("float32", [2, 3])}, ["y"], {"b": rand(3, seed=2)}, opset=7)
    check(m, {"a": rand(2, 3)})


@pytest.mark.parametrize("op,opset", [("Equal", 13), ("Less", 13), ("Greater", 13),
                                      ("LessOrEqual", 16), ("GreaterOrEqual", 16)])
def test_comparisons(op: str, opset: int) -> None:
    m = one_node(op, {"a": ("float32", [2, 3]), "b": ("float32", [3])}, {"y": "bool"},
                 opset=opset)
    a = np.array([[1, 2, 3], [3, 2, 1]], np.float32)
    check(m, {"a": a, "b": np.array([2, 2, 2], np.float32)})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op: str) -> None:
    m = one_node(op, {"a": ("bool", [2, 4]), "b": ("bool", [4])}, {"y": "bool"})
    check(m, {"a": rand(2, 4, dtype="bool"), "b": rand(4, dtype="bool", seed=3)})


def test_not_and_isnan() -> None:
    nodes = [helper.make_node("IsNaN", ["x"], ["nan"]),
             helper.make_node("Not", ["nan"], ["y"])]
    m = make_model(nodes, {"x": ("float32", [4])}, {"nan": "bool", "y": "bool"})
    check(m, {"x": np.array([1.0, np.nan, -2.0, np.nan], np.float32)})


@pytest.mark.parametrize("exponent", [2.0, 0.5, 1.0, 3.0, -1.5])
def test_pow_constant_exponent(exponent: float) -> None:
    m = one_node("Pow", {"x": ("float32", [3, 4])}, ["y"],
                 {"e": np.array(exponent, np.float32)})
    check(m, {"x": rand(3, 4, low=0.1)})


def test_pow_runtime_int_exponent() -> None:
    m = one_node("Pow", {"x": ("float32", [2, 3]), "e": ("int64", [3])}, ["y"], opset=15)
    check(m, {"x": rand(2, 3, low=0.5), "e": np.array([0, 2, 3], np.int64)})


@pytest.mark.parametrize("attrs", [{"min": -0.5, "max": 0.5}, {"min": 0.0}, {"max": 1.0}, {}])
def test_clip_attributes_opset10(attrs: dict[str, float]) -> None:
    m = one_node("Clip", {"x": ("float32", [3, 4])}, ["y"], opset=10, **attrs)
    check(m, {"x": rand(3, 4)})


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi")])
def test_clip_inputs(bounds: tuple[str, str]) -> None:
    inits = {"lo": np.float32(-0.5), "hi": np.float32(1.0)}
    node = helper.make_node("Clip", ["x", *bounds], ["y"], name="clip")
    m = make_model([node], {"x": ("float32", [3, 4])}, ["y"],
                   {k: v for k, v in inits.items() if k in bounds}, opset=13)
    graph = check(m, {"x": rand(3, 4)})
    assert [n.op for n in graph.nodes] == (["clip"] if "" not in bounds else
                                           ["max"] if bounds[0] else ["min"])


def test_clip_runtime_bounds() -> None:
    m = one_node("Clip", {"x": ("float32", [5]), "lo": ("float32", []),
                          "hi": ("float32", [])}, ["y"], opset=12)
    check(m, {"x": rand(5), "lo": np.float32(-1), "hi": np.float32(0.5)})


def test_relu6_int_clip() -> None:
    m = one_node("Clip", {"x": ("int32", [6])}, {"y": "int32"},
                 {"lo": np.int32(0), "hi": np.int32(6)}, opset=13)
    check(m, {"x": np.array([-3, 0, 2, 6, 9, 100], np.int32)})


@pytest.mark.parametrize("src,dst", [("float32", "int64"), ("float32", "int32"),
                                     ("int64", "float32"), ("float32", "bool"),
                                     ("bool", "float32"), ("float32", "float16"),
                                     ("float32", "float32"), ("int32", "int8")])
def test_cast(src: str, dst: str) -> None:
    to = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "float32": TensorProto.FLOAT,
          "bool": TensorProto.BOOL, "float16": TensorProto.FLOAT16, "int8": TensorProto.INT8}
    m = one_node("Cast", {"x": (src, [2, 4])}, {"y": dst}, to=to[dst])
    x = np.array([[-2.7, -1, 0, 0.4], [1.5, 2.9, 3, 100]]).astype(src)
    check(m, {"x": x})


def test_cast_like() -> None:
    m = one_node("CastLike", {"x": ("float32", [4]), "like": ("int64", [1])}, {"y": "int64"})
    check(m, {"x": np.array([1.7, -1.7, 0, 3], np.float32), "like": np.array([0])})


def test_where() -> None:
    m = one_node("Where", {"c": ("bool", [2, 3]), "a": ("float32", [3]),
                           "b": ("float32", [2, 1])}, ["y"])
    check(m, {"c": rand(2, 3, dtype="bool"), "a": rand(3), "b": rand(2, 1, seed=4)})


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("count", [1, 3])
def test_variadic(op: str, count: int) -> None:
    inputs = {f"x{i}": ("float32", [2, 3] if i % 2 == 0 else [3]) for i in range(count)}
    feeds = {n: rand(*s, seed=i) for i, (n, (_, s)) in enumerate(inputs.items())}
    check(one_node(op, inputs, ["y"]), feeds)


def test_mod_of_constants() -> None:
    nodes = [helper.make_node("Mod", ["a", "b"], ["m"]),
             helper.make_node("Cast", ["m"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "mf"], ["y"])]
    m = make_model(nodes, {"x": ("float32", [4])}, ["y"],
                   {"a": np.array([7, -7, 7, -7]), "b": np.array([3, 3, -3, -3])})
    check(m, {"x": rand(4)})


@pytest.mark.parametrize("op,attrs,opset", [
    ("LeakyRelu", {"alpha": 0.1}, 16), ("LeakyRelu", {}, 7), ("Elu", {"alpha": 0.7}, 13),
    ("Selu", {}, 13), ("Celu", {"alpha": 2.0}, 13), ("ThresholdedRelu", {"alpha": 0.3}, 13),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 13), ("HardSwish", {}, 14),
    ("Mish", {}, 18), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
])
def test_activations(op: str, attrs: dict[str, object], opset: int) -> None:
    m = one_node(op, {"x": ("float32", [3, 5])}, ["y"], opset=opset, **attrs)
    check(m, {"x": rand(3, 5, low=-4, high=4)})


def test_softplus_does_not_overflow() -> None:
    m = one_node("Softplus", {"x": ("float32", [4])}, ["y"])
    check(m, {"x": np.array([-100, -1, 1, 100], np.float32)})


def test_prelu_per_channel() -> None:
    m = one_node("PRelu", {"x": ("float32", [2, 3, 2, 2])}, ["y"],
                 {"slope": np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1, 1)})
    check(m, {"x": rand(2, 3, 2, 2)})


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_trig(op: str) -> None:
    check(one_node(op, {"x": ("float32", [3, 4])}, ["y"]), {"x": rand(3, 4, low=-4, high=4)})


@pytest.mark.parametrize("positive,negative", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf(positive: int, negative: int) -> None:
    m = one_node("IsInf", {"x": ("float32", [5])}, {"y": "bool"}, detect_positive=positive,
                 detect_negative=negative)
    check(m, {"x": np.array([1, np.inf, -np.inf, np.nan, 0], np.float32)})
