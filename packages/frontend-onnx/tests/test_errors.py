"""Every way an import can fail says what and where, as a TensorsmithError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import make_model, one_node
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError, ShapeError, UnsupportedOpError
from tensorsmith.runtime.errors import TensorsmithError


def relu_model(shape: list[int | str] | None = None, opset: int = 17) -> onnx.ModelProto:
    return one_node("Relu", {"input": ("float32", shape or ["N", 784])}, ["y"], opset=opset)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"nope\.onnx: no such file"):
        from_onnx(tmp_path / "nope.onnx")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="is a directory"):
        from_onnx(tmp_path)


@pytest.mark.parametrize("content", [b"hello, this is not a model\n", b"\xff\xfe\x00garbage",
                                     b""])
def test_not_an_onnx_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=r"x\.txt is not an ONNX model \(.+\)"):
        from_onnx(path)


def test_wrong_argument_type() -> None:
    with pytest.raises(ModelError, match=r"takes an onnx\.ModelProto or a path"):
        from_onnx(42)  # type: ignore[arg-type]


def test_checker_failure_is_reported() -> None:
    m = relu_model([1, 4])
    m.graph.node[0].input[0] = "nowhere"  # reads a value nothing produces
    with pytest.raises(ModelError, match=r"not a valid ONNX model: the ONNX checker says: .*"
                                         r"nowhere"):
        from_onnx(m)


@pytest.mark.parametrize("opset", [29])
def test_unsupported_opset(opset: int) -> None:
    m = relu_model([1, 4], opset=opset)
    with pytest.raises(ModelError, match=rf"uses opset {opset} of the default ONNX domain; "
                                         r"tensorsmith imports opsets 1 to 28"):
        from_onnx(m)


def test_all_unsupported_ops_in_one_error() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("Bernoulli", ["a"], ["b"], name="bernoulli_1"),
        helper.make_node("RoiAlign", ["b", "b", "b"], ["c"], name="roi_align_1"),
        helper.make_node("Bernoulli", ["c"], ["d"], name="bernoulli_2"),
        helper.make_node("RandomNormalLike", ["d"], ["e"], name=""),
        helper.make_node("FusedThing", ["e"], ["y"], name="custom", domain="com.example"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(m)
    message = str(info.value)
    assert "4 unsupported operators" in message
    assert "Bernoulli (opset 17): nodes 'bernoulli_1', 'bernoulli_2'" in message
    assert "RoiAlign (opset 17): node 'roi_align_1'" in message
    assert "RandomNormalLike (opset 17): node #4 (unnamed)" in message
    assert "com.example.FusedThing (com.example opset 1): node 'custom'" in message
    assert "Relu" not in message


def test_symbolic_dim_needs_a_shape_where_static_shapes_are_demanded() -> None:
    with pytest.raises(ModelError) as info:
        from_onnx(relu_model(["N", 784]), static=True)
    message = str(info.value)
    assert "input 'input' has shape [N, 784] with symbolic dimension(s) N" in message
    assert "shape={'input': (1, 784)}" in message
    assert "--input-shape input:1,784" in message
    assert "dims={'N': 1} or --dim N=1" in message


def test_every_input_missing_a_shape_is_named() -> None:
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add")
    m = make_model([node], {"a": ("float32", ["batch", 3]), "b": ("float32", [None, 3])}, ["y"])
    with pytest.raises(ModelError) as info:
        from_onnx(m, static=True)
    message = str(info.value)
    assert "input 'a' has shape [batch, 3]" in message
    assert "input 'b' has shape [?, 3] with symbolic dimension(s) ?" in message
    assert "shape={'a': (1, 3), 'b': (1, 3)}" in message
    assert "--input-shape a:1,3 --input-shape b:1,3" in message


def test_given_shape_contradicts_static_dim() -> None:
    with pytest.raises(ModelError, match=r"input 'input' has shape \[N, 784\] in the model; "
                                         r"the shape given, \(1, 100\), has 100 at axis 1, "
                                         r"expected 784"):
        from_onnx(relu_model(), {"input": (1, 100)})


def test_given_shape_of_wrong_rank() -> None:
    with pytest.raises(ModelError, match=r"has rank 2 \[N, 784\] in the model, but the shape "
                                         r"given, \(784,\), has rank 1"):
        from_onnx(relu_model(), {"input": (784,)})


def test_shape_for_unknown_input() -> None:
    with pytest.raises(ModelError, match=r"shape given for 'inptu', which is not an input of "
                                         r"the model \(its inputs: 'input'\)"):
        from_onnx(relu_model(), {"inptu": (1, 784)})


def test_initializers_listed_as_inputs_are_constants() -> None:
    """IR version 3 lists every initializer among the graph inputs too."""
    m = one_node("Add", {"x": ("float32", [2, 3]), "b": ("float32", [3])}, ["y"],
                 opset=7)
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(3, np.float32), "b"))
    m.ir_version = 3
    graph, params = from_onnx(m)
    assert [v.name for v in graph.inputs] == ["x"]
    assert list(params) == ["b"]


def test_one_shape_names_shared_symbols() -> None:
    """BERT-style inputs share 'batch' and 'seq': one given shape sizes all of them."""
    node = helper.make_node("Add", ["ids", "mask"], ["y"], name="add")
    m = make_model([node], {"ids": ("int64", ["batch", "seq"]),
                            "mask": ("int64", ["batch", "seq"])}, {"y": "int64"})
    graph, _ = from_onnx(m, {"ids": (2, 7)})
    assert [v.shape for v in graph.inputs] == [(2, 7), (2, 7)]


def test_conflicting_symbol_sizes() -> None:
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add")
    m = make_model([node], {"a": ("float32", ["n", 3]), "b": ("float32", ["n", 3])}, ["y"])
    with pytest.raises(ModelError, match=r"dimension 'n' is 1 in the shape given for input "
                                         r"'a' but 2 in the one for 'b'"):
        from_onnx(m, {"a": (1, 3), "b": (2, 3)})


def test_static_model_needs_no_shape() -> None:
    graph, _ = from_onnx(relu_model([2, 3]))
    assert graph.inputs[0].shape == (2, 3)


def test_unsupported_input_dtype() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["y"])], "g",
        [helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT8E4M3FN, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT8E4M3FN, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"input 's' has dtype FLOAT8E4M3FN, which tensorsmith "
                                         r"does not support \(supported: float32"):
        from_onnx(m)


def test_converter_shape_error_names_the_node() -> None:
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="fc1")
    m = make_model([node], {"a": ("float32", [2, 3]), "b": ("float32", [4, 5])}, ["y"])
    with pytest.raises(ShapeError, match=r"node 'fc1' \(MatMul, opset 17\): matmul inner "
                                         r"dimensions differ"):
        from_onnx(m)


def test_converter_error_names_unnamed_node() -> None:
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    m = make_model([node], {"x": ("float32", [2, 3])}, ["y"],
                   {"s": np.array([4, -1], np.int64)})
    with pytest.raises(ModelError, match=r"node #0 \(Reshape, opset 17, output 'y'\): cannot "
                                         r"reshape \[2, 3\] \(6 elements\) to \[4, -1\]"):
        from_onnx(m)


def test_runtime_value_where_a_constant_is_needed() -> None:
    """A target of run-time length: not even the output's rank is known when compiling
    (a target of known length becomes sizes computed at run time)."""
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="r")
    m = make_model([node], {"x": ("float32", [2, 3]), "s": ("int64", ["n"])}, ["y"])
    with pytest.raises(ModelError, match=r"node 'r' \(Reshape, opset 17\): input 1 \(shape\) "
                                         r"must be known when the model is compiled .*'s' is "
                                         r"a graph input, whose values are known only at run "
                                         r"time"):
        from_onnx(m)


def test_unsupported_cast_target() -> None:
    node = helper.make_node("Cast", ["x"], ["y"], name="c", to=onnx.TensorProto.COMPLEX64)
    m = make_model([node], {"x": ("float32", [2])}, {"y": "int64"})
    m.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.COMPLEX64
    with pytest.raises(ModelError, match=r"node 'c' \(Cast, opset 17\): the cast target has "
                                         r"dtype COMPLEX64"):
        from_onnx(m)


def test_all_errors_are_tensorsmith_errors() -> None:
    assert issubclass(ModelError, TensorsmithError)
    assert issubclass(UnsupportedOpError, ModelError)
    assert issubclass(ShapeError, ModelError)
