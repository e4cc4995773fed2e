"""Reductions over a set of axes, with or without kept dimensions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..symbolic import Sym, math_prod
from ..te.expr import Expr, const


def _axes(attrs: Attrs, ndim: int) -> list[int]:
    axes = attrs.get("axes")
    if axes is None:
        return list(range(ndim))
    for a in axes:
        check(-ndim <= a < ndim, f"reduce axis {a} out of range for rank {ndim}")
    return sorted({a % ndim for a in axes})


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    axes = _axes(attrs, len(x.shape))
    keep = attrs.get("keepdims", True)
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
    return [TensorType(shape, x.dtype)]


_NUMPY: dict[str, Callable[..., Any]] = {
    "reduce_sum": np.sum, "reduce_max": np.max, "reduce_min": np.min, "reduce_prod": np.prod,
    "reduce_mean": np.mean}


def _make(name: str, combiner: str) -> None:
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x = arrays[0]
        axes = tuple(_axes(attrs, x.ndim))
        keep = attrs.get("keepdims", True)
        if x.size == 0 and name in ("reduce_max", "reduce_min"):  # numpy has no identity
            lowest = name == "reduce_max"
            if x.dtype.kind == "f":
                start = -np.inf if lowest else np.inf
            elif x.dtype.kind == "b":
                start = not lowest
            else:
                start = np.iinfo(x.dtype).min if lowest else np.iinfo(x.dtype).max
            r = _NUMPY[name](x, axis=axes, keepdims=keep, initial=start)
        else:
            r = _NUMPY[name](x, axis=axes, keepdims=keep)
        return [np.asarray(r).astype(x.dtype)]

    def compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
        x = inputs[0]
        axes = _axes(attrs, x.ndim)
        keep = attrs.get("keepdims", True)
        ks = {d: te.reduce_axis(x.shape[d], f"k{d}") for d in axes}
        count = math_prod(x.shape[d] for d in axes)  # a Sym where an axis is symbolic

        def element(*idx: Expr) -> Expr:
            it = iter(idx)
            full: list[Expr] = []
            for d in range(x.ndim):
                if d in ks:
                    full.append(ks[d].var)
                    if keep:
                        next(it)
                else:
                    full.append(next(it))
            r = te.tensor._reduce(combiner, x[tuple(full)], list(ks.values()))
            return r

        red = te.compute(out[0].shape, element, name=tag + ("_sum" if name == "reduce_mean"
                                                              else ""), tag=name)
        if name == "reduce_mean":
            total = const(count if isinstance(count, Sym) else float(count), x.dtype)
            return [te.compute(out[0].shape, lambda *i: red[i] / total,
                               name=tag, tag="mean")]
        return [red]

    register(name, Pattern.REDUCTION, _infer, reference, compute)


for _n, _c in (("reduce_sum", "sum"), ("reduce_max", "max"), ("reduce_min", "min"),
               ("reduce_prod", "prod"), ("reduce_mean", "sum")):
    _make(_n, _c)
