"""Static memory planning: every tensor a kernel writes gets a workspace offset.

Lifetimes come from the step order; a tensor's range is reused once its last reader has
run (first fit over the free gaps, 64-byte aligned). Graph inputs keep their own ranges
(they persist between runs) and outputs live to the end. The result is one workspace
size, so a model allocates nothing while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class MemoryPlan:
    offsets: dict[int, int]  # buffer key -> workspace offset
    workspace_bytes: int
    naive_bytes: int  # what one buffer per tensor would take, for the report


def plan_memory(sizes: dict[int, int], first_use: dict[int, int], last_use: dict[int, int],
                pinned: set[int] | None = None) -> MemoryPlan:
    """Assign offsets; ``pinned`` keys (graph inputs) never share their range."""
    pinned = pinned or set()
    offsets: dict[int, int] = {}
    live: list[tuple[int, int, int]] = []  # (offset, size, last_use)
    order = sorted(sizes, key=lambda k: (first_use[k], -sizes[k]))
    peak = 0
    for key in order:
        size = _align(max(sizes[key], 1))
        start = first_use[key]
        live = [blk for blk in live if blk[2] >= start]
        live.sort()
        offset, cursor = None, 0
        for blk_off, blk_size, _ in live:
            if blk_off - cursor >= size:
                offset = cursor
                break
            cursor = max(cursor, blk_off + blk_size)
        if offset is None:
            offset = cursor
        offsets[key] = offset
        end = 1 << 62 if key in pinned else last_use[key]
        live.append((offset, size, end))
        peak = max(peak, offset + size)
    naive = sum(_align(max(s, 1)) for s in sizes.values())
    return MemoryPlan(offsets, peak, naive)
