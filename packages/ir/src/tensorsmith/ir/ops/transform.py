"""Injective ops that move data without arithmetic: reshape, transpose, copy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..te.expr import Expr, const


def unravel(flat: Expr, shape: Sequence[int]) -> tuple[Expr, ...]:
    """Indices of element ``flat`` (row-major) in a tensor of ``shape``."""
    out: list[Expr] = []
    for n in reversed(shape):
        out.append(flat % n if n != 1 else const(0))
        flat = flat // n
    return tuple(reversed(out))


def ravel(idx: Sequence[Expr], shape: Sequence[int]) -> Expr:
    flat: Expr = const(0)
    for i, n in zip(idx, shape):
        flat = flat * n + i
    return flat


def _reshape_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    shape = tuple(int(d) for d in attrs["shape"])
    check(math.prod(shape) == math.prod(x.shape),
          f"cannot reshape {list(x.shape)} ({math.prod(x.shape)} elements) to "
          f"{list(shape)} ({math.prod(shape)} elements)")
    return [TensorType(shape, x.dtype)]


def _reshape_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                     ) -> list[te.Tensor]:
    """Leading and trailing axes the two shapes share are read as they are; only the
    axes between are flattened and split again. Splitting a channel axis into blocks
    then reads ``x[n, cb * b + ci, h, w]``, not a division of the flat index per axis."""
    x = inputs[0]
    shape = out[0].shape
    head = 0
    while head < min(len(shape), x.ndim) and shape[head] == x.shape[head]:
        head += 1
    tail = 0
    while (tail < min(len(shape), x.ndim) - head
           and shape[len(shape) - 1 - tail] == x.shape[x.ndim - 1 - tail]):
        tail += 1

    def element(*i: Expr) -> Expr:
        flat = ravel(i[head:len(i) - tail], shape[head:len(shape) - tail])
        into = x.shape[head:x.ndim - tail]
        middle = (flat,) if len(into) == 1 else unravel(flat, into)
        return x[(*i[:head], *middle, *i[len(i) - tail:])]

    return [te.compute(shape, element, name=tag, tag="reshape")]


register("reshape", Pattern.INJECTIVE, _reshape_infer,
         lambda arrays, attrs: [arrays[0].reshape(attrs["shape"])], _reshape_compute)


def _transpose_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    perm = attrs["perm"]
    check(sorted(perm) == list(range(len(x.shape))),
          f"perm {list(perm)} is not a permutation of the {len(x.shape)} axes")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


def _transpose_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                       ) -> list[te.Tensor]:
    x = inputs[0]
    perm = attrs["perm"]
    inverse = [perm.index(d) for d in range(len(perm))]
    return [te.compute(out[0].shape, lambda *i: x[tuple(i[inverse[d]] for d in range(x.ndim))],
                       name=tag, tag="transpose")]


register("transpose", Pattern.INJECTIVE, _transpose_infer,
         lambda arrays, attrs: [np.transpose(arrays[0], attrs["perm"])], _transpose_compute)


def _copy_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                  ) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(x.shape, lambda *i: x[i], name=tag, tag="copy")]


register("copy", Pattern.INJECTIVE, lambda inputs, attrs: [inputs[0]],
         lambda arrays, attrs: [arrays[0].copy()], _copy_compute)
