"""``expand``: broadcast a tensor to a larger shape (ONNX Expand, after the importer has
resolved its bidirectional broadcast into the final ``shape``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, attr_dims, check, register
from ..symbolic import shape_text
from .broadcast import broadcast_index


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    """The target may hold symbolic dims; a dim of ``x`` fits one only by being 1 or the
    same expression (``batch`` does not fit a target's 4: that holds for one batch)."""
    x = inputs[0]
    shape = attr_dims(attrs["shape"], "expand's target shape")
    fits = len(shape) >= len(x.shape) and all(
        n == 1 or n == m for n, m in zip(reversed(x.shape), reversed(shape)))
    check(fits, f"cannot expand {shape_text(x.shape)} to {shape_text(shape)} (each dim must "
          "be 1 or equal to the target's)")
    return [TensorType(shape, x.dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    return [np.broadcast_to(arrays[0], tuple(attrs["shape"])).copy()]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(out[0].shape, lambda *i: x[broadcast_index(x.shape, i)], name=tag,
                       tag="expand")]


register("expand", Pattern.BROADCAST, _infer, _reference, _compute)
