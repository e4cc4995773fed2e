"""``scatter_elements`` and ``scatter_nd``: ONNX's scatters, as gathers over the updates.

A loop nest writes each output element once, so a scatter is computed from the output's
side: element ``p`` reduces over every update that lands on it (the *last* one for
``reduction="none"``, as sequential writes leave it; the sum, product, max or min of them
otherwise), and keeps ``data[p]`` when none does. That costs ``|output| x |updates|``
comparisons, which is what the index-update uses of scatters (KV caches, small tables)
can afford; it needs no atomics and every target lowers it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..dtypes import is_float
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..symbolic import math_prod, shape_text, static_dim
from ..te.expr import Expr, cast, const, maximum, minimum, select
from .transform import ravel, unravel

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrap(raw: Expr, n: int) -> Expr:
    raw = cast("int64", raw)
    return select(raw < const(0), raw + n, raw)


def _clamp(i: Expr, n: int) -> Expr:
    return minimum(maximum(i, const(0)), const(max(n - 1, 0)))


def _lowest(dtype: str, highest: bool = False) -> float | int | bool:
    if dtype == "bool":
        return highest
    if is_float(dtype):
        return float("inf") if highest else float("-inf")
    info = np.iinfo(dtype)
    return int(info.max if highest else info.min)


def _combine(data: Expr, hits: Expr, reduction: str) -> Expr:
    if reduction == "add":
        return data + hits
    if reduction == "mul":
        return data * hits
    return maximum(data, hits) if reduction == "max" else minimum(data, hits)


def _reduce(reduction: str, hit: Expr, value: Expr, axes: list[te.IterVar]) -> Expr:
    """The reduction of ``value`` over the updates that hit (the identity elsewhere)."""
    dtype = value.dtype
    if reduction == "add":
        return te.sum(select(hit, value, const(0, dtype) if dtype != "bool" else False), axes)
    if reduction == "mul":
        return te.prod(select(hit, value, const(1, dtype)), axes)
    if reduction == "max":
        return te.max(select(hit, value, const(_lowest(dtype), dtype)), axes)
    return te.min(select(hit, value, const(_lowest(dtype, highest=True), dtype)), axes)


def _np_apply(out: np.ndarray, index: tuple[int, ...], value: np.ndarray, reduction: str
              ) -> None:
    if reduction == "none":
        out[index] = value
    elif reduction == "add":
        out[index] = out[index] + value
    elif reduction == "mul":
        out[index] = out[index] * value
    elif reduction == "max":
        out[index] = np.maximum(out[index], value)
    else:
        out[index] = np.minimum(out[index], value)


# -- scatter_elements -----------------------------------------------------------------

def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs.get("axis", 0))
    check(-ndim <= axis < ndim, f"scatter axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _elements_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    data, indices, updates = inputs
    check(len(data.shape) == len(indices.shape) > 0 and indices.shape == updates.shape,
          f"scatter_elements: data {shape_text(data.shape)}, indices "
          f"{shape_text(indices.shape)} and updates {shape_text(updates.shape)} must have one "
          "rank, indices and updates one shape")
    check(data.dtype == updates.dtype, f"updates are {updates.dtype}, data {data.dtype}")
    check(attrs.get("reduction", "none") in REDUCTIONS, "unknown scatter reduction "
          f"{attrs.get('reduction')!r}")
    _axis(attrs, len(data.shape))
    return [TensorType(data.shape, data.dtype)]


def _elements_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, indices, updates = arrays
    axis = _axis(attrs, data.ndim)
    reduction = attrs.get("reduction", "none")
    out = data.copy()
    n = data.shape[axis]
    for u in np.ndindex(*indices.shape):
        i = int(indices[u])
        target = (*u[:axis], i + n if i < 0 else i, *u[axis + 1:])
        _np_apply(out, target, updates[u], reduction)
    return [out]


def _elements_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                      ) -> list[te.Tensor]:
    data, indices, updates = inputs
    axis = _axis(attrs, data.ndim)
    reduction = attrs.get("reduction", "none")
    n, m = data.shape[axis], indices.shape[axis]
    k = te.reduce_axis(m, "k")

    def source(p: Sequence[Expr]) -> tuple[tuple[Expr, ...], Expr]:
        """Update index for output ``p`` and update ``k`` on the axis, and whether it is
        inside the updates (they may be smaller than the data on the other axes)."""
        inside: Expr = const(True)
        u: list[Expr] = []
        for d, (i, size) in enumerate(zip(p, indices.shape)):
            if d == axis:
                u.append(k.var)
                continue
            if size < data.shape[d]:
                inside = inside & (i < const(size))
            u.append(_clamp(i, size))
        return tuple(u), inside

    def hit(p: Sequence[Expr]) -> tuple[tuple[Expr, ...], Expr]:
        u, inside = source(p)
        return u, inside & _wrap(indices[u], n).eq(p[axis])

    if reduction == "none":
        def last(*p: Expr) -> Expr:
            _, h = hit(p)
            return te.max(select(h, k.var, const(-1)), k)

        which = te.compute(data.shape, last, name=tag + "_last")

        def element(*p: Expr) -> Expr:
            u, _ = source(p)
            j = which[p]
            picked = tuple(_clamp(j, m) if d == axis else e for d, e in enumerate(u))
            return select(j >= const(0), updates[picked], data[p])

        return [te.compute(data.shape, element, name=tag, tag="scatter_elements")]

    def reduced(*p: Expr) -> Expr:
        u, h = hit(p)
        return _reduce(reduction, h, updates[u], [k])

    acc = te.compute(data.shape, reduced, name=tag + "_acc")
    return [te.compute(data.shape, lambda *p: _combine(data[p], acc[p], reduction), name=tag,
                       tag="scatter_elements")]


register("scatter_elements", Pattern.OPAQUE, _elements_infer, _elements_reference,
         _elements_compute, num_inputs=(3, 3))


# -- scatter_nd ----------------------------------------------------------------------

def _nd_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    data, indices, updates = inputs
    check(len(indices.shape) >= 1, "scatter_nd indices need rank >= 1")
    k = static_dim(indices.shape[-1], "scatter_nd's index depth (the indices' last dim)")
    check(k <= len(data.shape) and updates.shape == (*indices.shape[:-1], *data.shape[k:]),
          f"scatter_nd: updates {shape_text(updates.shape)} must be indices.shape[:-1] + "
          f"data.shape[{k}:] = {shape_text([*indices.shape[:-1], *data.shape[k:]])}")
    check(data.dtype == updates.dtype, f"updates are {updates.dtype}, data {data.dtype}")
    check(attrs.get("reduction", "none") in REDUCTIONS, "unknown scatter reduction "
          f"{attrs.get('reduction')!r}")
    return [TensorType(data.shape, data.dtype)]


def _nd_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, indices, updates = arrays
    reduction = attrs.get("reduction", "none")
    out = data.copy()
    k = indices.shape[-1]
    for u in np.ndindex(*indices.shape[:-1]):
        target = tuple(int(i) + (n if i < 0 else 0) for i, n in zip(indices[u], data.shape[:k]))
        _np_apply(out, target, updates[u], reduction)
    return [out]


def _nd_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
    data, indices, updates = inputs
    reduction = attrs.get("reduction", "none")
    k = indices.shape[-1]
    lead = indices.shape[:-1]
    axes = [te.reduce_axis(n, f"u{d}") for d, n in enumerate(lead)]
    us = tuple(a.var for a in axes)

    def hit(p: Sequence[Expr]) -> Expr:
        h: Expr = const(True)
        for j in range(k):
            h = h & _wrap(indices[(*us, const(j))], data.shape[j]).eq(p[j])
        return h

    if reduction == "none":
        if not axes:  # no updates at all
            return [te.compute(data.shape, lambda *p: data[p], name=tag, tag="scatter_nd")]
        which = te.compute(data.shape, lambda *p: te.max(
            select(hit(p), ravel(us, lead), const(-1)), axes), name=tag + "_last")

        def element(*p: Expr) -> Expr:
            j = which[p]
            u = unravel(_clamp(j, math_prod(lead)), lead)
            return select(j >= const(0), updates[(*u, *p[k:])], data[p])

        return [te.compute(data.shape, element, name=tag, tag="scatter_nd")]
    acc = te.compute(data.shape, lambda *p: _reduce(reduction, hit(p), updates[(*us, *p[k:])],
                                                    axes), name=tag + "_acc")
    return [te.compute(data.shape, lambda *p: _combine(data[p], acc[p], reduction), name=tag,
                       tag="scatter_nd")]


register("scatter_nd", Pattern.OPAQUE, _nd_infer, _nd_reference, _nd_compute,
         num_inputs=(3, 3))
