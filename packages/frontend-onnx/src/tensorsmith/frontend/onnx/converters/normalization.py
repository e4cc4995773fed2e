"""Normalisation layers at inference: BatchNorm becomes one multiply-add per channel
(folded on constant statistics), Layer/Instance/Group norm become mean, variance and
arithmetic over the canonical reductions."""

from __future__ import annotations

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import math_prod, shape_text

from ..context import NodeContext
from ..registry import converter
from .common import normalize_axis, reshape, slice_axis


def _per_channel(ctx: NodeContext, v: Value, rank: int) -> Value:
    """A [C] tensor shaped [C, 1, ..., 1] to broadcast against [N, C, spatial...]."""
    if len(v.shape) != 1 or rank <= 2:
        return v
    return reshape(ctx, v, (v.shape[0], *([1] * (rank - 2))))


def normalize(ctx: NodeContext, x: Value, axes: list[int], eps: float
              ) -> tuple[Value, Value, Value]:
    """(x - mean) / sqrt(var + eps) over ``axes``, with the mean and the std (kept dims)."""
    mean = ctx.add("reduce_mean", [x], {"axes": axes, "keepdims": True})
    centered = ctx.add("sub", [x, mean])
    var = ctx.add("reduce_mean", [ctx.add("mul", [centered, centered])],
                  {"axes": axes, "keepdims": True})
    std = ctx.add("sqrt", [ctx.add("add", [var, ctx.scalar(eps, var)])])
    return ctx.add("div", [centered, std]), mean, std


def _stash(ctx: NodeContext, x: Value) -> Value:
    """float16 statistics are computed in float32 (ONNX's stash_type=1, the default)."""
    if x.dtype == "float16" and int(ctx.attr("stash_type", 1)) == 1:
        return ctx.add("cast", [x], {"dtype": "float32"})
    return x


def _back(ctx: NodeContext, y: Value, dtype: str) -> Value:
    return y if y.dtype == dtype else ctx.add("cast", [y], {"dtype": dtype})


def _batch_norm_training(ctx: NodeContext) -> list[Value | None]:
    """training_mode=1: normalize with the batch's own statistics (population variance)
    and return the updated running mean and variance, as ONNX's reference does."""
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    rank = len(x.shape)
    axes = [d for d in range(rank) if d != 1]
    y, batch_mean, _ = normalize(ctx, x, axes, float(ctx.attr("epsilon", 1e-5)))
    y = ctx.add("mul", [y, _per_channel(ctx, scale, rank)])
    y = ctx.add("add", [y, _per_channel(ctx, bias, rank)])
    momentum = float(ctx.attr("momentum", 0.9))
    flat_mean = reshape(ctx, batch_mean, (x.shape[1],))
    centered = ctx.add("sub", [x, batch_mean])
    batch_var = reshape(ctx, ctx.add("reduce_mean", [ctx.add("mul", [centered, centered])],
                                     {"axes": axes, "keepdims": True}), (x.shape[1],))

    def running(old: Value, new: Value) -> Value:
        return ctx.add("add", [ctx.add("mul", [old, ctx.scalar(momentum, old)]),
                               ctx.add("mul", [new, ctx.scalar(1 - momentum, new)])])

    return [y, running(mean, flat_mean) if ctx.output_wanted(1) else None,
            running(var, batch_var) if ctx.output_wanted(2) else None]


@converter("BatchNormalization", since=7)
def convert_batch_norm(ctx: NodeContext) -> Value | list[Value | None]:
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    if int(ctx.attr("training_mode", 0)):
        return _batch_norm_training(ctx)
    if len(x.shape) < 2:
        raise ctx.error(f"needs an input of rank >= 2 (N, C, ...), got {shape_text(x.shape)}")
    eps = float(ctx.attr("epsilon", 1e-5))
    rank = len(x.shape)
    # k = scale / sqrt(var + eps), c = bias - mean * k: on constant statistics the
    # folding pass turns both into weights, leaving one multiply-add per element
    std = ctx.add("sqrt", [ctx.add("add", [var, ctx.scalar(eps, var)])])
    k = ctx.add("div", [scale, std])
    c = ctx.add("sub", [bias, ctx.add("mul", [mean, k])])
    y = ctx.add("mul", [x, _per_channel(ctx, k, rank)])
    return ctx.add("add", [y, _per_channel(ctx, c, rank)])


@converter("LayerNormalization", since=17)
def convert_layer_norm(ctx: NodeContext) -> list[Value | None]:
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    rank = len(x.shape)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    xs = _stash(ctx, x)
    y, mean, std = normalize(ctx, xs, list(range(axis, rank)), float(ctx.attr("epsilon", 1e-5)))
    y = ctx.add("mul", [_back(ctx, y, x.dtype), scale])
    if bias is not None:
        y = ctx.add("add", [y, bias])
    inv_std = ctx.add("reciprocal", [std]) if ctx.output_wanted(2) else None
    return [y, mean if ctx.output_wanted(1) else None, inv_std]


@converter("InstanceNormalization", since=6)
def convert_instance_norm(ctx: NodeContext) -> Value:
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    rank = len(x.shape)
    if rank < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got "
                        f"{shape_text(x.shape)}")
    y, _, _ = normalize(ctx, x, list(range(2, rank)), float(ctx.attr("epsilon", 1e-5)))
    y = ctx.add("mul", [y, _per_channel(ctx, scale, rank)])
    return ctx.add("add", [y, _per_channel(ctx, bias, rank)])


@converter("GroupNormalization", since=21)
def convert_group_norm(ctx: NodeContext) -> Value:
    """Per-channel scale and bias (opset 21; onnx deprecates version 18, whose were
    per group, and its checker refuses models using it)."""
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    rank = len(x.shape)
    groups = int(ctx.required_attr("num_groups"))
    if rank < 3 or groups <= 0 or x.shape[1] % groups:
        raise ctx.error(f"cannot split the channels of {shape_text(x.shape)} into {groups} groups")
    per_group = math_prod(x.shape[1:]) // groups
    grouped = reshape(ctx, _stash(ctx, x), (x.shape[0], groups, per_group))
    y, _, _ = normalize(ctx, grouped, [2], float(ctx.attr("epsilon", 1e-5)))
    y = reshape(ctx, _back(ctx, y, x.dtype), x.shape)
    y = ctx.add("mul", [y, _per_channel(ctx, scale, rank)])
    return ctx.add("add", [y, _per_channel(ctx, bias, rank)])


@converter("RMSNormalization", since=23)
def convert_rms_norm(ctx: NodeContext) -> Value:
    """x / sqrt(mean(x^2 over axis..) + eps) * scale, the statistics in stash_type."""
    x, scale = ctx.input(0), ctx.input(1)
    rank = len(x.shape)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    xs = _stash(ctx, x)
    mean_sq = ctx.add("reduce_mean", [ctx.add("mul", [xs, xs])],
                      {"axes": list(range(axis, rank)), "keepdims": True})
    eps = ctx.scalar(float(ctx.attr("epsilon", 1e-5)), mean_sq)
    inv = ctx.add("reciprocal", [ctx.add("sqrt", [ctx.add("add", [mean_sq, eps])])])
    y = _back(ctx, ctx.add("mul", [xs, inv]), x.dtype)
    return ctx.add("mul", [y, scale])


@converter("MeanVarianceNormalization", since=9)
def convert_mean_variance_norm(ctx: NodeContext) -> Value:
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9): ONNX's function body, term by term."""
    x = ctx.input(0)
    rank = len(x.shape)
    axes = sorted(normalize_axis(ctx, int(a), rank)
                  for a in (ctx.attr("axes") or [0, 2, 3]))
    mean = ctx.add("reduce_mean", [x], {"axes": axes, "keepdims": True})
    mean_sq = ctx.add("reduce_mean", [ctx.add("mul", [x, x])], {"axes": axes,
                                                                "keepdims": True})
    std = ctx.add("sqrt", [ctx.add("sub", [mean_sq, ctx.add("mul", [mean, mean])])])
    std = ctx.add("add", [std, ctx.scalar(1e-9, std)])
    return ctx.add("div", [ctx.add("sub", [x, mean]), std])


@converter("LRN", since=1)
def convert_lrn(ctx: NodeContext) -> Value:
    """x / (bias + alpha / size * sum of x^2 over a window of channels) ^ beta; the window
    sum is the sum of ``size`` shifted slices of the zero-padded squares."""
    x = ctx.input(0)
    if len(x.shape) != 4:
        raise ctx.error(f"needs a 4-D input, got {shape_text(x.shape)}")
    size = int(ctx.required_attr("size"))
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    squares = ctx.add("mul", [x, x])
    padded = ctx.add("pad", [squares], {"before": [0, before, 0, 0], "after": [0, after, 0, 0],
                                        "mode": "constant", "value": 0.0})
    channels = x.shape[1]
    total: Value | None = None
    for k in range(size):
        part = slice_axis(ctx, padded, 1, k, k + channels)
        total = part if total is None else ctx.add("add", [total, part])
    assert total is not None
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    base = ctx.add("add", [ctx.scalar(bias, x), ctx.add("mul", [total,
                                                               ctx.scalar(alpha / size, x)])])
    return ctx.add("div", [x, ctx.add("pow", [base, ctx.scalar(beta, x)])])
