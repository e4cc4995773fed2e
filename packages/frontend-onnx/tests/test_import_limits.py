"""Shapes, sizes and declarations a model may not have: each is refused at import with a
TensorsmithError naming the node or tensor, never compiled into a wrong artifact or left
to exhaust time and memory."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import make_model, one_node
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError, ShapeError

#: 768 * WRAPS is 256 modulo 2**64: an int64 product of these dims looks like 256 elements
WRAPS = 48038396025285291
OVER_LIMIT = r"over the limit of 2\*\*48 bytes"


@pytest.mark.parametrize("op, x_shape, init, message", [
    ("Reshape", [256], np.array([768, WRAPS], np.int64),
     r"cannot reshape \[256\] \(256 elements\) to \[768, 48038396025285291\] "
     r"\(36893488147419103488 elements\)"),
    ("Expand", [1, 1], np.array([768, WRAPS], np.int64),
     rf"a float32\[768, {WRAPS}\] tensor has 36893488147419103488 elements .*{OVER_LIMIT}"),
    ("Tile", [768], np.array([WRAPS], np.int64),
     rf"a float32\[{WRAPS}, 768\] tensor has 36893488147419103488 elements .*{OVER_LIMIT}"),
    ("Pad", [768, 1], np.array([0, 0, 0, WRAPS - 1], np.int64),
     rf"a float32\[768, {WRAPS}\] tensor has 36893488147419103488 elements .*{OVER_LIMIT}"),
])
def test_a_shape_whose_size_wraps_int64_is_refused(op: str, x_shape: list[int],
                                                   init: np.ndarray, message: str) -> None:
    m = one_node(op, {"x": ("float32", x_shape)}, ["y"], inits={"p": init})
    with pytest.raises(ShapeError, match=rf"node 'n' \({op}, opset 17\): {message}"):
        from_onnx(m)


@pytest.mark.parametrize("declared, given", [([768, WRAPS], None),
                                             (["N", "M"], {"x": (768, WRAPS)})])
def test_an_input_over_the_size_limit_is_refused(declared: list[int | str],
                                                 given: dict[str, tuple[int, ...]] | None
                                                 ) -> None:
    m = one_node("Relu", {"x": ("float32", declared)}, ["y"])
    with pytest.raises(ShapeError, match=rf"graph input 'x': .*{WRAPS}.*{OVER_LIMIT}"):
        from_onnx(m, given)


def test_resize_to_too_many_positions_is_refused_at_once() -> None:
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="linear")
    m = make_model([node], {"x": ("float32", [1, 1, 2, 2])}, ["y"],
                   inits={"s": np.array([1, 1, 1e6, 1e6], np.float32)})
    with pytest.raises(ModelError, match=r"node 'up' \(Resize, opset 17\): axis 2 resized "
                                         r"from 2 to 2000000 positions, over the import limit"):
        from_onnx(m)


@pytest.mark.parametrize("node, inits, out", [
    (helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill"),
     {"s": np.array([10**9], np.int64)}, "float32"),
    (helper.make_node("Range", ["a", "b", "c"], ["y"], name="fill"),
     {"a": np.array(0, np.int64), "b": np.array(10**9, np.int64), "c": np.array(1, np.int64)},
     "int64"),
])
def test_a_huge_constant_is_refused_before_it_is_built(node: onnx.NodeProto,
                                                       inits: dict[str, np.ndarray],
                                                       out: str) -> None:
    m = make_model([node], {}, {"y": out}, inits=inits)
    with pytest.raises(ModelError, match=rf"node 'fill' \({node.op_type}, opset 17\): the "
                                         rf"output would be a {out}\[1000000000\] constant .*"
                                         r"over the import limit"):
        from_onnx(m)


def test_a_declared_output_dtype_must_match_the_computed_one() -> None:
    m = one_node("Cast", {"x": ("float32", [2])}, {"y": "int64"}, to=onnx.TensorProto.INT64)
    m.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    with pytest.raises(ModelError, match=r"graph output 'y' is declared FLOAT, but the model "
                                         r"computes it as INT64 \(int64\)"):
        from_onnx(m)


def test_a_graph_without_nodes_is_refused() -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    m = helper.make_model(helper.make_graph([], "g", [x], [x]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"the graph has no nodes"):
        from_onnx(m)


def test_a_graph_without_outputs_is_refused() -> None:
    m = one_node("Relu", {"x": ("float32", [2])}, ["y"])
    del m.graph.output[:]
    with pytest.raises(ModelError, match=r"the graph has no outputs"):
        from_onnx(m)


@pytest.mark.parametrize("where", ["input", "output", "tensor"])
def test_a_nul_character_in_a_name_is_refused(where: str) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="a"),
             helper.make_node("Relu", ["h"], ["y"], name="b")]
    m = make_model(nodes, {"x": ("float32", [2])}, ["y"])
    bad = {"input": "x", "output": "y", "tensor": "h"}[where]
    for vi in (*m.graph.input, *m.graph.output):
        if vi.name == bad:
            vi.name = bad + "\0evil"
    for n in m.graph.node:
        n.input[:] = [bad + "\0evil" if i == bad else i for i in n.input]
        n.output[:] = [bad + "\0evil" if o == bad else o for o in n.output]
    with pytest.raises(ModelError, match=rf"'{bad}\\x00evil' contains a NUL character"):
        from_onnx(m)
