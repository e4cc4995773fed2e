"""passes/integer_products.py: a QDQ convolution or product, as the ONNX importer writes
it, becomes an integer op on the activation's bytes and the int8 weight, with the zero
point's correction and the scales after it. IR text before and after, and the
interpreter's results of both."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, parse_graph, run_graph
from tensorsmith.ir.graph import Graph, Value
from tensorsmith.ir.ops.integer import (
    pack_matmul_weight,
    unpack_conv_weight,
    unpack_matmul_weight,
)
from tensorsmith.ir.passes import eliminate_dead_code
from tensorsmith.ir.passes.integer_products import (
    MAX_DEPTH,
    IntegerProducts,
    integer_products,
)

rng = np.random.default_rng(3)


def _qdq(b: GraphBuilder, x: Value, scale: float, low: float) -> Value:
    """``clip(round(x / s), low, low + 255) * s``: what DequantizeLinear(QuantizeLinear(x))
    imports as (frontend-onnx, converters/quantize.py)."""
    s = b.constant("s_x", np.float32(scale))
    r = b.add1("round", [b.add1("div", [x, s], name="q/div")], name="q/round")
    c = b.add1("clip", [r], {"min": low, "max": low + 255.0}, name="dq/clip")
    return b.add1("mul", [c, s], name="dq")


def _weight(b: GraphBuilder, q: np.ndarray, scales: np.ndarray, shape: tuple[int, ...]
            ) -> Value:
    """``float(q) * reshape(scales)``: DequantizeLinear of an int8 weight, per channel."""
    s = b.add1("reshape", [b.constant("s_w", scales.astype(np.float32))],
               {"shape": list(shape)}, name="w/reshape")
    return b.add1("mul", [b.constant("w_q", q.astype(np.float32)), s], name="w")


def conv_graph(channels: int = 8, groups: int = 1) -> tuple[Graph, np.ndarray]:
    b = GraphBuilder()
    x = b.input("x", (1, channels, 5, 5), "float32")
    q = rng.integers(-127, 128, (4, channels // groups, 3, 3))
    w = _weight(b, q, np.array([0.01, 0.02, 0.03, 0.04]), (4, 1, 1, 1))
    y = b.add1("conv2d", [_qdq(b, x, 0.05, -128.0), w],
               {"pads": [1, 1, 1, 1], "groups": groups}, name="conv")
    return b.finish([y]), q


def matmul_graph(k: int = 8) -> tuple[Graph, np.ndarray]:
    b = GraphBuilder()
    x = b.input("x", (3, k), "float32")
    q = rng.integers(-127, 128, (k, 2))
    w = _weight(b, q, np.array([0.5, 0.25]), (1, 2))
    y = b.add1("matmul", [_qdq(b, x, 0.1, -10.0), w], name="mm")
    return b.finish([y]), q


CONV_AFTER = (
    "graph main(%x: float32[1, 8, 5, 5]) {{\n"
    "  %s_x: float32[] = const 0.05000000074505806\n"
    "  %conv_0_low: float32[] = const -128.0\n"
    "  %conv_0_weight_int8: int8[4, 2, 3, 3, 4] = const <elided>\n"
    "  %conv_0_zero_sum: int32[4, 1, 1] = const {sums}\n"
    "  %conv_0_scale: float32[4, 1, 1] = const {scales}\n"
    "  %q/div_0: float32[1, 8, 5, 5] = div(%x, %s_x)  # q/div\n"
    "  %q/round_0: float32[1, 8, 5, 5] = round(%q/div_0)  # q/round\n"
    '  %dq/clip_0: float32[1, 8, 5, 5] = clip(%q/round_0) {{"max": 127.0, "min": -128.0}}'
    "  # dq/clip\n"
    "  %conv_0_shifted: float32[1, 8, 5, 5] = sub(%dq/clip_0, %conv_0_low)  # conv/shifted\n"
    '  %conv_0_bytes: uint8[1, 8, 5, 5] = cast(%conv_0_shifted) {{"dtype": "uint8"}}'
    "  # conv/bytes\n"
    "  %conv_0_int32: int32[1, 4, 5, 5] = qconv2d(%conv_0_bytes, %conv_0_weight_int8) "
    '{{"pads": [1, 1, 1, 1], "zero_point": 128}}  # conv/int32\n'
    "  %conv_0_acc: int32[1, 4, 5, 5] = add(%conv_0_int32, %conv_0_zero_sum)  # conv/acc\n"
    '  %conv_0_real: float32[1, 4, 5, 5] = cast(%conv_0_acc) {{"dtype": "float32"}}'
    "  # conv/real\n"
    "  %conv_0_dequantized: float32[1, 4, 5, 5] = mul(%conv_0_real, %conv_0_scale)"
    "  # conv/dequantized\n"
    "  return %conv_0_dequantized\n}}\n")


def _list(a: np.ndarray) -> str:
    return str(a.tolist())


def test_a_qdq_conv_becomes_an_integer_conv() -> None:
    g, q = conv_graph()
    before = str(g)
    assert ('conv2d(%dq_0, %w_0) {"groups": 1, "pads": [1, 1, 1, 1]}' in before
            and "%w_0: float32[4, 8, 3, 3] = mul(%w_q, %w/reshape_0)" in before)
    feeds = {"x": rng.standard_normal((1, 8, 5, 5)).astype(np.float32)}
    want = run_graph(g, feeds)[0]
    after = eliminate_dead_code(integer_products(g))
    sums = -128 * q.sum(axis=(1, 2, 3))
    scales = np.float32(0.05) * np.array([0.01, 0.02, 0.03, 0.04], np.float32)
    assert str(after) == CONV_AFTER.format(
        sums=_list(sums.reshape(4, 1, 1)), scales=_list(scales.reshape(4, 1, 1)))
    weight = next(c for c in after.constants() if c.name == "conv_0_weight_int8")
    assert np.array_equal(unpack_conv_weight(weight.data), q)
    got = run_graph(after, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_qdq_matmul_becomes_an_integer_matmul() -> None:
    g, q = matmul_graph()
    feeds = {"x": rng.standard_normal((3, 8)).astype(np.float32) * 3}
    want = run_graph(g, feeds)[0]
    after = integer_products(g)
    text = str(after)
    assert ("%mm_0_int32: int32[3, 2] = qmatmul(%mm_0_bytes, %mm_0_weight_int8)  # mm/int32"
            in text), text
    assert "%mm_0_zero_sum: int32[2] = const " + _list(-10 * q.sum(axis=0)) in text
    assert "%mm_0_shifted: float32[3, 8] = sub(%dq/clip_0, %mm_0_low)" in text
    assert "%mm_0_low: float32[] = const -10.0" in text
    weight = next(c for c in after.constants() if c.name == "mm_0_weight_int8")
    assert weight.data.dtype == np.int8 and np.array_equal(unpack_matmul_weight(weight.data), q)
    np.testing.assert_allclose(run_graph(after, feeds)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graph", [
    lambda: conv_graph(channels=6),  # the reduction is no whole number of dots of 4
    lambda: conv_graph(groups=2),  # grouped: left in float
    lambda: matmul_graph(k=10),
    lambda: matmul_graph(k=MAX_DEPTH + 3),  # an int32 sum of that many could overflow
], ids=["channels-6", "grouped", "k-10", "k-too-long"])
def test_what_has_no_integer_form_is_left_alone(graph) -> None:  # noqa: ANN001
    g, _ = graph()
    before = str(g)
    assert str(integer_products(g)) == before


def test_a_weight_with_fractional_values_is_left_alone() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 8), "float32")
    w = _weight(b, rng.standard_normal((8, 2)), np.array([0.5, 0.25]), (1, 2))
    y = b.add1("matmul", [_qdq(b, x, 0.1, 0.0), w], name="mm")
    g = b.finish([y])
    before = str(g)
    assert str(integer_products(g)) == before


def test_an_int32_product_of_centered_int8_bytes_becomes_an_integer_matmul() -> None:
    """MatMulInteger's import, ``matmul(int32(x) - zp, W)``: int8 bytes move up by 128
    into uint8 (their zero point with them), and the int32 result is the same."""
    b = GraphBuilder()
    x = b.input("x", (2, 8), "int8")
    q = rng.integers(-128, 128, (8, 3)).astype(np.int32)
    centered = b.add1("sub", [b.add1("cast", [x], {"dtype": "int32"}, name="x32"),
                              b.constant("zp", np.int32(-5))], name="centered")
    g = b.finish([b.add1("matmul", [centered, b.constant("w", q)], name="mm")])
    feeds = {"x": rng.integers(-128, 128, (2, 8)).astype(np.int8)}
    want = run_graph(g, feeds)[0]
    optimized = eliminate_dead_code(integer_products(g))
    weight = next(c for c in optimized.constants() if c.name == "mm_0_weight_int8")
    assert np.array_equal(unpack_matmul_weight(weight.data), q)
    text = str(optimized)
    assert text == (
        "graph main(%x: int8[2, 8]) {\n"
        "  %mm_0_offset: int32[] = const 128\n"
        "  %mm_0_weight_int8: int8[2, 3, 4] = const <elided>\n"
        f"  %mm_0_zero_sum: int32[3] = const {_list(-123 * q.sum(axis=0))}\n"
        '  %x32_0: int32[2, 8] = cast(%x) {"dtype": "int32"}  # x32\n'
        "  %mm_0_moved: int32[2, 8] = add(%x32_0, %mm_0_offset)  # mm/moved\n"
        '  %mm_0_bytes: uint8[2, 8] = cast(%mm_0_moved) {"dtype": "uint8"}  # mm/bytes\n'
        "  %mm_0_int32: int32[2, 3] = qmatmul(%mm_0_bytes, %mm_0_weight_int8)  # mm/int32\n"
        "  %mm_0_acc: int32[2, 3] = add(%mm_0_int32, %mm_0_zero_sum)  # mm/acc\n"
        "  return %mm_0_acc\n}\n")
    after = parse_graph(text, {"mm_0_weight_int8": pack_matmul_weight(q.astype(np.int8)),
                               "mm_0_zero_sum": (-123 * q.sum(axis=0)).astype(np.int32),
                               "mm_0_offset": np.int32(128)})
    assert np.array_equal(run_graph(after, feeds)[0], want)


def test_a_cpu_converts_only_the_convolutions_it_runs_channel_blocked() -> None:
    """``conv_block``: the conv (8 input, 4 output channels) would read NCHW bytes on a
    CPU blocking channels by 8 or 16 (no dot instruction applies there): it stays float;
    by 4 (a 128-bit vector's float lanes) it is converted. 0: no convolution is."""
    for block, converted in ((16, False), (8, False), (4, True), (0, False)):
        g, _ = conv_graph()
        ops = [n.op for n in integer_products(g, IntegerProducts(conv_block=block)).nodes]
        assert ("qconv2d" in ops, "conv2d" in ops) == (converted, not converted), block
    g, _ = matmul_graph()  # products run their integer tiles on any CPU
    assert "qmatmul" in [n.op for n in integer_products(g, IntegerProducts(conv_block=0)).nodes]


def test_without_dequantized_only_the_int32_products_are_converted() -> None:
    """``dequantized=False`` (a CPU without integer dot products): a QDQ product stays
    float; an int32 one (MatMulInteger's) still takes the integer op."""
    g, _ = matmul_graph()
    before = str(g)
    assert str(integer_products(g, IntegerProducts(dequantized=False))) == before
    b = GraphBuilder()
    x = b.input("x", (2, 8), "uint8")
    x32 = b.add1("cast", [x], {"dtype": "int32"}, name="x32")
    w = b.constant("w", rng.integers(-128, 128, (8, 3)).astype(np.int32))
    g = b.finish([b.add1("matmul", [x32, w], name="mm")])
    ops = [n.op for n in integer_products(g, IntegerProducts(dequantized=False)).nodes]
    assert "qmatmul" in ops and "matmul" not in ops
