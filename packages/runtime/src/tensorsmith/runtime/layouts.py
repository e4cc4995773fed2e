"""Storage layouts of kernel inputs.

A tuned kernel may take a weight in another layout than the model's: its axes
reordered, one axis optionally cut into blocks first (``[O, C, KH, KW]`` with ``O`` in
blocks of 32, ordered ``(0, 2, 3, 4, 1)``, is ``[O/32, C, KH, KW, 32]``: each block of
32 output channels one contiguous run). The compiler transposes weights this way at
build time; whoever feeds such a kernel directly (the auto-tuner's measuring process,
which imports only this package) transposes its arrays with :func:`to_stored`.

A layout may also name a ``transform`` of the values, applied before the axes are
blocked and reordered: ``winograd_f2_3`` stores a 3x3 convolution's weights as the
Winograd products take them (:mod:`.winograd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def blocked_shape(shape: Sequence[int], block: Sequence[int] | None) -> tuple[int, ...]:
    """``shape`` with axis ``block[0]`` cut into ``(ceil(extent / block[1]), block[1])``:
    when the extent is not a multiple, the last block is padded (with zeros, which no
    kernel reads: its loops stop at the extent)."""
    if not block:
        return tuple(shape)
    axis, factor = int(block[0]), int(block[1])
    if factor < 1:
        raise ValueError(f"block size {factor} of axis {axis} is not positive")
    return (*shape[:axis], -(-shape[axis] // factor), factor, *shape[axis + 1:])


def stored_shape(shape: Sequence[int], order: Sequence[int],
                 block: Sequence[int] | None = None) -> tuple[int, ...]:
    expanded = blocked_shape(shape, block)
    return tuple(expanded[a] for a in order)


def to_stored(array: Any, order: Sequence[int], block: Sequence[int] | None = None,
              transform: str | None = None) -> np.ndarray:
    """``array`` (in the model's layout) as a kernel with this layout takes it."""
    a = np.asarray(array)
    if transform is not None:
        from .winograd import transform_weight

        a = transform_weight(a, transform)
    if block:
        axis, factor = int(block[0]), int(block[1])
        short = -a.shape[axis] % factor
        if short:
            widths = [(0, 0)] * a.ndim
            widths[axis] = (0, short)
            a = np.pad(a, widths)
        a = a.reshape(blocked_shape(a.shape, block))
    return np.ascontiguousarray(np.transpose(a, order))
