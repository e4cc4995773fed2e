"""Small whole models in the shapes exporters produce: a ResNet-style CNN at opset 11 and
a BERT-style encoder layer at opset 13 with dynamic axes (Shape/Gather/Concat chains that
must fold at import), each checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from frontend_onnx_testing import check, make_model, rand
from onnx import TensorProto, helper

I64 = np.int64


def cnn() -> onnx.ModelProto:
    h = helper.make_node
    nodes = [
        h("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        h("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn1"], name="bn1"),
        h("Relu", ["bn1"], ["r1"], name="relu1"),
        h("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1]),
        h("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], group=8),
        h("Add", ["c2", "p1"], ["res"], name="residual"),
        h("Clip", ["res", "zero", "six"], ["r2"], name="relu6"),
        h("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        h("Flatten", ["gap"], ["flat"], name="flatten"),
        h("Gemm", ["flat", "wf", "bf"], ["logits"], name="fc", transB=1),
        h("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    inits = {
        "w1": rand(8, 3, 3, 3, seed=1, low=-0.5, high=0.5), "b1": rand(8, seed=2),
        "g": rand(8, seed=3, low=0.5), "be": rand(8, seed=4), "mu": rand(8, seed=5),
        "var": rand(8, seed=6, low=0.5), "w2": rand(8, 1, 3, 3, seed=7, low=-0.5, high=0.5),
        "zero": np.float32(0), "six": np.float32(6), "wf": rand(5, 8, seed=8),
        "bf": rand(5, seed=9),
    }
    return make_model(nodes, {"x": ("float32", ["batch", 3, 16, 16])}, ["probs"], inits,
                      opset=11)


def test_cnn() -> None:
    graph = check(cnn(), {"x": rand(2, 3, 16, 16)}, shape={"x": (2, 3, 16, 16)})
    ops = [n.op for n in graph.nodes]
    assert ops.count("conv2d") == 2 and "pool2d" in ops
    assert "clip" in ops and "softmax" in ops


def encoder_layer() -> onnx.ModelProto:
    """Self-attention with 2 heads, residual + LayerNorm (decomposed, as at opset 13),
    Erf-GELU feed-forward; batch and sequence are symbolic."""
    d, heads = 8, 2
    hd = d // heads
    h = helper.make_node
    nodes = [
        # dynamic [batch, seq, heads, hd] target shape from Shape(x)
        h("Shape", ["x"], ["shp"]),
        h("Gather", ["shp", "i0"], ["b"], axis=0),
        h("Gather", ["shp", "i1"], ["s"], axis=0),
        h("Unsqueeze", ["b", "ax0"], ["b1"]),
        h("Unsqueeze", ["s", "ax0"], ["s1"]),
        h("Concat", ["b1", "s1", "heads_hd"], ["split_shape"], axis=0),
        h("Concat", ["b1", "s1", "dmodel"], ["merge_shape"], axis=0),
        h("MatMul", ["x", "wqkv"], ["qkv0"]),
        h("Add", ["qkv0", "bqkv"], ["qkv"]),
        h("Split", ["qkv", "split3"], ["q0", "k0", "v0"], axis=2),
        h("Reshape", ["q0", "split_shape"], ["q1"]),
        h("Reshape", ["k0", "split_shape"], ["k1"]),
        h("Reshape", ["v0", "split_shape"], ["v1"]),
        h("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        h("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        h("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        h("MatMul", ["q", "kt"], ["scores0"]),
        h("Div", ["scores0", "sqrt_hd"], ["scores1"]),
        h("Add", ["scores1", "mask"], ["scores"]),
        h("Softmax", ["scores"], ["attn"], axis=-1),
        h("MatMul", ["attn", "v"], ["ctx0"]),
        h("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        h("Reshape", ["ctx1", "merge_shape"], ["ctx"]),
        h("MatMul", ["ctx", "wo"], ["o0"]),
        h("Add", ["o0", "x"], ["res"]),
        h("ReduceMean", ["res"], ["mu"], axes=[-1]),
        h("Sub", ["res", "mu"], ["dev"]),
        h("Pow", ["dev", "two"], ["dev2"]),
        h("ReduceMean", ["dev2"], ["var"], axes=[-1]),
        h("Add", ["var", "eps"], ["var_eps"]),
        h("Sqrt", ["var_eps"], ["std"]),
        h("Div", ["dev", "std"], ["normed"]),
        h("Mul", ["normed", "ln_w"], ["ln0"]),
        h("Add", ["ln0", "ln_b"], ["ln"]),
        h("MatMul", ["ln", "w1"], ["f0"]),
        h("Div", ["f0", "sqrt2"], ["f1"]),
        h("Erf", ["f1"], ["f2"]),
        h("Add", ["f2", "one"], ["f3"]),
        h("Mul", ["f0", "f3"], ["f4"]),
        h("Mul", ["f4", "half"], ["gelu"]),
        h("MatMul", ["gelu", "w2"], ["f5"]),
        h("Add", ["f5", "ln"], ["y"]),
    ]
    f = np.float32
    inits = {
        "i0": np.array(0, I64), "i1": np.array(1, I64), "ax0": np.array([0], I64),
        "heads_hd": np.array([heads, hd], I64), "dmodel": np.array([d], I64),
        "wqkv": rand(d, 3 * d, seed=1, low=-0.5, high=0.5), "bqkv": rand(3 * d, seed=2),
        "split3": np.array([d, d, d], I64), "sqrt_hd": f(np.sqrt(hd)),
        "mask": np.array([0, 0, 0, -1e4], f).reshape(1, 1, 1, 4),
        "wo": rand(d, d, seed=3, low=-0.5, high=0.5), "two": f(2), "eps": f(1e-5),
        "ln_w": rand(d, seed=4), "ln_b": rand(d, seed=5),
        "w1": rand(d, 2 * d, seed=6, low=-0.5, high=0.5), "sqrt2": f(np.sqrt(2)),
        "one": f(1), "half": f(0.5), "w2": rand(2 * d, d, seed=7, low=-0.5, high=0.5),
    }
    return make_model(nodes, {"x": ("float32", ["batch", "seq", d])}, ["y"], inits,
                      opset=13)


def test_encoder_layer() -> None:
    graph = check(encoder_layer(), {"x": rand(3, 4, 8)}, shape={"x": (3, 4, 8)})
    ops = [n.op for n in graph.nodes]
    # the shape computation folded away; no pow (x**2 is a mul)
    assert not {"concat", "gather", "pow"} & set(ops)
    assert ops.count("reshape") == 4 and ops.count("softmax") == 1


def test_int_index_pipeline() -> None:
    """Token ids -> embedding Gather -> positional Add (Range/Unsqueeze) -> ArgMax."""
    h = helper.make_node
    nodes = [
        h("Gather", ["emb", "ids"], ["e"]),
        h("Shape", ["ids"], ["shp"]),
        h("Gather", ["shp", "one"], ["seq"], axis=0),
        h("Range", ["zero", "seq", "one"], ["pos"]),
        h("Gather", ["pos_emb", "pos"], ["pe"]),
        h("Add", ["e", "pe"], ["x"]),
        h("ArgMax", ["x"], ["y"], axis=-1, keepdims=0),
        h("Cast", ["y"], ["yf"], to=TensorProto.FLOAT),
    ]
    m = make_model(nodes, {"ids": ("int64", ["b", "s"])}, {"y": "int64", "yf": "float32"},
                   {"emb": rand(20, 6), "pos_emb": rand(10, 6, seed=1),
                    "one": np.array(1, I64), "zero": np.array(0, I64)})
    ids = np.array([[1, 5, 19], [0, 0, 7]], I64)
    check(m, {"ids": ids}, shape={"ids": (2, 3)})
