"""Layers of the benchmark models, written as the ONNX nodes PyTorch's exporter emits.

Every function takes a :class:`~bench.onnx_graph.GraphBuilder` and the name of its input
value, adds nodes (and seeded random weights) and returns the name of its output value.
Weights are scaled so activations neither vanish nor explode through deep networks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .onnx_graph import GraphBuilder

__all__ = [
    "attention",
    "conv_bn",
    "encoder_layer",
    "gelu",
    "layer_norm",
    "linear",
    "relu6",
]

BN_EPS = 1e-5


# ---- convolutional ------------------------------------------------------------------


def conv_bn(
    g: GraphBuilder,
    x: str,
    cin: int,
    cout: int,
    kernel: int,
    stride: int = 1,
    groups: int = 1,
    *,
    bn: bool,
    gamma_scale: float = 1.0,
) -> str:
    """Conv (He-initialized, no bias) followed by BatchNormalization in inference mode.

    With ``bn=False`` the BatchNormalization is folded into the convolution (weights
    scaled, bias added), as exporters do with constant folding on; both forms compute
    the same function for the same seed.
    """
    fan_in = cin // groups * kernel * kernel
    w = g.normal((cout, cin // groups, kernel, kernel), math.sqrt(2.0 / fan_in))
    gamma = g.uniform((cout,), 0.5, 1.5) * gamma_scale
    beta = g.normal((cout,), 0.1)
    mean = g.normal((cout,), 0.1)
    var = g.uniform((cout,), 0.5, 1.5)
    pad = kernel // 2
    attrs = {
        "dilations": [1, 1],
        "group": groups,
        "kernel_shape": [kernel, kernel],
        "pads": [pad, pad, pad, pad],
        "strides": [stride, stride],
    }
    if bn:
        y = g.op("Conv", [x, g.const(w, g.fresh("conv_W"))], **attrs)
        params = [
            g.const(p, g.fresh(f"bn_{k}"))
            for k, p in (("scale", gamma), ("B", beta), ("mean", mean), ("var", var))
        ]
        return g.op("BatchNormalization", [y, *params], epsilon=BN_EPS, momentum=0.9)
    scale = gamma / np.sqrt(var + BN_EPS)
    w_folded = (w * scale[:, None, None, None]).astype(np.float32)
    b_folded = (beta - mean * scale).astype(np.float32)
    return g.op(
        "Conv",
        [x, g.const(w_folded, g.fresh("conv_W")), g.const(b_folded, g.fresh("conv_B"))],
        **attrs,
    )


def relu6(g: GraphBuilder, x: str) -> str:
    """ReLU6 as Clip(x, 0, 6): bounds as inputs from opset 11, attributes before."""
    if g.opset >= 11:
        return g.op("Clip", [x, g.scalar(0.0), g.scalar(6.0)])
    return g.op("Clip", [x], min=0.0, max=6.0)


# ---- transformer --------------------------------------------------------------------


def linear(g: GraphBuilder, x: str, din: int, dout: int) -> str:
    """``x @ W + b`` as MatMul + Add (what torch exports for inputs of rank 3)."""
    w = g.weight((din, dout), 1.0 / math.sqrt(din))
    b = g.const(g.normal((dout,), 0.02), g.fresh("b"))
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def layer_norm(g: GraphBuilder, x: str, hidden: int, eps: float) -> str:
    """LayerNormalization over the last axis: the op from opset 17, before that the
    ReduceMean/Sub/Pow/Sqrt/Div decomposition torch exports."""
    gamma = g.const(g.uniform((hidden,), 0.8, 1.2), g.fresh("ln_gamma"))
    beta = g.const(g.normal((hidden,), 0.05), g.fresh("ln_beta"))
    if g.opset >= 17:
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
    mean = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
    centered = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Pow", [centered, g.scalar(2.0)])], axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.scalar(eps)])])
    normed = g.op("Div", [centered, std])
    return g.op("Add", [g.op("Mul", [normed, gamma]), beta])


def gelu(g: GraphBuilder, x: str) -> str:
    """Exact GELU, ``0.5 * x * (1 + erf(x / sqrt(2)))``, as Div/Erf/Add/Mul/Mul."""
    erf = g.op("Erf", [g.op("Div", [x, g.scalar(math.sqrt(2.0))])])
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, g.scalar(1.0)])]), g.scalar(0.5)])


def attention(
    g: GraphBuilder,
    x: str,
    batch: int | str,
    seq: int | str,
    hidden: int,
    heads: int,
    mask: str | None = None,
) -> str:
    """Multi-head self-attention on ``x`` [batch, seq, hidden].

    Q, K, V projections, Reshape to heads and Transpose, ``softmax(Q Kᵀ / sqrt(d) + mask)
    V``, heads merged back and the output projection. ``mask`` is an additive
    [batch, 1, 1, seq] float tensor (0 to keep, a large negative number to drop).
    """
    d = hidden // heads
    split = _leading_dims(g, x, [batch, seq], [heads, d])

    def heads_of(t: str, perm: list[int]) -> str:
        return g.op("Transpose", [g.op("Reshape", [t, split])], perm=perm)

    q = heads_of(linear(g, x, hidden, hidden), [0, 2, 1, 3])  # [b, h, s, d]
    k = heads_of(linear(g, x, hidden, hidden), [0, 2, 3, 1])  # [b, h, d, s]
    v = heads_of(linear(g, x, hidden, hidden), [0, 2, 1, 3])  # [b, h, s, d]
    scores = g.op("Div", [g.op("MatMul", [q, k]), g.scalar(math.sqrt(d))])
    if mask is not None:
        scores = g.op("Add", [scores, mask])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = g.op("Reshape", [ctx, _leading_dims(g, x, [batch, seq], [hidden])])
    return linear(g, merged, hidden, hidden)


def _leading_dims(g: GraphBuilder, x: str, leading: Sequence[int | str],
                  tail: Sequence[int]) -> str:
    """The int64 shape ``leading + tail``. With static ``leading`` it is a constant; where
    they are symbolic (dim_params), it is computed from ``x``'s shape the way PyTorch's
    exporter writes it: Shape, Gather of each axis, Unsqueeze, Concat with the constant
    tail."""
    if all(isinstance(d, int) for d in leading):
        return g.int64s([*leading, *tail])  # type: ignore[list-item]
    shape = g.op("Shape", [x])
    parts = [g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.array(i, np.int64))],
                                     axis=0), g.int64s([0])]) for i in range(len(leading))]
    return g.op("Concat", [*parts, g.int64s(list(tail))], axis=0)


def encoder_layer(
    g: GraphBuilder,
    x: str,
    *,
    batch: int | str,
    seq: int | str,
    hidden: int,
    heads: int,
    ffn: int,
    eps: float,
    pre_norm: bool,
    mask: str | None = None,
) -> str:
    """One transformer encoder layer: attention and a GELU MLP, each with a residual.

    ``pre_norm=False`` is BERT (LayerNorm after each residual add), ``pre_norm=True`` is
    ViT (LayerNorm on each branch's input).
    """

    def mlp(t: str) -> str:
        return linear(g, gelu(g, linear(g, t, hidden, ffn)), ffn, hidden)

    def attn(t: str) -> str:
        return attention(g, t, batch, seq, hidden, heads, mask)

    if pre_norm:
        x = g.op("Add", [x, attn(layer_norm(g, x, hidden, eps))])
        return g.op("Add", [x, mlp(layer_norm(g, x, hidden, eps))])
    x = layer_norm(g, g.op("Add", [x, attn(x)]), hidden, eps)
    return layer_norm(g, g.op("Add", [x, mlp(x)]), hidden, eps)
