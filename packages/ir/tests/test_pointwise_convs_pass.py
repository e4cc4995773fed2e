"""Pointwise convolutions as matrix products (passes/pointwise_convs.py): the graph as
text before and after, the convolutions and epilogue ops it leaves alone, the same values
through the graph interpreter, which targets take the rewrite (build._pointwise_products:
only a GPU with cooperative matrices, for float16 products its kernel takes), that the
products are tensorized there with their epilogue, and the tensorized kernel of a
rewritten convolution run by the tensor-IR interpreter against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, run_graph
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.lowering import lower_group
from tensorsmith.ir.op_registry import TensorType
from tensorsmith.ir.passes.pointwise_convs import pointwise_as_matmul
from tensorsmith.ir.schedules import default_schedule
from tensorsmith.ir.schedules.gpu_coop import takes_matmul
from tensorsmith.ir.target import GpuResources, MatrixShape
from tensorsmith.ir.te.evaluate import run_func

H = "float16"
COOP = GpuResources((MatrixShape(16, 16, 16),), subgroup_size=32, shared_bytes=49152)
COOP_TARGET = ("vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 -shared-memory=49152 "
               "-max-invocations=1024 -float16-arithmetic=1")
rng = np.random.default_rng(5)


def coop(a: TensorType, b: TensorType) -> bool:
    return takes_matmul(a, b, COOP)


def _w(*shape: int, dtype: str = H) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.3).astype(dtype)


def block(dtype: str = H, channels: int = 16, image: int = 4, residual_first: bool = True
          ) -> Graph:
    """conv 1x1 + bias + residual add + relu, then a square (reads the relu twice)."""
    b = GraphBuilder()
    x = b.input("x", (2, channels, image, image), dtype)
    r = b.input("r", (2, 32, image, image), dtype)
    h = b.add1("conv2d", [x, b.constant("w", _w(32, channels, 1, 1, dtype=dtype))], name="conv")
    h = b.add1("add", [h, b.constant("bias", _w(1, 32, 1, 1, dtype=dtype))], name="bias")
    h = b.add1("add", [r, h] if residual_first else [h, r], name="residual")
    h = b.add1("relu", [h], name="relu")
    return b.finish([b.add1("mul", [h, h], name="square")])


BLOCK = """\
graph main(%x: float16[2, 16, 4, 4], %r: float16[2, 32, 4, 4]) {
  %w: float16[32, 16, 1, 1] = const <elided>
  %bias: float16[1, 32, 1, 1] = const <elided>
  %conv_0: float16[2, 32, 4, 4] = conv2d(%x, %w)  # conv
  %bias_0: float16[2, 32, 4, 4] = add(%conv_0, %bias)  # bias
  %residual_0: float16[2, 32, 4, 4] = add(%r, %bias_0)  # residual
  %relu_0: float16[2, 32, 4, 4] = relu(%residual_0)  # relu
  %square_0: float16[2, 32, 4, 4] = mul(%relu_0, %relu_0)  # square
  return %square_0
}
"""

# The residual add's operands swapped (the product's first, for fusion), the square
# (two reads of relu_0) left on the 4-D value, which the reshape back gives it.
BLOCK_AS_PRODUCT = """\
graph main(%x: float16[2, 16, 4, 4], %r: float16[2, 32, 4, 4]) {
  %w_rows: float16[32, 16] = const <elided>
  %bias_rows: float16[1, 32, 1] = const <elided>
  %x_rows: float16[2, 16, 16] = reshape(%x) {"shape": [2, 16, 16]}  # x_rows/flatten
  %conv_0_rows: float16[2, 32, 16] = matmul(%w_rows, %x_rows)  # conv/matmul
  %bias_0_rows: float16[2, 32, 16] = add(%conv_0_rows, %bias_rows)  # bias
  %r_rows: float16[2, 32, 16] = reshape(%r) {"shape": [2, 32, 16]}  # r_rows/flatten
  %residual_0_rows: float16[2, 32, 16] = add(%bias_0_rows, %r_rows)  # residual
  %relu_0_rows: float16[2, 32, 16] = relu(%residual_0_rows)  # relu
  %relu_0: float16[2, 32, 4, 4] = reshape(%relu_0_rows) {"shape": [2, 32, 4, 4]}  # conv/unflatten
  %square_0: float16[2, 32, 4, 4] = mul(%relu_0, %relu_0)  # square
  return %square_0
}
"""


def test_text_before_and_after() -> None:
    g = block()
    assert str(g) == BLOCK
    after = pointwise_as_matmul(g, coop)
    assert str(after) == BLOCK_AS_PRODUCT
    after.verify()


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_rewritten_graph_computes_the_same_values(dtype: str) -> None:
    g = block(dtype)
    feeds = {"x": _w(2, 16, 4, 4, dtype=dtype), "r": _w(2, 32, 4, 4, dtype=dtype)}
    (want,) = run_graph(g, feeds)
    after = pointwise_as_matmul(g.copy(), lambda a, b: True)
    assert "conv2d" not in str(after)
    (got,) = run_graph(after, feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype("float32"), want.astype("float32"),
                               rtol=1e-3 if dtype == H else 1e-6, atol=1e-3 if dtype == H else 1e-6)


def _conv_graph(x_shape: tuple[int, ...], w_shape: tuple[int, ...], dtype: str = H,
                **attrs: Any) -> Graph:
    b = GraphBuilder()
    x = b.input("x", x_shape, dtype)
    y = b.add1("conv2d", [x, b.constant("w", _w(*w_shape, dtype=dtype))], attrs, name="conv")
    return b.finish([b.add1("relu", [y], name="relu")])


@pytest.mark.parametrize(("x", "w", "dtype", "attrs"), [
    ((1, 16, 4, 4), (32, 16, 3, 3), H, {"pads": [1, 1, 1, 1]}),  # not 1x1
    ((1, 16, 8, 8), (32, 16, 1, 1), H, {"strides": [2, 2]}),  # strided
    ((1, 16, 4, 4), (32, 16, 1, 1), H, {"pads": [1, 1, 1, 1]}),  # padded
    ((1, 16, 4, 4), (32, 8, 1, 1), H, {"groups": 2}),  # grouped
    ((1, 16, 4, 4), (32, 16, 1, 1), H, {"block": 16}),  # a CPU's blocked layout
    ((1, 16, 3, 3), (32, 16, 1, 1), H, {}),  # H*W = 9: not a multiple of 8 (Product's N)
    ((1, 12, 4, 4), (32, 12, 1, 1), H, {}),  # C = 12: not a multiple of 8 (Product's K)
    ((1, 16, 4, 4), (32, 16, 1, 1), "float32", {}),  # float32: no cooperative matrices
])
def test_what_the_kernel_cannot_take_stays_a_convolution(x: tuple, w: tuple, dtype: str,
                                                          attrs: dict) -> None:
    if attrs.get("block"):
        g = _conv_graph(x, w, dtype)
        g.nodes[0].attrs = attrs  # (the blocked layout pass's attribute, as it sets it)
    else:
        g = _conv_graph(x, w, dtype, **attrs)
    before = str(g)
    assert str(pointwise_as_matmul(g, coop)) == before


def test_a_plain_gpu_takes_none() -> None:
    g = _conv_graph((1, 16, 4, 4), (32, 16, 1, 1))
    before = str(g)
    assert str(pointwise_as_matmul(g, lambda a, b: takes_matmul(a, b, GpuResources()))) == before
    assert "matmul" in str(pointwise_as_matmul(g, coop))


def test_the_chain_stops_at_an_operand_with_no_3d_form() -> None:
    """A ``[1, 1, 4, 1]`` operand varies along H only: the add stays on the 4-D value."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 4, 4), H)
    y = b.add1("conv2d", [x, b.constant("w", _w(8, 16, 1, 1))], name="conv")
    y = b.add1("relu", [y], name="relu")
    y = b.add1("add", [y, b.constant("rows", _w(1, 1, 4, 1))], name="rows")
    g = pointwise_as_matmul(b.finish([y]), coop)
    assert str(g).splitlines()[3:7] == [
        '  %x_rows: float16[1, 16, 16] = reshape(%x) {"shape": [1, 16, 16]}  # x_rows/flatten',
        "  %conv_0_rows: float16[1, 8, 16] = matmul(%w_rows, %x_rows)  # conv/matmul",
        "  %relu_0_rows: float16[1, 8, 16] = relu(%conv_0_rows)  # relu",
        '  %relu_0: float16[1, 8, 4, 4] = reshape(%relu_0_rows) {"shape": [1, 8, 4, 4]}  '
        "# conv/unflatten",
    ]
    assert "add(%relu_0, %rows)" in str(g)


def test_the_chain_stops_at_a_graph_output() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 16, 4, 4), H)
    y = b.add1("conv2d", [x, b.constant("w", _w(8, 16, 1, 1))], name="conv")
    z = b.add1("relu", [y], name="relu")
    g = pointwise_as_matmul(b.finish([y, z]), coop)
    text = str(g)
    assert "%conv_0: float16[1, 8, 4, 4] = reshape(%conv_0_rows)" in text
    assert "relu(%conv_0)" in text and "return %conv_0, %relu_0" in text


# -- in build: which targets, and the kernels ---------------------------------------------
def convnet() -> Graph:
    """Two pointwise convolutions (with bias and relu) around a 3x3 one, in float32 (the
    build's precision pass makes it float16)."""
    f = "float32"
    b = GraphBuilder()
    h = b.input("x", (1, 16, 8, 8), f)
    for i, (o, k) in enumerate([(32, 1), (32, 3), (16, 1)]):
        h = b.add1("conv2d", [h, b.constant(f"w{i}", _w(o, h.shape[1], k, k, dtype=f))],
                   {"pads": [k // 2] * 4}, name=f"conv{i}")
        h = b.add1("add", [h, b.constant(f"b{i}", _w(1, o, 1, 1, dtype=f))], name=f"bias{i}")
        h = b.add1("relu", [h], name=f"relu{i}")
    return b.finish([h])


def _anchors(target: str) -> list[tuple[str, list[str]]]:
    _, groups, _ = fused_groups(convnet(), target=target, precision="fp16")
    return [(n.op, [m.op for m in g.nodes]) for g in groups for n in g.nodes
            if n.op in ("conv2d", "matmul")]


def test_only_a_cooperative_matrix_target_computes_them_as_products() -> None:
    """The 3x3 convolution stays one; the last product's epilogue takes the cast back
    to the float32 output too."""
    assert _anchors(COOP_TARGET) == [
        ("matmul", ["matmul", "add", "relu"]), ("conv2d", ["conv2d", "add", "relu"]),
        ("matmul", ["matmul", "add", "relu", "cast"])]


@pytest.mark.parametrize("target", ["vulkan", "opencl", "llvm", "vulkan -float16-arithmetic=1"])
def test_other_targets_keep_the_convolutions(target: str) -> None:
    assert [op for op, _ in _anchors(target)] == ["conv2d"] * 3


def _coop_product_groups() -> list[Any]:
    _, groups, _ = fused_groups(convnet(), target=COOP_TARGET, precision="fp16")
    return [g for g in groups if any(n.op == "matmul" for n in g.nodes)]


def test_the_products_are_tensorized_with_their_epilogue() -> None:
    schedule = default_schedule(COOP_TARGET)
    for i, g in enumerate(_coop_product_groups()):
        func = lower_group(g, f"k{i}", schedule)
        kinds = [s[0] for s in func.attrs["steps"]]
        assert kinds[0] == "tensorize", kinds
        assert func.attrs["steps"][0][1] == "t0_matmul"
        assert func.attrs["ops"][:3] == ["matmul", "add", "relu"]
        assert "fragment<accumulator, float32, 16x16>" in str(func)


def test_the_tensorized_kernel_against_numpy() -> None:
    """The first convolution's kernel (its product, bias and relu at the write-back) in
    the tensor-IR interpreter, which models the workgroup's shared memory and the
    subgroups' fragments, against the convolution computed by NumPy."""
    g = _coop_product_groups()[0]
    func = lower_group(g, "k", default_schedule(COOP_TARGET))
    assert func.attrs["steps"][0][0] == "tensorize"
    w, x_rows, bias = g.inputs
    assert (w.shape, x_rows.shape, bias.shape) == ((32, 16), (1, 16, 64), (1, 32, 1))
    x = rng.standard_normal((1, 16, 8, 8)).astype(H)
    arrays = [*func.stored_inputs([w.data, x.reshape(1, 16, 64), bias.data])]
    arrays += [np.zeros(p.shape, p.dtype) for p in func.params[len(arrays):]]
    run_func(func, arrays)
    conv = np.einsum("oc,nchw->nohw", w.data.astype("float32"), x.astype("float32"))
    want = np.maximum(conv + bias.data.astype("float32").reshape(1, 32, 1, 1), 0)
    got = arrays[3].astype("float32").reshape(1, 32, 8, 8)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-2)
    assert np.abs(want).max() > 0.5  # not a trivially small result


def test_a_shared_weight_is_reshaped_once_and_a_shared_input_per_reader() -> None:
    """Two convolutions of one weight and one input: one 2-D weight constant; the input
    reshaped for each (views, each placed before its reader)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 4, 4), H)
    w = b.constant("w", _w(16, 16, 1, 1))
    y = b.add1("conv2d", [x, w], name="a")
    z = b.add1("conv2d", [x, w], name="b")
    g = pointwise_as_matmul(b.finish([b.add1("sub", [y, z], name="d")]), coop)
    assert str(g) == SHARED_AS_PRODUCTS
    g.verify()


# sub is not commutative: its operands keep their order, the second (b's chain stops
# at the sub, which a's took first) reshaped back to 3-D, a view of a view
SHARED_AS_PRODUCTS = """\
graph main(%x: float16[1, 16, 4, 4]) {
  %w_rows: float16[16, 16] = const <elided>
  %x_rows: float16[1, 16, 16] = reshape(%x) {"shape": [1, 16, 16]}  # x_rows/flatten
  %a_0_rows: float16[1, 16, 16] = matmul(%w_rows, %x_rows)  # a/matmul
  %x_rows_1: float16[1, 16, 16] = reshape(%x) {"shape": [1, 16, 16]}  # x_rows_1/flatten
  %b_0_rows_1: float16[1, 16, 16] = matmul(%w_rows, %x_rows_1)  # b/matmul
  %b_0: float16[1, 16, 4, 4] = reshape(%b_0_rows_1) {"shape": [1, 16, 4, 4]}  # b/unflatten
  %b_0_rows: float16[1, 16, 16] = reshape(%b_0) {"shape": [1, 16, 16]}  # b_0_rows/flatten
  %d_0_rows: float16[1, 16, 16] = sub(%a_0_rows, %b_0_rows)  # d
  %d_0: float16[1, 16, 4, 4] = reshape(%d_0_rows) {"shape": [1, 16, 4, 4]}  # a/unflatten
  return %d_0
}
"""
