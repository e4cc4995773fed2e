"""Sizes in the graph IR are exact Python ints, checked where every type is made: no
shape can wrap int64 into a small buffer, and folding never builds a constant far larger
than its inputs."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, ShapeError
from tensorsmith.ir.op_registry import MAX_TENSOR_BYTES, TensorType, tensor_bytes
from tensorsmith.ir.passes import fold_constants

WRAPS = 48038396025285291  # 768 * WRAPS is 256 modulo 2**64


def test_a_reshape_whose_size_wraps_int64_names_the_node() -> None:
    b = GraphBuilder()
    x = b.input("x", (256,), "float32")
    with pytest.raises(ShapeError, match=r"node 'r' \(reshape\): cannot reshape \[256\] "
                                         r"\(256 elements\) to \[768, 48038396025285291\]"):
        b.add1("reshape", [x], {"shape": [768, WRAPS]}, name="r")


def test_an_inferred_type_over_the_limit_names_node_and_dims() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 1), "float32")
    with pytest.raises(ShapeError, match=rf"node 'e' \(expand\): a float32\[768, {WRAPS}\] "
                                         r"tensor has 36893488147419103488 elements"):
        b.add1("expand", [x], {"shape": [768, WRAPS]}, name="e")


def test_a_graph_input_over_the_limit_is_refused() -> None:
    with pytest.raises(ShapeError, match=r"graph input 'x': .*over the limit of 2\*\*48"):
        GraphBuilder().input("x", (2**46, 8), "float32")


def test_the_limit_is_inclusive_and_counts_bytes() -> None:
    assert tensor_bytes((2**46,), "float32") == MAX_TENSOR_BYTES
    with pytest.raises(ShapeError, match="over the limit"):
        TensorType((2**46 + 1,), "float32")
    with pytest.raises(ShapeError, match=r"shape \[2, -1\] has a negative dimension"):
        TensorType((2, -1), "int8")


def test_types_hold_python_ints() -> None:
    t = TensorType((np.int64(3), np.int32(4)), "float32")  # type: ignore[arg-type]
    assert t.shape == (3, 4) and all(type(d) is int for d in t.shape)


def test_folding_leaves_a_growing_broadcast_to_a_kernel() -> None:
    b = GraphBuilder()
    one = b.constant("one", np.float64(1.0))
    big = b.add1("expand", [one], {"shape": [2**24]}, name="big")  # 128 MiB from 8 bytes
    small = b.add1("expand", [one], {"shape": [1024]}, name="small")
    g = fold_constants(b.finish([big, small]))
    assert [n.name for n in g.nodes] == ["big"]
    assert g.outputs[1].is_constant and g.outputs[1].shape == (1024,)


def test_folding_still_casts_weights() -> None:
    b = GraphBuilder()
    w = b.constant("w", np.ones((2**21, 16), np.int8))  # 32 MiB of int8 -> 256 MiB float64
    y = b.add1("cast", [w], {"dtype": "float64"}, name="c")
    g = fold_constants(b.finish([y]))
    assert not g.nodes and g.outputs[0].is_constant
