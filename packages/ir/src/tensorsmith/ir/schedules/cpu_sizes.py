"""How big a CPU register tile is: what fits the target's vector registers, and when a
depthwise convolution reads its padding in place instead of copying it first."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..target import BASELINE_CPU, CpuResources
from ..te.schedule import Stage, input_tensors
from .cpu_shapes import axis_reads, depthwise_conv, element_bytes, input_pitch

#: Rows of a register tile at most: beyond this the unrolled body only grows.
MAX_TILE_ROWS = 12
#: What one more register tile costs, in rows of multiply-adds: its loads of the vector
#: operand, loop and write-back. Fewer, fuller tiles win until the tail wastes more.
TILE_OVERHEAD_ROWS = 1.5
#: A strided depthwise convolution reads its padding in place when at least this share
#: of its register tiles reads none (``reads_padding_in_place``).
INTERIOR_SHARE_TO_INLINE = 0.5
#: Vector registers a depthwise tile leaves for the input vectors being loaded.
DEPTHWISE_SPARE_REGISTERS = 3
#: Groups of output-channel blocks a 1x1 convolution needs before it runs in passes over
#: its input channels (``pointwise_kblock``): two per thread on two threads.
KBLOCK_MIN_GROUPS = 4
#: Passes over the input channels of a 1x1 convolution at most, where the L2 allows.
KBLOCK_MAX_PASSES = 8
#: Rows of a blocked window's tile at most (one vector each).
MAX_BLOCKED_ROWS = 8
#: A depthwise convolution whose output rows are at most this wide reads its padding
#: in place (``reads_padding_in_place``).
SMALL_DEPTHWISE_WIDTH = 8


@dataclass(frozen=True)
class ProductBlocks:
    """How a product too large for the caches is cut (``CpuRules.blocking``): blocks of
    ``kblock`` elements of its reduction (0: one block), ``row_tiles`` register tiles of
    rows per block of rows, ``panels`` panels of ``B`` per group of columns."""

    kblock: int = 0
    row_tiles: int = 1
    panels: int = 1


def panel_group(count: int, most: int) -> int:
    """Panels of ``B`` per group, at most ``most`` of ``count``: a divisor of ``count``
    where one is near, since a partial last group runs its tiles with a guard (24 panels
    of Whisper's fc2 in 12s, not 16 + 8: 22.1 -> 15.7 ms on Zen 3)."""
    most = min(count, most)
    even = max(d for d in range(1, most + 1) if count % d == 0)
    return even if 2 * even >= most else most


def register_tile(resources: CpuResources, cols: int, rows: int,
                  element_bytes: int = 4) -> tuple[int, int]:
    """``(vec, rows)`` of a register tile over ``cols`` x ``rows`` outputs.

    ``vec`` is a power-of-two number of whole vector registers per tile row (at most a
    quarter of the register file: 2 on AVX2, 4 on AVX-512), the widest whose masked tail
    wastes at most a quarter of its lanes. ``rows`` is at most what is left after one row
    of the other operand and a broadcast register (and :data:`MAX_TILE_ROWS`); a tail
    tile is clamped to the last row (lowering keeps branches out of the tile), so of the
    sizes that fit, the one with the least work counting the recomputed rows and
    :data:`TILE_OVERHEAD_ROWS` per tile wins (7 rows: 4 + 3 rather than 6 + 6)."""
    lanes = resources.lanes(element_bytes)
    widest = max(1, resources.vector_registers // 8)
    widths = [lanes * (1 << p) for p in range(widest.bit_length() - 1, -1, -1)]
    vec = widths[-1]
    for block in widths[:-1]:
        if -(-cols // block) * block - cols <= block // 4 * max(1, cols // block):
            vec = block
            break
    per_row = -(-min(vec, cols) // lanes)
    budget = max(1, min(MAX_TILE_ROWS, (resources.vector_registers - per_row - 1) // per_row))
    if rows <= budget:
        return vec, max(1, rows)
    return vec, min(range(budget, 0, -1),
                    key=lambda f: -(-rows // f) * (f + TILE_OVERHEAD_ROWS))


def depthwise_tile(resources: CpuResources, st: Stage) -> tuple[int, int]:
    """``(vec, rows)`` of :meth:`CpuRules.depthwise`'s register tile.

    One register per row: the reuse is between rows (each input vector serves up to KH
    of them), so rows are worth more than width. LLVM unrolls the taps and keeps each
    weight's broadcast in a register for the whole tile; the rows get what those leave,
    less a few for the input vectors in flight (at the exact limit LLVM spilled: 4 rows
    beat 6 on AVX2 by 1.3x). A whole small image is one tile even at the limit: a clamped
    second tile of a 7-row image cost 3x (its rows' padding conditions stay in the loop).
    """
    op = st.tensor.op
    assert op is not None
    height = op.axes[2].extent
    vec = resources.lanes(element_bytes(st))
    taps = math.prod(a.extent for a in op.reduce_axes)
    kept = 0 if op.tag.startswith("pool_") else \
        taps if taps <= resources.vector_registers * 3 // 4 else 1
    free = resources.vector_registers - kept - DEPTHWISE_SPARE_REGISTERS
    whole = height <= free + DEPTHWISE_SPARE_REGISTERS
    rows = max(1, min(height if whole else free, MAX_TILE_ROWS))
    # as many tiles as that takes, but rows shared evenly between them: 14 rows as 7 + 7,
    # not 12 + a clamped tile of 12 that computes 2 (EfficientNet's 5x5 layers, 1.7x)
    tiles = -(-height // rows)
    return vec, -(-height // tiles)


def blocked_tile(resources: CpuResources, st: Stage) -> tuple[int, int]:
    """``(rows, cblocks)`` of :meth:`CpuRules.blocked`'s register tile; ``cblocks`` is 0
    for a window of one block (a depthwise convolution, a pooling window).

    A dense convolution holds ``cblocks`` blocks of output channels (up to an eighth of
    the register file: 2 of AVX2's 16, 4 of AVX-512's 32, where they divide the blocks)
    by ``rows`` pixels, what is left after one weight vector per block and a broadcast
    (6 on both), sized over the flattened image as :func:`register_tile` sizes rows. A
    window of one block keeps its taps' weights in registers where they fit and gives
    the rows the rest (as :func:`depthwise_tile`), shared evenly along the output row.
    """
    op = st.tensor.op
    assert op is not None
    regs = resources.vector_registers
    per_block = -(-op.axes[4].extent // resources.lanes(element_bytes(st)))
    if len(op.reduce_axes) > 2:
        blocks = op.axes[1].extent
        cblocks = max(c for c in (1, 2, 3, 4) if c <= max(1, regs // 8) and blocks % c == 0)
        width = cblocks * per_block
        budget = max(1, min(MAX_TILE_ROWS, (regs - width - 1) // width))
        pixels = op.axes[2].extent * op.axes[3].extent
        if pixels <= budget:
            return pixels, cblocks
        return min(range(budget, 0, -1),
                   key=lambda f: -(-pixels // f) * (f + TILE_OVERHEAD_ROWS)), cblocks
    taps = math.prod(a.extent for a in op.reduce_axes)
    kept = 0 if op.tag.startswith("pool_") else taps if taps <= regs * 3 // 4 else 1
    free = (regs - kept * per_block - DEPTHWISE_SPARE_REGISTERS) // per_block
    width = op.axes[3].extent
    rows = max(1, min(free, width, MAX_BLOCKED_ROWS))
    tiles = -(-width // rows)
    return -(-width // tiles), 0


def pointwise_kblock(resources: CpuResources, st: Stage, cblocks: int) -> int:
    """Blocks of input channels per pass of a 1x1 convolution over channel-blocked
    activations (0: one pass), for :meth:`CpuRules.blocked`, whose tile holds
    ``cblocks`` blocks of output channels.

    Each thread walks its groups of ``cblocks`` output blocks, and every group reads the
    whole input: an input over half the L2 cache is then read from L3 once per group. In
    passes over blocks of input channels (partial sums kept in the output, the
    elementwise ops after the last pass) a pass's slice of the input stays in L2 while
    every group reads it: the largest divisor of the channel blocks whose slice takes at
    most half the L2, or up to all of it where half would take more than
    :data:`KBLOCK_MAX_PASSES` passes. Worth it where a thread has several groups (at
    least :data:`KBLOCK_MIN_GROUPS` in all) and the input has at least as many channels
    as the output, so the partial sums it writes back weigh less than the reads it saves.
    ResNet-50's 1x1 layers on Zen 3 (512 KiB L2): 1.2x at 56x56 (8 passes of 4 blocks
    of 8), 1.5x at 28x28, 1.2-1.35x at 14x14; MobileNetV2's expansions (few input
    channels, many output ones) lost 10% in passes. A 3x3 window reads each input 9 times
    per load and lost 5%, so it keeps one pass."""
    op = st.tensor.op
    assert op is not None
    if len(op.reduce_axes) != 4 or any(op.reduce_axes[i].extent != 1 for i in (1, 3)):
        return 0
    blocks, outputs = op.reduce_axes[0].extent, op.axes[1].extent
    if outputs // max(1, cblocks) < KBLOCK_MIN_GROUPS or blocks < outputs:
        return 0
    data = input_tensors(st.tensor)[0]
    per_block = math.prod(data.shape[2:]) * element_bytes(st)
    half = resources.l2_bytes // 2
    if blocks * per_block <= half:
        return 0
    divisors = [d for d in range(1, blocks) if blocks % d == 0]
    block = max((d for d in divisors if d * per_block <= half), default=0)
    if block and blocks // block > KBLOCK_MAX_PASSES:
        # each pass is a parallel loop the threads wait for each other after: where half
        # the L2 would take more, slices up to the whole L2 (256->64 at 56x56 on Zen 3: 8
        # passes of 4 blocks ran as fast as 16 of 2)
        block = min((d for d in divisors if blocks // d <= KBLOCK_MAX_PASSES
                     and d * per_block <= resources.l2_bytes), default=block)
    return block


def pixels_outer(resources: CpuResources, st: Stage) -> bool:
    """Whether a 1x1 convolution over channel-blocked activations walks its pixel tiles
    above its groups of output blocks (``outer_order="rows_first"``) by default.

    A strided one (ResNet's downsampling) reads only part of each cache line of its
    input (at stride 2, every other pixel's block), and every group of output blocks
    reads all of it: an input over the L2 cache then streams from L3 once per group.
    Pixels outer, each tile's input is read once and the weights come from cache. On
    Zen 3 (AVX2, 512 KiB L2), ResNet-50's downsampling layers ran 1.23x faster (256 ->
    512 from 56x56), 1.37x (512 -> 1024 from 28x28) and 1.04x (1024 -> 2048 from 14x14).
    Stride-1 ones keep their input in L2 in passes instead (:func:`pointwise_kblock`;
    pixels outer lost up to 27% there), and strided 3x3 windows gained nothing."""
    op = st.tensor.op
    assert op is not None
    if len(op.reduce_axes) != 4 or any(op.reduce_axes[i].extent != 1 for i in (1, 3)):
        return False
    data = input_tensors(st.tensor)[0]
    if data.ndim != 5:
        return False
    reads = axis_reads(st, data, 2)
    if reads is None or reads[0] < 2:
        return False
    return math.prod(data.shape) * element_bytes(st) > resources.l2_bytes


def interior_share(pad: Stage, reader: Stage, tile: tuple[int, int]) -> float:
    """The share of ``reader``'s register tiles (``tile`` = columns, rows) that read no
    padding of ``pad``: those run without selects when the padding is read in place."""
    op, conv = pad.tensor.op, reader.tensor.op
    assert op is not None and conv is not None
    data = input_tensors(pad.tensor)[0]
    share = 1.0
    for axis, size in ((3, tile[0]), (2, tile[1])):
        reads = axis_reads(reader, pad.tensor, axis)
        if reads is None:
            return 0.0
        stride, reach = reads
        out, padded, inner = conv.axes[axis].extent, op.axes[axis].extent, data.shape[axis]
        before = (padded - inner) // 2  # the padding before the data (about half)
        tiles = -(-out // size)
        inside = sum(1 for t in range(tiles)
                     if t * size * stride >= before and t * size + size <= out
                     and (t * size + size - 1) * stride + reach < before + inner)
        share *= inside / tiles
    return share


def reads_padding_in_place(pad: Stage, readers: dict[int, list[Stage]],
                           out_ids: set[int], resources: CpuResources = BASELINE_CPU) -> bool:
    """True for a padding stage whose one reader is a pooling window, a depthwise
    convolution of a small image, or a strided depthwise convolution most of whose
    register tiles read no padding: inline it there instead of materialising it.

    Inlined, the padded read is ``select(inside, x[clamped], fill)``: lowering gives the
    register tiles that read no padding a body without the selects (te/inside.py), and
    codegen emits the border tiles' reads as masked span loads. A pooling window reads
    each input element about once per output, so copying the padded input first cost as
    much as the pooling. A depthwise convolution at stride 1 keeps the copy: its tiles
    are small against the image, so many are border tiles, and their masked loads cost
    more than the copy (MobileNetV2's 56x56 layer 1.7x) -- except on images one vector
    wide, whose copy is mostly padding. At stride 2 the copy reads and writes four times
    the output's size: inlined, MobileNetV2's 112x112 layer ran 1.5x faster -- where
    most tiles are interior (:func:`interior_share`; EfficientNet's 5x5 layer at 28x28,
    with a sixth of them, ran 2x slower inlined).
    """
    if not pad.name.endswith("_pad") or pad.tensor.op is None or pad.tensor.uid in out_ids:
        return False
    users = readers.get(pad.tensor.uid, [])
    if len(users) != 1:
        return False
    op = users[0].tensor.op
    assert op is not None
    if op.tag.startswith("pool_"):
        return True
    if op.tag == "conv2d_blocked":  # lanes over channels: every tap is a whole vector
        return len(op.reduce_axes) == 2
    return depthwise_conv(users[0]) and (
        op.axes[3].extent <= SMALL_DEPTHWISE_WIDTH
        or ((axis_reads(users[0], pad.tensor, 3) or (0, 0))[0] > 1
            and interior_share(pad, users[0], depthwise_tile(resources, users[0]))
            >= INTERIOR_SHARE_TO_INLINE))


def small_image(st: Stage, resources: CpuResources = BASELINE_CPU) -> bool:
    """A dense convolution whose whole output image fits one vector block (7x7).

    Vectorized along an output row, 7 of 16 lanes did work. Over the flattened image,
    49 of 64 lanes do; the input then is read at ``(f // 7) * Wp + f % 7``, rows 7 long
    and ``Wp`` apart, which codegen loads as one span and a constant shuffle when the
    rows are that close (stride 1: the span is under two vectors' lanes).
    """
    op = st.tensor.op
    assert op is not None
    _, _, height, width = (a.extent for a in op.axes)
    if op.tag != "conv2d" or op.reduce_axes[0].extent == 1 or width >= 16:
        return False
    lanes, _ = register_tile(resources, height * width, 1, element_bytes(st))
    if height * width > lanes:
        return False
    pitch = input_pitch(st)
    return pitch is not None and (height - 1) * pitch + width <= 2 * lanes
