"""``topk``: the k largest (or smallest) elements along an axis and their indices.

Sorting is expressed as ranking: an element's rank is how many elements come before it
in the order (ties broken by the lower index first, as ONNX requires), output slot ``j``
takes the element of rank ``j``. Three reductions, quadratic in the axis length, and no
data-dependent control flow, so every target lowers it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import (
    Attrs,
    Pattern,
    TensorType,
    always,
    attr_dim,
    check,
    check_dim,
    register,
)
from ..symbolic import assume_if_computed, dim_min
from ..te.expr import Expr, const, select


def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs.get("axis", -1))
    check(-ndim <= axis < ndim, f"topk axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(len(x.shape) > 0, "topk needs a tensor of rank >= 1")
    axis = _axis(attrs, len(x.shape))
    k, length = attr_dim(attrs["k"], "topk's k"), x.shape[axis]
    message = f"topk k={k} for an axis of {length}"
    check(not isinstance(k, int) or k >= 0, message)
    # a k computed from an input's value (ONNX TopK's K given at run time) that may or may
    # not fit the axis: each run checks it does, as min(k, length) == k
    decided = always(k, "<=", length) or always(k, ">", length)
    if decided or not assume_if_computed(dim_min(k, length), k, message):
        check_dim(k, "<=", length, message)
    shape = tuple(k if d == axis else n for d, n in enumerate(x.shape))
    return [TensorType(shape, x.dtype), TensorType(shape, "int64")]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    axis = _axis(attrs, x.ndim)
    k = int(attrs["k"])
    largest = bool(attrs.get("largest", True))
    n = x.shape[axis]
    if largest:  # descending, ties by lower index: an ascending stable sort, reversed,
        # of the reversed axis (no negation: unsigned types have none)
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x = inputs[0]
    axis = _axis(attrs, x.ndim)
    largest = bool(attrs.get("largest", True))
    n = x.shape[axis]

    def at(idx: Sequence[Expr], i: Expr) -> tuple[Expr, ...]:
        return (*idx[:axis], i, *idx[axis + 1:])

    r1 = te.reduce_axis(n, "r")

    def rank(*idx: Expr) -> Expr:
        mine, other = x[idx], x[at(idx, r1.var)]
        beats = other > mine if largest else other < mine
        before = beats | (other.eq(mine) & (r1.var < idx[axis]))
        return te.sum(select(before, const(1), const(0)), r1)

    ranks = te.compute(x.shape, rank, name=tag + "_rank")
    r2 = te.reduce_axis(n, "r")
    index = te.compute(out[1].shape, lambda *idx: te.sum(
        select(ranks[at(idx, r2.var)].eq(idx[axis]), r2.var, const(0)), r2),
        name=tag + "_indices", tag="topk")
    values = te.compute(out[0].shape, lambda *idx: x[at(idx, te.minimum(
        te.maximum(index[idx], 0), n - 1))], name=tag, tag="topk")
    return [values, index]


register("topk", Pattern.OPAQUE, _infer, _reference, _compute)
