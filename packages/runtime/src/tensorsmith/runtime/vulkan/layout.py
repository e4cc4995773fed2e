"""Where each plan buffer lives: a range of the params or the workspace VkBuffer.

The compiler's memory plan already places workspace tensors by lifetime (reusing ranges)
and params back to back, all 64-byte aligned. A storage-buffer descriptor's offset must
be a multiple of the device's minStorageBufferOffsetAlignment (at most 256 by the spec,
16-64 on most devices); when the plan's offsets already are, they are used as they are,
keeping the plan's memory reuse. Otherwise every buffer gets its own aligned range
(correct, only larger), and the params are re-packed on upload.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorsmith.runtime.plan import Buffer

__all__ = ["Layout", "Placement", "place"]

#: Bytes of a binding for a tensor with no elements: Vulkan has no empty ranges.
MIN_RANGE = 4


@dataclass(frozen=True)
class Placement:
    region: str  # "params" or "workspace"
    offset: int
    range: int  # bytes the descriptor covers: the tensor's, or MIN_RANGE when empty


@dataclass(frozen=True)
class Layout:
    placements: list[Placement]
    params_size: int
    workspace_size: int
    repacked: bool  # params must be copied buffer by buffer to their new offsets


def place(buffers: list[Buffer], alignment: int, workspace_bytes: int,
          params_bytes: int) -> Layout:
    alignment = max(alignment, 1)
    if all(b.offset % alignment == 0 for b in buffers):
        placements = [Placement("params" if b.kind == "param" else "workspace", b.offset,
                                max(b.nbytes, MIN_RANGE)) for b in buffers]
        return Layout(placements, _end(placements, "params", params_bytes),
                      _end(placements, "workspace", workspace_bytes), repacked=False)
    cursor = {"params": 0, "workspace": 0}
    placements = []
    for b in buffers:
        region = "params" if b.kind == "param" else "workspace"
        size = max(b.nbytes, MIN_RANGE)
        placements.append(Placement(region, cursor[region], size))
        cursor[region] += -(-size // alignment) * alignment
    return Layout(placements, max(cursor["params"], MIN_RANGE),
                  max(cursor["workspace"], MIN_RANGE), repacked=True)


def _end(placements: list[Placement], region: str, declared: int) -> int:
    ends = [p.offset + p.range for p in placements if p.region == region]
    return max([declared, MIN_RANGE, *ends])
