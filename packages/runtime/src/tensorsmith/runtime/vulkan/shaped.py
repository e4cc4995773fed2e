"""Where a Vulkan model with dynamic shapes keeps its buffers for one binding of its
symbols, and how many workgroups each dispatch launches then.

The static buffers keep the layout of layout.py. The buffers whose size depends on the
symbols (shapes.Binder's ``buffer_bytes``) share one more VkBuffer, the "dynamic" region,
placed by lifetime like the CPU library places them (shapes.place_by_lifetime); the model
grows that VkBuffer when a binding needs more and keeps it otherwise, so a run at a shape
already seen, or a smaller one, allocates nothing. With staging buffers, the inputs and
the symbols' values go up and the outputs and checks' flags come down at offsets that
depend on the binding too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tensorsmith.runtime.plan import Buffer
from tensorsmith.runtime.shapes import Binding, place_by_lifetime, symbol_buffers

__all__ = ["ShapedLayout", "Triple", "shaped_layout"]

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class ShapedLayout:
    """One binding's placements: ``offsets`` of the dynamic buffers in the dynamic region
    of ``region_bytes``; ``grids[step][dispatch]``; the staging offsets of each input
    (``upload[i]``), symbols buffer (``symbols_upload[buffer]``) and output or check flag
    (``download[k]``), and the staging buffers' sizes."""

    binding: Binding
    offsets: dict[int, int]
    region_bytes: int
    grids: list[list[Triple]]
    upload: list[int]
    symbols_upload: dict[int, int]
    upload_bytes: int
    download: list[int]
    download_bytes: int


def shaped_layout(binding: Binding, buffers: Sequence[Buffer], grids: list[list[Triple]],
                  input_bytes: Sequence[int], output_bytes: Sequence[int], checks: int,
                  alignment: int, counts: int = 0) -> ShapedLayout:
    """The placements of ``binding`` (see :class:`ShapedLayout`). The download buffer
    also holds ``counts`` int64 counts (plan.CountedSize) between the parts of a run,
    before the outputs come down."""
    lifetimes = {k: (n, buffers[k].first_step or 0, buffers[k].last_step or 0)
                 for k, n in binding.buffer_bytes.items()}
    offsets, region = place_by_lifetime(lifetimes, max(alignment, 16))
    cursor = 0
    upload = []
    for n in input_bytes:
        upload.append(cursor)
        cursor += _round16(n)
    symbols_upload = {}
    for k, names in symbol_buffers(buffers).items():
        symbols_upload[k] = cursor
        cursor += _round16(8 * len(names))
    upload_bytes = cursor
    cursor = 0
    download = []
    for n in [*output_bytes, *[4] * checks]:
        download.append(cursor)
        cursor += _round16(n)
    return ShapedLayout(binding, offsets, max(region, 4), grids, upload, symbols_upload,
                        max(upload_bytes, 4), download, max(cursor, 8 * counts, 16))


def _round16(n: int) -> int:
    return -(-n // 16) * 16
