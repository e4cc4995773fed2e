"""``argmax`` / ``argmin``: the index of the extreme value along one axis (int64).

Two reductions, no pair-valued combiner needed: first the extreme value, then the
smallest (or, with ``select_last_index``, the largest) index holding it. That is NumPy's
and ONNX's tie rule, and both stages are plain max/min reductions every target lowers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, check_dim, register
from ..te.expr import Expr, const, select


def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs.get("axis", 0))
    check(-ndim <= axis < ndim, f"arg-reduce axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(len(x.shape) > 0, "arg-reduce takes a tensor of rank >= 1, got a scalar")
    axis = _axis(attrs, len(x.shape))
    check_dim(x.shape[axis], ">", 0, f"arg-reduce over the empty axis {axis}")
    keep = attrs.get("keepdims", True)
    shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape) if keep or d != axis)
    return [TensorType(shape, "int64")]


def _make(name: str) -> None:
    np_fn = np.argmax if name == "argmax" else np.argmin

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x = arrays[0]
        axis = _axis(attrs, x.ndim)
        if attrs.get("select_last_index"):
            r = x.shape[axis] - 1 - np_fn(np.flip(x, axis), axis=axis)
        else:
            r = np_fn(x, axis=axis)
        if attrs.get("keepdims", True):
            r = np.expand_dims(r, axis)
        return [np.asarray(r, dtype=np.int64)]

    def compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
        x = inputs[0]
        axis = _axis(attrs, x.ndim)
        n = x.shape[axis]
        keep = attrs.get("keepdims", True)
        kept = tuple(1 if d == axis else s for d, s in enumerate(x.shape))

        def full(idx: Sequence[Expr], k: Expr, has_axis: bool) -> tuple[Expr, ...]:
            """An index of rank ``x.ndim`` from ``idx`` with its axis entry set to ``k``."""
            rest = [i for d, i in enumerate(idx) if not (has_axis and d == axis)]
            return (*rest[:axis], k, *rest[axis:])

        k1 = te.reduce_axis(n, "k")
        extreme = te.max if name == "argmax" else te.min
        best = te.compute(kept, lambda *i: extreme(x[full(i, k1.var, True)], k1),
                          name=tag + "_value")
        k2 = te.reduce_axis(n, "k")
        last = bool(attrs.get("select_last_index"))

        def index(*i: Expr) -> Expr:
            hit = x[full(i, k2.var, keep)].eq(best[full(i, const(0), keep)])
            if last:
                return te.max(select(hit, k2.var, const(-1)), k2)
            return te.min(select(hit, k2.var, const(n)), k2)

        return [te.compute(out[0].shape, index, name=tag, tag=name)]

    register(name, Pattern.OPAQUE, _infer, reference, compute)


_make("argmax")
_make("argmin")
