"""MatMul, Gemm, Softmax, Dropout, normalisation layers and global pooling."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, one_node, ort_run, rand
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.interpreter import run_graph


@pytest.mark.parametrize("a,b", [([3, 4], [4, 5]), ([2, 3, 4], [4, 5]), ([4], [4, 5]),
                                 ([3, 4], [4]), ([4], [4]), ([2, 1, 3, 4], [5, 4, 2]),
                                 ([2, 3, 4], [2, 4, 5])])
def test_matmul(a: list[int], b: list[int]) -> None:
    m = one_node("MatMul", {"a": ("float32", a), "b": ("float32", b)}, ["y"])
    check(m, {"a": rand(*a), "b": rand(*b, seed=1)})


def test_matmul_int() -> None:
    m = one_node("MatMul", {"a": ("int32", [2, 3]), "b": ("int32", [3, 2])}, {"y": "int32"})
    check(m, {"a": rand(2, 3, dtype="int32"), "b": rand(3, 2, dtype="int32", seed=1)})


@pytest.mark.parametrize("attrs", [{}, {"transA": 1}, {"transB": 1},
                                   {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0},
                                   {"alpha": 1.5, "beta": 0.0}])
@pytest.mark.parametrize("bias", [[5], [3, 5], [1, 5], [3, 1], [], None])
def test_gemm(attrs: dict[str, float], bias: list[int] | None) -> None:
    a = [4, 3] if attrs.get("transA") else [3, 4]
    b = [5, 4] if attrs.get("transB") else [4, 5]
    inits = {"B": rand(*b, seed=1)}
    if bias is not None:
        inits["C"] = rand(*bias, seed=2)
    m = one_node("Gemm", {"A": ("float32", a)}, ["y"], inits, opset=13, **attrs)
    check(m, {"A": rand(*a)})


def test_gemm_runtime_operands_opset9() -> None:
    m = one_node("Gemm", {"A": ("float32", [3, 4]), "B": ("float32", [5, 4]),
                          "C": ("float32", [5])}, ["y"], opset=9, transB=1, beta=0.5)
    check(m, {"A": rand(3, 4), "B": rand(5, 4, seed=1), "C": rand(5, seed=2)})


def test_gemm_bias_that_does_not_broadcast() -> None:
    m = one_node("Gemm", {"A": ("float32", [3, 4])}, ["y"],
                 {"B": rand(4, 5), "C": rand(2, 5)}, opset=13)
    with pytest.raises(ModelError, match=r"node 'n' \(Gemm, opset 13\): C of shape \[2, 5\] "
                                         r"does not broadcast to the result \[3, 5\]"):
        from_onnx(m)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2])
def test_softmax(op: str, opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    m = one_node(op, {"x": ("float32", [2, 3, 4])}, ["y"], opset=opset, **attrs)
    graph = check(m, {"x": rand(2, 3, 4, low=-5, high=5)})
    effective = (axis if axis is not None else (1 if opset < 13 else -1)) % 3
    if opset < 13 and effective != 2:  # the old semantics: a 2-D view at the axis
        assert [n.op for n in graph.nodes] == ["reshape", "softmax", "reshape"]
    else:
        assert [n.op for n in graph.nodes] == ["softmax"]


@pytest.mark.parametrize("opset", [7, 10, 12, 13])
def test_dropout_is_identity(opset: int) -> None:
    node = helper.make_node("Dropout", ["x"], ["y"], name="d", ratio=0.3)
    if opset >= 12:
        node = helper.make_node("Dropout", ["x", "r"], ["y"], name="d")
    m = make_model([node], {"x": ("float32", [2, 3])}, ["y"],
                   {"r": np.float32(0.3)} if opset >= 12 else None, opset=opset)
    check(m, {"x": rand(2, 3)})


@pytest.mark.parametrize("opset", [7, 10, 13])
def test_dropout_mask_keeps_everything(opset: int) -> None:
    """The mask is all true: every element is kept. (onnxruntime returns all false before
    opset 12, although it keeps every element, so only the dtype is compared with it.)"""
    mask_dtype = "bool" if opset >= 10 else "float32"
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], name="d")
    m = make_model([node], {"x": ("float32", [2, 3])}, {"y": "float32", "mask": mask_dtype},
                   opset=opset)
    x = rand(2, 3)
    graph, _ = from_onnx(m)
    y, mask = run_graph(graph, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == ort_run(m, {"x": x})[1].dtype and mask.all()


def test_dropout_in_training_mode_is_refused() -> None:
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="d")
    m = make_model([node], {"x": ("float32", [2, 3])}, ["y"],
                   {"r": np.float32(0.5), "t": np.bool_(True)})
    with pytest.raises(ModelError, match="training_mode=True makes Dropout random"):
        from_onnx(m)


@pytest.mark.parametrize("opset", [7, 9, 15])
@pytest.mark.parametrize("shape", [[2, 3, 4, 5], [2, 3], [2, 3, 4]])
def test_batch_norm(opset: int, shape: list[int]) -> None:
    c = shape[1]
    inits = {"s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
             "v": rand(c, seed=4, low=0.5)}
    m = one_node("BatchNormalization", {"x": ("float32", shape)}, ["y"], inits, opset=opset,
                 epsilon=1e-3)
    check(m, {"x": rand(*shape)})


def test_batch_norm_runtime_stats() -> None:
    m = one_node("BatchNormalization", {"x": ("float32", [2, 3, 4]), "s": ("float32", [3]),
                                        "b": ("float32", [3]), "m": ("float32", [3]),
                                        "v": ("float32", [3])}, ["y"])
    check(m, {"x": rand(2, 3, 4), "s": rand(3, seed=1), "b": rand(3, seed=2),
              "m": rand(3, seed=3), "v": rand(3, seed=4, low=0.5)})


@pytest.mark.parametrize("axis", [-1, 1, 2])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(axis: int, with_bias: bool) -> None:
    shape = [2, 3, 4]
    norm = shape[axis:]
    inits = {"s": rand(*norm, seed=1)}
    if with_bias:
        inits["b"] = rand(*norm, seed=2)
    m = one_node("LayerNormalization", {"x": ("float32", shape)}, ["y"], inits, axis=axis,
                 epsilon=1e-4)
    check(m, {"x": rand(*shape, low=-3, high=3)})


def test_layer_norm_all_outputs() -> None:
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"],
                            name="ln")
    m = make_model([node], {"x": ("float32", [2, 5])}, ["y", "mean", "inv"],
                   {"s": rand(5, seed=1), "b": rand(5, seed=2)})
    check(m, {"x": rand(2, 5)})


def test_layer_norm_float16() -> None:
    m = one_node("LayerNormalization", {"x": ("float16", [2, 8])}, {"y": "float16"},
                 {"s": rand(8, seed=1, dtype="float16")})
    check(m, {"x": rand(2, 8, dtype="float16")}, atol=2e-3)


def test_layer_norm_as_exported_at_opset13() -> None:
    """ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add: torch's LayerNorm."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["x", "mu"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "w"], ["nw"]),
        helper.make_node("Add", ["nw", "b"], ["y"]),
    ]
    m = make_model(nodes, {"x": ("float32", [2, 3, 8])}, ["y"],
                   {"two": np.float32(2), "eps": np.float32(1e-5), "w": rand(8, seed=1),
                    "b": rand(8, seed=2)}, opset=13)
    graph = check(m, {"x": rand(2, 3, 8)})
    assert "pow" not in [n.op for n in graph.nodes]


def test_instance_norm() -> None:
    m = one_node("InstanceNormalization", {"x": ("float32", [2, 3, 4, 5])}, ["y"],
                 {"s": rand(3, seed=1), "b": rand(3, seed=2)}, epsilon=1e-3)
    check(m, {"x": rand(2, 3, 4, 5)})


def test_group_norm() -> None:
    m = one_node("GroupNormalization", {"x": ("float32", [2, 6, 3, 2])}, ["y"],
                 {"s": rand(6, seed=1), "b": rand(6, seed=2)}, opset=21, num_groups=2)
    check(m, {"x": rand(2, 6, 3, 2)})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [[2, 3, 4, 5], [1, 2, 7], [1, 2, 2, 3, 2]])
def test_global_pool(op: str, shape: list[int]) -> None:
    check(one_node(op, {"x": ("float32", shape)}, ["y"]), {"x": rand(*shape)})
