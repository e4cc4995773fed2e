"""The precision pass (passes/precision.py): the graph as text before and after, what
stays float32 and why, and the rewritten graph's values against the float32 graph's
through the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, build, parse_graph, run_graph
from tensorsmith.ir.errors import OptionError
from tensorsmith.ir.passes.precision import precision_dtype, reduce_precision

rng = np.random.default_rng(7)


def _f32(*shape: int, scale: float = 1.0, seed: int | None = None) -> np.ndarray:
    gen = rng if seed is None else np.random.default_rng(seed)
    return (gen.standard_normal(shape) * scale).astype("float32")


def conv_classifier():  # noqa: ANN201
    """conv + bias + relu (reduced), global mean (float32), matmul (reduced), softmax."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6), "float32")
    h = b.add1("conv2d", [x, b.constant("w", _f32(20, 4, 3, 3, scale=0.3))],
               {"pads": [1, 1, 1, 1]}, name="conv")
    h = b.add1("add", [h, b.constant("bias", _f32(1, 20, 1, 1, seed=1))], name="bias")
    h = b.add1("relu", [h], name="relu")
    h = b.add1("reduce_mean", [h], {"axes": [2, 3], "keepdims": 0}, name="pool")
    h = b.add1("matmul", [h, b.constant("fc", _f32(20, 5, scale=0.3))], name="fc")
    return b.finish([b.add1("softmax", [h], {"axis": -1}, name="prob")])


CONV_CLASSIFIER = """\
graph main(%x: float32[1, 4, 6, 6]) {
  %w: float32[20, 4, 3, 3] = const <elided>
  %bias: float32[1, 20, 1, 1] = const <elided>
  %fc: float32[20, 5] = const <elided>
  %conv_0: float32[1, 20, 6, 6] = conv2d(%x, %w) {"pads": [1, 1, 1, 1]}  # conv
  %bias_0: float32[1, 20, 6, 6] = add(%conv_0, %bias)  # bias
  %relu_0: float32[1, 20, 6, 6] = relu(%bias_0)  # relu
  %pool_0: float32[1, 20] = reduce_mean(%relu_0) {"axes": [2, 3], "keepdims": 0}  # pool
  %fc_0: float32[1, 5] = matmul(%pool_0, %fc)  # fc
  %prob_0: float32[1, 5] = softmax(%fc_0) {"axis": -1}  # prob
  return %prob_0
}
"""

CONV_CLASSIFIER_FP16 = """\
graph main(%x: float32[1, 4, 6, 6]) {
  %w_fp16: float16[20, 4, 3, 3] = const <elided>
  %bias_fp16: float16[1, 20, 1, 1] = const <elided>
  %fc_fp16: float16[20, 5] = const <elided>
  %x_fp16: float16[1, 4, 6, 6] = cast(%x) {"dtype": "float16"}  # cast_x_fp16
  %conv_0: float16[1, 20, 6, 6] = conv2d(%x_fp16, %w_fp16) {"pads": [1, 1, 1, 1]}  # conv
  %bias_0: float16[1, 20, 6, 6] = add(%conv_0, %bias_fp16)  # bias
  %relu_0: float16[1, 20, 6, 6] = relu(%bias_0)  # relu
  %relu_0_fp32: float32[1, 20, 6, 6] = cast(%relu_0) {"dtype": "float32"}  # cast_relu_0_fp32
  %pool_0: float32[1, 20] = reduce_mean(%relu_0_fp32) {"axes": [2, 3], "keepdims": 0}  # pool
  %pool_0_fp16: float16[1, 20] = cast(%pool_0) {"dtype": "float16"}  # cast_pool_0_fp16
  %fc_0: float16[1, 5] = matmul(%pool_0_fp16, %fc_fp16)  # fc
  %fc_0_fp32: float32[1, 5] = cast(%fc_0) {"dtype": "float32"}  # cast_fc_0_fp32
  %prob_0: float32[1, 5] = softmax(%fc_0_fp32) {"axis": -1}  # prob
  return %prob_0
}
"""


def test_conv_classifier_text_before_and_after() -> None:
    g = conv_classifier()
    assert str(g) == CONV_CLASSIFIER
    assert str(reduce_precision(g, "float16")) == CONV_CLASSIFIER_FP16


def layer_norm_block():  # noqa: ANN201
    """matmul + bias, then a LayerNorm written out (as ONNX exporters of opset < 17
    do), a residual add and a scale by a constant."""
    b = GraphBuilder()
    x = b.input("x", (4, 20), "float32")
    h = b.add1("matmul", [x, b.constant("w", _f32(20, 20, scale=0.3))], name="mm")
    h = b.add1("add", [h, b.constant("b", _f32(20, seed=2))], name="mm_bias")
    mean = b.add1("reduce_mean", [h], {"axes": [-1], "keepdims": 1}, name="mean")
    d = b.add1("sub", [h, mean], name="centre")
    var = b.add1("reduce_mean", [b.add1("mul", [d, d], name="square")],
                 {"axes": [-1], "keepdims": 1}, name="var")
    std = b.add1("sqrt", [b.add1("add", [var, b.constant("eps", np.float32(1e-5))],
                                 name="var_eps")], name="std")
    n = b.add1("div", [d, std], name="norm")
    n = b.add1("mul", [n, b.constant("gamma", _f32(20, seed=3))], name="scale")
    r = b.add1("add", [n, h], name="residual")
    y = b.add1("div", [h, b.constant("four", np.float32(4.0))], name="quarter")
    z = b.add1("div", [h, b.constant("tiny", np.float32(1e-3))], name="huge")
    return b.finish([r, y, z])


LAYER_NORM = """\
graph main(%x: float32[4, 20]) {
  %w: float32[20, 20] = const <elided>
  %b: float32[20] = const <elided>
  %eps: float32[] = const 9.999999747378752e-06
  %gamma: float32[20] = const <elided>
  %four: float32[] = const 4.0
  %tiny: float32[] = const 0.0010000000474974513
  %mm_0: float32[4, 20] = matmul(%x, %w)  # mm
  %mm_bias_0: float32[4, 20] = add(%mm_0, %b)  # mm_bias
  %mean_0: float32[4, 1] = reduce_mean(%mm_bias_0) {"axes": [-1], "keepdims": 1}  # mean
  %centre_0: float32[4, 20] = sub(%mm_bias_0, %mean_0)  # centre
  %square_0: float32[4, 20] = mul(%centre_0, %centre_0)  # square
  %var_0: float32[4, 1] = reduce_mean(%square_0) {"axes": [-1], "keepdims": 1}  # var
  %var_eps_0: float32[4, 1] = add(%var_0, %eps)  # var_eps
  %std_0: float32[4, 1] = sqrt(%var_eps_0)  # std
  %norm_0: float32[4, 20] = div(%centre_0, %std_0)  # norm
  %scale_0: float32[4, 20] = mul(%norm_0, %gamma)  # scale
  %residual_0: float32[4, 20] = add(%scale_0, %mm_bias_0)  # residual
  %quarter_0: float32[4, 20] = div(%mm_bias_0, %four)  # quarter
  %huge_0: float32[4, 20] = div(%mm_bias_0, %tiny)  # huge
  return %residual_0, %quarter_0, %huge_0
}
"""

LAYER_NORM_BF16 = """\
graph main(%x: float32[4, 20]) {
  %w_bf16: bfloat16[20, 20] = const <elided>
  %b_bf16: bfloat16[20] = const <elided>
  %eps: float32[] = const 9.999999747378752e-06
  %gamma: float32[20] = const <elided>
  %four_bf16: bfloat16[] = const 4.0
  %tiny: float32[] = const 0.0010000000474974513
  %x_bf16: bfloat16[4, 20] = cast(%x) {"dtype": "bfloat16"}  # cast_x_bf16
  %mm_0: bfloat16[4, 20] = matmul(%x_bf16, %w_bf16)  # mm
  %mm_bias_0: bfloat16[4, 20] = add(%mm_0, %b_bf16)  # mm_bias
  %mm_bias_0_fp32: float32[4, 20] = cast(%mm_bias_0) {"dtype": "float32"}  # cast_mm_bias_0_fp32
  %mean_0: float32[4, 1] = reduce_mean(%mm_bias_0_fp32) {"axes": [-1], "keepdims": 1}  # mean
  %centre_0: float32[4, 20] = sub(%mm_bias_0_fp32, %mean_0)  # centre
  %square_0: float32[4, 20] = mul(%centre_0, %centre_0)  # square
  %var_0: float32[4, 1] = reduce_mean(%square_0) {"axes": [-1], "keepdims": 1}  # var
  %var_eps_0: float32[4, 1] = add(%var_0, %eps)  # var_eps
  %std_0: float32[4, 1] = sqrt(%var_eps_0)  # std
  %norm_0: float32[4, 20] = div(%centre_0, %std_0)  # norm
  %scale_0: float32[4, 20] = mul(%norm_0, %gamma)  # scale
  %residual_0: float32[4, 20] = add(%scale_0, %mm_bias_0_fp32)  # residual
  %quarter_0_bf16: bfloat16[4, 20] = div(%mm_bias_0, %four_bf16)  # quarter
  %huge_0: float32[4, 20] = div(%mm_bias_0_fp32, %tiny)  # huge
  %quarter_0: float32[4, 20] = cast(%quarter_0_bf16) {"dtype": "float32"}  # cast_quarter_0
  return %residual_0, %quarter_0, %huge_0
}
"""


def test_layer_norm_stays_float32() -> None:
    """The statistics, the centring (a bfloat16 value minus a float32 mean) and what
    follows stay float32; a division by 4 is a scaling, one by 1e-3 is not; the outputs
    keep their names and float32."""
    g = layer_norm_block()
    assert str(g) == LAYER_NORM
    g = reduce_precision(g, "bfloat16")
    assert str(g) == LAYER_NORM_BF16
    assert [(v.name, v.dtype) for v in g.outputs] == [
        ("residual_0", "float32"), ("quarter_0", "float32"), ("huge_0", "float32")]


def test_weights_converted_once_and_rounded() -> None:
    """A weight read by two reduced ops is converted once; its data is the float32
    data rounded to the 16-bit type (so the artifact stores half the bytes)."""
    b = GraphBuilder()
    x = b.input("x", (2, 8), "float32")
    w = b.constant("w", _f32(8, 8))
    h = b.add1("matmul", [b.add1("matmul", [x, w], name="a"), w], name="b")
    g = reduce_precision(b.finish([h]), "float16")
    (c,) = g.constants()
    assert (c.name, c.dtype, c.data.nbytes) == ("w_fp16", "float16", 8 * 8 * 2)
    np.testing.assert_array_equal(c.data, w.data.astype("float16"))


def test_embedding_table_gathered_in_reduced_type() -> None:
    b = GraphBuilder()
    ids = b.input("ids", (3,), "int64")
    e = b.add1("gather", [b.constant("table", _f32(10, 4)), ids], {"axis": 0}, name="embed")
    g = reduce_precision(b.finish([b.add1("softmax", [e], {"axis": -1}, name="sm")]),
                         "float16")
    assert [(n.op, n.outputs[0].dtype) for n in g.nodes] == [
        ("gather", "float16"), ("cast", "float32"), ("softmax", "float32")]
    assert g.constants()[0].dtype == "float16"


def test_non_float_and_float64_untouched() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float64")
    i = b.input("i", (4,), "int32")
    y = b.add1("add", [x, b.constant("one", np.float64(1.0))])
    k = b.add1("mul", [i, i])
    g = b.finish([y, k])
    before = str(g)
    assert str(reduce_precision(g, "bfloat16")) == before


def test_a_models_own_float16_tensors_stay_float16() -> None:
    """A softmax the model itself computes in float16 stays float16: only the values the
    pass narrowed are widened again for float32 ops."""
    b = GraphBuilder()
    x = b.input("x", (2, 20), "float32")
    h = b.add1("matmul", [x, b.constant("w", _f32(20, 20))], name="mm")
    h16 = b.add1("cast", [h], {"dtype": "float16"}, name="to_half")
    y = b.add1("softmax", [h16], {"axis": -1}, name="sm16")
    g = reduce_precision(b.finish([y]), "float16")
    assert [(n.name, [v.dtype for v in n.inputs], n.outputs[0].dtype) for n in g.nodes] == [
        ("cast_x_fp16", ["float32"], "float16"),
        ("mm", ["float16", "float16"], "float16"),
        ("to_half", ["float16"], "float16"),
        ("sm16", ["float16"], "float16")]
    assert g.outputs[0].dtype == "float16"


@pytest.mark.parametrize("dtype,rtol", [("float16", 2e-3), ("bfloat16", 1e-2)])
def test_interpreter_results_close(dtype: str, rtol: float) -> None:
    """The rewritten graph, run by the NumPy interpreter (the ops' references in the
    16-bit types), stays within the type's tolerance of the float32 graph."""
    for make, feeds in ((conv_classifier, {"x": _f32(1, 4, 6, 6)}),
                        (layer_norm_block, {"x": _f32(4, 20)})):
        g32 = make()
        want = run_graph(g32, feeds)
        got = run_graph(reduce_precision(g32.copy(), dtype), feeds)
        for g, w in zip(got, want):
            assert g.dtype == np.float32
            assert np.abs(g - w).max() / np.abs(w).max() < rtol


def test_bfloat16_text_round_trip() -> None:
    g = reduce_precision(layer_norm_block(), "bfloat16")
    consts = {c.name: c.data for c in g.constants()}
    again = parse_graph(str(g), consts)
    assert str(again) == str(g)
    x = _f32(4, 20)
    for a, b in zip(run_graph(g, {"x": x}), run_graph(again, {"x": x})):
        np.testing.assert_array_equal(a, b)


def test_unknown_precision_named() -> None:
    with pytest.raises(OptionError, match=r"precision 'int4' .* fp32, fp16, bf16"):
        precision_dtype("int4")
    with pytest.raises(OptionError, match="precision 'half'"):
        build(conv_classifier(), "llvm", precision="half")
