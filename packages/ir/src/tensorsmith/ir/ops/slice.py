"""``slice``: a strided window, one (begin, end, step) per axis, already normalised.

The importer resolves ONNX's clamping and negative-index rules, so every axis here has
``0 <= begin < dim`` (or an empty range), a non-zero ``step`` and an ``end`` that may be
-1 for a backwards slice that runs through index 0: element ``i`` of an output axis is
``begin + i * step``, with ``len(range(begin, end, step))`` elements. Keeping the op
normalised makes infer, reference and compute trivially agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..te.expr import Expr


def _params(attrs: Attrs, shape: Sequence[int]) -> list[tuple[int, int, int]]:
    begin, end, step = attrs["begin"], attrs["end"], attrs["step"]
    check(len(begin) == len(end) == len(step) == len(shape),
          f"slice needs one begin/end/step per axis of rank {len(shape)}, got "
          f"{list(begin)}, {list(end)}, {list(step)}")
    out = []
    for d, (b, e, s, n) in enumerate(zip(begin, end, step, shape)):
        check(s != 0, f"slice step is 0 on axis {d}")
        check(-1 <= e <= n and (len(range(b, e, s)) == 0 or 0 <= b < n),
              f"slice axis {d} of size {n}: range({b}, {e}, {s}) is not normalised")
        out.append((int(b), int(e), int(s)))
    return out


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    shape = tuple(len(range(b, e, s)) for b, e, s in _params(attrs, x.shape))
    return [TensorType(shape, x.dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    # range() and slice() differ on a negative end: -1 is "through index 0" here
    index = tuple(slice(b, e if e >= 0 else (None if s < 0 else 0), s)
                  for b, e, s in _params(attrs, x.shape))
    return [x[index].copy()]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x = inputs[0]
    params = _params(attrs, x.shape)

    def element(*idx: Expr) -> Expr:
        return x[tuple(i * s + b for i, (b, _, s) in zip(idx, params))]

    return [te.compute(out[0].shape, element, name=tag, tag="slice")]


register("slice", Pattern.INJECTIVE, _infer, _reference, _compute)
