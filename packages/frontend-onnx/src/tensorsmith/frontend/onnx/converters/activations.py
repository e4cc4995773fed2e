"""Activation functions, written as compositions of canonical elementwise ops.

Each is a handful of elementwise ops that operator fusion puts back into one kernel, so
none needs an op of its own. Formulas follow the ONNX operator definitions.
"""

from __future__ import annotations

import math

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..registry import converter


def _mul(ctx: NodeContext, x: Value, k: float) -> Value:
    return x if k == 1.0 else ctx.add("mul", [x, ctx.scalar(k, x)])


def softplus(ctx: NodeContext, x: Value) -> Value:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    one = ctx.scalar(1.0, x)
    tail = ctx.add("log", [ctx.add("add", [one, ctx.add("exp", [ctx.add("neg", [
        ctx.add("abs", [x])])])])])
    return ctx.add("add", [ctx.add("relu", [x]), tail])


def hard_sigmoid(ctx: NodeContext, x: Value, alpha: float, beta: float) -> Value:
    y = ctx.add("add", [_mul(ctx, x, alpha), ctx.scalar(beta, x)])
    return ctx.add("clip", [y], {"min": 0.0, "max": 1.0})


@converter("LeakyRelu", since=6)
def convert_leaky_relu(ctx: NodeContext) -> Value:
    return ctx.add("leaky_relu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 0.01))})


@converter("PRelu", since=7)
def convert_prelu(ctx: NodeContext) -> Value:
    x, slope = ctx.input(0), ctx.input(1)
    negative = ctx.add("lt", [x, ctx.scalar(0, x)])
    return ctx.add("where", [negative, ctx.add("mul", [x, slope]), x])


@converter("Elu", since=6)
def convert_elu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    em1 = ctx.add("sub", [ctx.add("exp", [x]), ctx.scalar(1.0, x)])
    return ctx.add("where", [ctx.add("lt", [x, ctx.scalar(0, x)]), _mul(ctx, em1, alpha), x])


@converter("Selu", since=6)
def convert_selu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    em1 = ctx.add("sub", [ctx.add("exp", [x]), ctx.scalar(1.0, x)])
    y = ctx.add("where", [ctx.add("gt", [x, ctx.scalar(0, x)]), x, _mul(ctx, em1, alpha)])
    return _mul(ctx, y, gamma)


@converter("Celu", since=12)
def convert_celu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    em1 = ctx.add("sub", [ctx.add("exp", [_mul(ctx, x, 1.0 / alpha)]), ctx.scalar(1.0, x)])
    negative = ctx.add("min", [ctx.scalar(0.0, x), _mul(ctx, em1, alpha)])
    return ctx.add("add", [ctx.add("relu", [x]), negative])


@converter("ThresholdedRelu", since=10)
def convert_thresholded_relu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    above = ctx.add("gt", [x, ctx.scalar(float(ctx.attr("alpha", 1.0)), x)])
    return ctx.add("where", [above, x, ctx.scalar(0, x)])


@converter("HardSigmoid", since=6)
def convert_hard_sigmoid(ctx: NodeContext) -> Value:
    return hard_sigmoid(ctx, ctx.input(0), float(ctx.attr("alpha", 0.2)),
                        float(ctx.attr("beta", 0.5)))


@converter("HardSwish", since=14)
def convert_hard_swish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.add("mul", [x, hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5)])


@converter("Softplus", since=1)
def convert_softplus(ctx: NodeContext) -> Value:
    return softplus(ctx, ctx.input(0))


@converter("Softsign", since=1)
def convert_softsign(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.add("div", [x, ctx.add("add", [ctx.scalar(1.0, x), ctx.add("abs", [x])])])


@converter("Mish", since=18)
def convert_mish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.add("mul", [x, ctx.add("tanh", [softplus(ctx, x)])])


@converter("Gelu", since=20)
def convert_gelu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    approximate = ctx.attr("approximate", "none")
    half_x = _mul(ctx, x, 0.5)
    if approximate == "tanh":
        cube = ctx.add("mul", [ctx.add("mul", [x, x]), x])
        inner = ctx.add("add", [x, _mul(ctx, cube, 0.044715)])
        t = ctx.add("tanh", [_mul(ctx, inner, math.sqrt(2.0 / math.pi))])
    elif approximate == "none":
        t = ctx.add("erf", [_mul(ctx, x, 1.0 / math.sqrt(2.0))])
    else:
        raise ctx.error(f"approximate={approximate!r} is not 'none' or 'tanh'")
    return ctx.add("mul", [half_x, ctx.add("add", [ctx.scalar(1.0, x), t])])


def swish(ctx: NodeContext, x: Value, alpha: float) -> Value:
    """x * sigmoid(alpha * x)."""
    return ctx.add("mul", [x, ctx.add("sigmoid", [_mul(ctx, x, alpha)])])


@converter("Swish", since=24)
def convert_swish(ctx: NodeContext) -> Value:
    return swish(ctx, ctx.input(0), float(ctx.attr("alpha", 1.0)))


@converter("SwiGLU", since=28)
def convert_swiglu(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    if a.shape != b.shape:
        raise ctx.error(f"A {shape_text(a.shape)} and B {shape_text(b.shape)} must have one shape")
    return ctx.add("mul", [swish(ctx, a, float(ctx.attr("alpha", 1.0))), b])


@converter("Shrink", since=9)
def convert_shrink(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    low = ctx.add("lt", [x, ctx.scalar(-lambd, x)])
    high = ctx.add("gt", [x, ctx.scalar(lambd, x)])
    up = ctx.add("add", [x, ctx.scalar(bias, x)])
    down = ctx.add("sub", [x, ctx.scalar(bias, x)])
    return ctx.add("where", [low, up, ctx.add("where", [high, down, ctx.scalar(0, x)])])
