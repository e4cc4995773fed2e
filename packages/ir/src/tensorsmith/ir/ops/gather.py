"""``gather``: ONNX Gather (numpy ``take``) along one axis, with runtime indices.

Embedding lookups (BERT, LLaMA) gather rows of a weight with token ids known only at
run time. Negative indices count from the end, as in ONNX; out-of-range ones are
clamped in the compute so a bad id cannot read outside the buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, check_dim, register
from ..symbolic import shape_text, static_dim
from ..te.expr import Expr, cast, const, maximum, minimum, select


def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs.get("axis", 0))
    check(-ndim <= axis < ndim, f"gather axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    data, indices = inputs
    check(len(data.shape) > 0, "gather takes data of rank >= 1, got a scalar")
    check(indices.dtype in ("int64", "int32"), f"gather indices must be int64 or int32, "
          f"got {indices.dtype}")
    axis = _axis(attrs, len(data.shape))
    shape = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1:])
    return [TensorType(shape, data.dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, indices = arrays
    axis = _axis(attrs, data.ndim)
    n = data.shape[axis]
    idx = np.where(indices < 0, indices + n, indices).astype(np.int64)
    return [np.take(data, idx, axis=axis)]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    data, indices = inputs
    axis = _axis(attrs, data.ndim)
    n, k = data.shape[axis], indices.ndim

    def element(*idx: Expr) -> Expr:
        raw = cast("int64", indices[tuple(idx[axis:axis + k])])
        wrapped = select(raw < const(0), raw + n, raw)
        i = minimum(maximum(wrapped, const(0)), const(n - 1))
        return data[(*idx[:axis], i, *idx[axis + k:])]

    return [te.compute(out[0].shape, element, name=tag, tag="gather")]


register("gather", Pattern.INJECTIVE, _infer, _reference, _compute, num_inputs=(2, 2))


def _wrap(raw: Expr, n: int) -> Expr:
    """A run-time index: negative counts from the end; clamped so a load stays inside."""
    raw = cast("int64", raw)
    wrapped = select(raw < const(0), raw + n, raw)
    return minimum(maximum(wrapped, const(0)), const(max(n - 1, 0)))


# -- gather_elements: ONNX GatherElements (numpy take_along_axis) -----------------------

def _elements_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    data, indices = inputs
    check(len(data.shape) == len(indices.shape) > 0,
          f"gather_elements takes data and indices of one rank >= 1, got "
          f"{shape_text(data.shape)} and {shape_text(indices.shape)}")
    axis = _axis(attrs, len(data.shape))
    for d, (k, n) in enumerate(zip(indices.shape, data.shape)):
        if d != axis:
            check_dim(k, "<=", n, f"gather_elements indices {shape_text(indices.shape)} "
                      f"exceed the data {shape_text(data.shape)}")
    check(indices.dtype in ("int64", "int32"), f"indices must be int64 or int32, got "
          f"{indices.dtype}")
    return [TensorType(indices.shape, data.dtype)]


def _elements_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, indices = arrays
    axis = _axis(attrs, data.ndim)
    n = data.shape[axis]
    idx = np.where(indices < 0, indices + n, indices).astype(np.int64)
    # indices may be smaller than the data on the other axes: those read a corner
    corner = tuple(slice(None) if d == axis else slice(0, k) for d, k in enumerate(idx.shape))
    return [np.take_along_axis(data[corner], idx, axis=axis)]


def _elements_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                      ) -> list[te.Tensor]:
    data, indices = inputs
    axis = _axis(attrs, data.ndim)
    n = data.shape[axis]

    def element(*idx: Expr) -> Expr:
        i = _wrap(indices[idx], n)
        return data[(*idx[:axis], i, *idx[axis + 1:])]

    return [te.compute(out[0].shape, element, name=tag, tag="gather_elements")]


register("gather_elements", Pattern.INJECTIVE, _elements_infer, _elements_reference,
         _elements_compute, num_inputs=(2, 2))


# -- gather_nd: ONNX GatherND ----------------------------------------------------------

def _nd_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    data, indices = inputs
    b = int(attrs.get("batch_dims", 0))
    check(len(indices.shape) >= 1 and indices.dtype in ("int64", "int32"),
          f"gather_nd indices must be int64/int32 of rank >= 1, got {indices.dtype}"
          f"{shape_text(indices.shape)}")
    k = static_dim(indices.shape[-1], "gather_nd's index depth (the indices' last dim)")
    check(b + k <= len(data.shape) and data.shape[:b] == indices.shape[:b],
          f"gather_nd: indices {shape_text(indices.shape)} (batch_dims {b}) do not fit data "
          f"{shape_text(data.shape)}")
    return [TensorType((*indices.shape[:-1], *data.shape[b + k:]), data.dtype)]


def _nd_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    data, indices = arrays
    b = int(attrs.get("batch_dims", 0))
    k = indices.shape[-1]
    out_shape = (*indices.shape[:-1], *data.shape[b + k:])
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    d = data.reshape(batch, *data.shape[b:])
    ix = indices.reshape(batch, -1, k).astype(np.int64)
    ix = np.where(ix < 0, ix + np.asarray(data.shape[b:b + k]), ix)
    rows = [d[i][tuple(ix[i].T)] for i in range(batch)]
    return [np.asarray(rows, dtype=data.dtype).reshape(out_shape)]


def _nd_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
    data, indices = inputs
    b = int(attrs.get("batch_dims", 0))
    k = indices.shape[-1]
    q = indices.ndim

    def element(*idx: Expr) -> Expr:
        pos = idx[:q - 1]
        picked = [_wrap(indices[(*pos, const(j))], data.shape[b + j]) for j in range(k)]
        return data[(*idx[:b], *picked, *idx[q - 1:])]

    return [te.compute(out[0].shape, element, name=tag, tag="gather_nd")]


register("gather_nd", Pattern.INJECTIVE, _nd_infer, _nd_reference, _nd_compute,
         num_inputs=(2, 2))
