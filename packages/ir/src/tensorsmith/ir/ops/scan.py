"""``cumsum`` / ``cumprod``: running sums and products along one axis (ONNX CumSum,
CumProd with their ``exclusive`` and ``reverse`` attributes).

Each output element is a reduction over the prefix (or suffix) it covers. That is
quadratic in the axis length instead of linear, and in exchange it is an ordinary
reduction that every target and schedule handles, with no loop-carried dependence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..te.expr import Expr, const, select


def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs.get("axis", 0))
    check(-ndim <= axis < ndim, f"scan axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(len(x.shape) > 0, "a running sum needs a tensor of rank >= 1")
    _axis(attrs, len(x.shape))
    return [TensorType(x.shape, x.dtype)]


def _make(name: str) -> None:
    is_sum = name == "cumsum"
    np_fn = np.cumsum if is_sum else np.cumprod

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x = arrays[0]
        axis = _axis(attrs, x.ndim)
        exclusive, reverse = bool(attrs.get("exclusive")), bool(attrs.get("reverse"))
        y = np.flip(x, axis) if reverse else x
        r = np_fn(y, axis=axis, dtype=x.dtype)
        if exclusive:
            identity = np.zeros_like if is_sum else np.ones_like
            first = identity(np.take(r, [0], axis=axis))
            r = np.concatenate([first, np.delete(r, -1, axis=axis)], axis=axis) \
                if x.shape[axis] else r
        return [np.flip(r, axis) if reverse else r]

    def compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
        x = inputs[0]
        axis = _axis(attrs, x.ndim)
        exclusive, reverse = bool(attrs.get("exclusive")), bool(attrs.get("reverse"))
        k = te.reduce_axis(x.shape[axis], "k")
        identity = const(0 if is_sum else 1, x.dtype)

        def element(*idx: Expr) -> Expr:
            i = idx[axis]
            if reverse:
                inside = k.var > i if exclusive else k.var >= i
            else:
                inside = k.var < i if exclusive else k.var <= i
            v = x[(*idx[:axis], k.var, *idx[axis + 1:])]
            body = select(inside, v, identity)
            return te.sum(body, k) if is_sum else te.prod(body, k)

        return [te.compute(x.shape, element, name=tag, tag=name)]

    register(name, Pattern.OPAQUE, _infer, reference, compute)


_make("cumsum")
_make("cumprod")
