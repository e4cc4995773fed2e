"""Normalisation layers at inference: BatchNorm becomes one multiply-add per channel
(folded on constant statistics), Layer/Instance/Group norm become mean, variance and
arithmetic over the canonical reductions."""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..registry import converter
from .common import normalize_axis, reshape


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


@converter("BatchNormalization", since=7)
def convert_batch_norm(ctx: NodeContext) -> Value:
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    if int(ctx.attr("training_mode", 0)):
        raise ctx.error("training_mode=1 is not supported; export the model in eval mode")
    if len(x.shape) < 2:
        raise ctx.error(f"needs an input of rank >= 2 (N, C, ...), got {list(x.shape)}")
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
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got {list(x.shape)}")
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
        raise ctx.error(f"cannot split the channels of {list(x.shape)} into {groups} groups")
    per_group = int(np.prod(x.shape[1:], dtype=np.int64)) // groups
    grouped = reshape(ctx, _stash(ctx, x), (x.shape[0], groups, per_group))
    y, _, _ = normalize(ctx, grouped, [2], float(ctx.attr("epsilon", 1e-5)))
    y = reshape(ctx, _back(ctx, y, x.dtype), x.shape)
    y = ctx.add("mul", [y, _per_channel(ctx, scale, rank)])
    return ctx.add("add", [y, _per_channel(ctx, bias, rank)])
