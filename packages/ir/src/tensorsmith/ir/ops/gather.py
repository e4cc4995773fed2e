"""``gather``: ONNX Gather (numpy ``take``) along one axis, with runtime indices.

Embedding lookups (BERT, LLaMA) gather rows of a weight with token ids known only at
run time. Negative indices count from the end, as in ONNX; out-of-range ones are
clamped in the compute so a bad id cannot read outside the buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register
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
