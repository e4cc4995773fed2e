"""``concat``: join tensors along one axis (ONNX Concat, and Split's inverse).

Exported models concatenate both weights-derived constants (folded at import) and
activations (e.g. the class token in ViT, skip connections in U-Nets), so it needs a
compute. Every input's read is clamped into its own bounds, so the loads a ``select``
does not take stay in memory on targets that evaluate both branches.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register, shapes_text
from ..symbolic import Dim
from ..te.expr import Expr, const, maximum, minimum, select


def _axis(attrs: Attrs, ndim: int) -> int:
    axis = int(attrs["axis"])
    check(-ndim <= axis < ndim, f"concat axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    first = inputs[0]
    check(len(first.shape) > 0, "concat takes tensors of rank >= 1, got a scalar")
    axis = _axis(attrs, len(first.shape))
    total: Dim = 0
    for t in inputs:
        check(t.dtype == first.dtype, f"concat inputs have different dtypes {first.dtype} "
              f"and {t.dtype}")
        check(len(t.shape) == len(first.shape) and all(
            a == b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis),
            f"concat inputs {shapes_text(i.shape for i in inputs)} differ outside axis {axis}")
        total += t.shape[axis]  # symbolic sizes add: seq + 1 after a class token
    shape = tuple(total if d == axis else n for d, n in enumerate(first.shape))
    return [TensorType(shape, first.dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    return [np.concatenate(list(arrays), axis=int(attrs["axis"]))]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    axis = int(attrs["axis"]) % inputs[0].ndim
    parts = [t for t in inputs if t.shape[axis] != 0]  # (a symbolic size is at least 1)
    offsets = list(itertools.accumulate((t.shape[axis] for t in parts), initial=0))
    if not parts:  # every input is empty along the axis: so is the output
        return [te.compute(out[0].shape, lambda *i: inputs[0][tuple(i)], name=tag,
                           tag="concat")]

    def element(*idx: Expr) -> Expr:
        i = idx[axis]
        result: Expr | None = None
        # Built from the last input backwards: select(i < end_k, part_k, later parts).
        for k in range(len(parts) - 1, -1, -1):
            t = parts[k]
            local = i - offsets[k]
            if k > 0:
                local = maximum(local, const(0))
            if k < len(parts) - 1:
                local = minimum(local, const(t.shape[axis] - 1))
            load = t[tuple(local if d == axis else j for d, j in enumerate(idx))]
            result = load if result is None else select(i < offsets[k + 1], load, result)
        assert result is not None
        return result

    return [te.compute(out[0].shape, element, name=tag, tag="concat")]


register("concat", Pattern.INJECTIVE, _infer, _reference, _compute, num_inputs=(1, 1 << 16))
