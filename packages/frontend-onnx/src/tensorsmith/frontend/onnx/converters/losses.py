"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12+).

Both pick ``-input[n, target[n, d], d]`` with a GatherElements over the class axis,
weight it per class, and reduce. The weighting and the mean follow ONNX's reference
implementations exactly, quirks included: without class weights NLL's mean divides by
the count of non-ignored targets unless ``ignore_index`` is -1, while SCE's does whenever
an ``ignore_index`` is given.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..registry import converter
from .common import reshape


def _not(ctx: NodeContext, x: Value) -> Value:
    return ctx.add("eq", [x, ctx.const(False)])


def _loss(ctx: NodeContext, logp: Value, target: Value, weight: Value | None, sce: bool
          ) -> Value:
    if len(logp.shape) < 2 or target.shape != (logp.shape[0], *logp.shape[2:]):
        raise ctx.error(f"input {shape_text(logp.shape)} and target "
                        f"{shape_text(target.shape)} do not fit ([N, C, d...] and [N, d...])")
    ignore = ctx.attr("ignore_index")
    reduction = str(ctx.attr("reduction", "mean"))
    if reduction not in ("none", "sum", "mean"):
        raise ctx.error(f"unknown reduction {reduction!r}")
    classes = logp.shape[1]
    t = target if target.dtype == "int64" else ctx.add("cast", [target], {"dtype": "int64"})
    valid = None
    if ignore is not None:
        valid = _not(ctx, ctx.add("eq", [t, ctx.const(np.int64(ignore), hint="ignore")]))
        t = ctx.add("where", [valid, t, ctx.const(np.int64(0), hint="zero")])
    picked = ctx.add("gather_elements", [logp, reshape(ctx, t, (t.shape[0], 1, *t.shape[1:]))],
                     {"axis": 1})
    loss = ctx.add("neg", [reshape(ctx, picked, target.shape)])
    zero = ctx.const(np.zeros((), logp.dtype), hint="zero")
    if valid is not None:
        loss = ctx.add("where", [valid, loss, zero])
    gw: Value | None = None
    if weight is not None:
        clipped = ctx.add("clip", [t], {"min": 0, "max": classes - 1})
        gw = ctx.add("gather", [weight, clipped], {"axis": 0})
        if valid is not None:
            gw = ctx.add("where", [valid, gw, zero])
    elif valid is not None and (sce or ignore != -1):
        gw = ctx.add("where", [valid, ctx.const(np.ones((), logp.dtype), hint="one"), zero])
    if gw is not None:
        loss = ctx.add("mul", [gw, loss])
        if reduction == "mean":
            return ctx.add("div", [ctx.add("reduce_sum", [loss], {"keepdims": False}),
                                   ctx.add("reduce_sum", [gw], {"keepdims": False})])
    if reduction == "none":
        return loss
    op = "reduce_mean" if reduction == "mean" else "reduce_sum"
    return ctx.add(op, [loss], {"keepdims": False})


@converter("NegativeLogLikelihoodLoss", since=12)
def convert_nll_loss(ctx: NodeContext) -> Value:
    return _loss(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2), sce=False)


@converter("SoftmaxCrossEntropyLoss", since=12)
def convert_softmax_cross_entropy(ctx: NodeContext) -> list[Value | None]:
    x = ctx.input(0)
    log_prob = ctx.add("softmax", [x], {"axis": 1, "log": True})
    loss = _loss(ctx, log_prob, ctx.input(1), ctx.optional_input(2), sce=True)
    return [loss, log_prob if ctx.output_wanted(1) else None]
