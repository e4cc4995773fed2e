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

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tensorsmith.runtime.errors import InputError
from tensorsmith.runtime.plan import Buffer
from tensorsmith.runtime.shapes import Binding, SizeExpr, place_by_lifetime, size_expr

from .plan import StepSpec

__all__ = ["ShapedLayout", "shaped_layout", "symbol_buffers"]

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


def symbol_buffers(buffers: Sequence[Buffer]) -> dict[int, tuple[str, ...]]:
    """The plan buffers that hold symbols' values (int64, in the listed order)."""
    return {i: b.symbols for i, b in enumerate(buffers) if b.symbols}


class GridCounter:
    """Every dispatch's workgroup counts, their size expressions parsed once."""

    def __init__(self, steps: Sequence[StepSpec]) -> None:
        self.steps = steps
        self.exprs: dict[str, SizeExpr] = {}
        for s in steps:
            for d in s.dispatches:
                for g in d.grid:
                    if isinstance(g, str) and g not in self.exprs:
                        self.exprs[g] = size_expr(g)

    def count(self, binding: Binding, most: Sequence[int], where: str) -> list[list[Triple]]:
        out = []
        for s in self.steps:
            row = []
            for d in s.dispatches:
                g = tuple(x if isinstance(x, int) else self.exprs[x](binding.symbols)
                          for x in d.grid)
                if any(n > m for n, m in zip(g, most)):
                    raise InputError(f"{where}: with {binding.describe()}, dispatch {d.name} "
                                     f"would need {list(g)} workgroups and the device allows "
                                     f"at most {list(most)}; run smaller shapes")
                row.append((g[0], g[1], g[2]))
            out.append(row)
        return out


def shaped_layout(binding: Binding, buffers: Sequence[Buffer], grids: list[list[Triple]],
                  input_bytes: Sequence[int], output_bytes: Sequence[int], checks: int,
                  alignment: int) -> ShapedLayout:
    """The placements of ``binding`` (see :class:`ShapedLayout`)."""
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
                        max(upload_bytes, 4), download, max(cursor, 4))


def nbytes(shape: Sequence[int], itemsize: int) -> int:
    return math.prod(shape) * itemsize


def _round16(n: int) -> int:
    return -(-n // 16) * 16
