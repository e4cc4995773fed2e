"""The register tile every tiled CPU rule builds: matrix products, convolution and
pooling windows, Winograd's output transform.

Loops, outer to inner: the fused parallel outer loops (other spatial axes, the row
block's outer loop and the vector block's outer loop, in one of three orders), an
optional serial tile of row and column blocks (cache blocking), then the reduce loops
(the longest optionally split, or run in cache-sized blocks outermost), the ``rows``
loop (unrolled) and the ``vec`` loop (vectorized). The tile is accumulated in a local
buffer (``cache_write``) and written back once, with the elementwise ops after it.

The rules in cpu.py decide every field of :class:`Tile` through ``choose``; this module
only turns a tile into schedule steps, and says which tiles it cannot build correctly
(:func:`check_tile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..te.lower import VECTOR_LANES_MAX
from ..te.schedule import Schedule
from .cpu_shapes import fuse_all, panel_layout, row_panel_layout
from .knobs import conflict_unless

#: Register tile elements at most: beyond this the tile spills to the stack.
LOCAL_MAX = 512
#: Copies of the innermost loop that nested unrolled loops make: beyond these, LLVM's
#: compile time explodes (seconds to a minute per kernel) for no speed.
UNROLL_MAX_VECTOR = 32
UNROLL_MAX_SCALAR = 8
#: ... except over a Winograd output transform, whose unrolled body is one multiply-add
#: with constant coefficients: 6 x 6 table entries times a few rows stay cheap to compile.
UNROLL_MAX_TABLE = 160


@dataclass(frozen=True)
class Operand:
    """A product's input that a tile may read in another layout (as panels)."""

    name: str
    rank: int
    at_run_time: bool  # an input, not a constant: the kernel copies it (else ``build``)
    dots: bool = False  # an integer product's [k / 4, j, 4] (ops/integer.py)


@dataclass(frozen=True)
class TileShape:
    """What a stage offers a register tile: its loops and which play which part."""

    stage: str
    spatial: tuple[str, ...]
    reduce: tuple[str, ...]
    extent: dict[str, int]
    row: str | None  # the axis the tile's rows run over (None: one row)
    kaxis: str  # the longest reduce axis: the one ``ksplit`` and ``kblock`` split
    reduce_orders: tuple[tuple[str, ...], ...]  # the reduce loops' orders ``korder`` picks
    epilogue: str | None  # the elementwise output its write-back may compute
    weight: str | None = None  # a convolution's weight, stored for lanes over channels
    panel: Operand | None = None  # a product's B, stored as panels when packed
    row_panel: Operand | None = None  # a product's A, stored as row panels when packed
    weight_rank: int = 4  # 5: an integer convolution's [O, C / 4, KH, KW, 4]


@dataclass(frozen=True)
class Tile:
    """Every choice a register tile leaves open (the rules' knobs of the same names)."""

    vec: int
    rows: int
    outer_order: str  # "natural", "cols_first" or "rows_first"
    parallel: bool
    tile_rows: int = 1
    tile_cols: int = 1
    inner_order: str = "rc"
    ksplit: int = 0
    korder: int = 0
    rows_pos: str = "inner"
    kpos: str = "inner"
    unroll_rows: bool = True
    unroll_k: bool = False
    vectorize: bool = True
    cache: bool = True
    epilogue: bool = True
    flatten: bool = False  # a 1x1 convolution: one vector axis over the whole image
    kblock: int = 0
    kblock_pos: str = "outer"  # "outer": blocks of k outermost (C written back once per
    # block for all of it); "tile": inside each thread's block of rows and panels, whose
    # part of C stays in cache across the blocks of k
    unroll_reduce: bool = False
    vec_axis: str = "cols"  # "channels": lanes over output channels; "block": over a
    # blocked layout's channel lanes (its last axis)
    cvec: int = 0
    crows: int = 0
    pack: bool = False
    pack_rows: bool = False  # A[i, k] as row panels [i / rows, k, rows]
    cblocks: int = 1  # "block": blocks of output channels per tile


def tile_columns(shape: TileShape, t: Tile) -> int:
    """Lanes of one tile row."""
    if t.vec_axis == "channels":
        return t.cvec
    cols = shape.extent[shape.spatial[-1]]
    if t.flatten and t.vec_axis != "block":
        cols *= shape.extent[shape.spatial[-2]]
    return min(t.vec, cols)


def check_tile(shape: TileShape, t: Tile) -> None:
    """Raise ``KnobConflict`` for a tile that would spill, compute wrongly or take LLVM
    minutes to compile."""
    cols = tile_columns(shape, t)
    rows = t.crows if t.vec_axis == "channels" else t.rows * t.cblocks
    conflict_unless(not t.cache or rows * cols <= LOCAL_MAX, "the tile spills")
    conflict_unless(t.kpos != "outer" or (not t.cache and t.ksplit),
                    "a k loop above a cached tile would overwrite partial sums")
    conflict_unless(not t.kblock or (t.cache and not t.ksplit),
                    "blocks of k keep their partial sums in a cached tile")
    conflict_unless(not t.pack_rows or (shape.row_panel is not None and shape.row is not None
                                        and t.vec_axis == "cols" and not t.flatten),
                    "row panels need a product's rows")
    conflict_unless(not t.kblock or t.kblock_pos == "outer" or t.tile_rows > 1
                    or t.tile_cols > 1, "blocks of k inside the tile need a block of tiles")
    unrolled = (rows if t.unroll_rows else 1) * (t.ksplit if t.unroll_k and t.ksplit else 1)
    if t.unroll_reduce:
        unrolled *= math.prod(shape.extent[r] for r in shape.reduce)
        conflict_unless(unrolled <= UNROLL_MAX_TABLE and not t.ksplit,
                        "the unrolled table is too large")
        return
    conflict_unless(unrolled <= (UNROLL_MAX_VECTOR if t.vectorize and cols > 1
                                 else UNROLL_MAX_SCALAR), "the unrolled body is too large")


def build_tile(s: Schedule, shape: TileShape, t: Tile) -> bool:
    """Schedule ``shape.stage`` as tile ``t``; returns whether the tile is cached (its
    write-back is where an epilogue can ride)."""
    st = shape.stage
    spatial: list[str | None] = list(shape.spatial)
    block_inner: str | None = None
    vec_axis, row_axis, vec, rows = spatial[-1], shape.row, t.vec, t.rows
    if t.vec_axis == "channels":
        # Lanes over output channels, rows over output columns: any stride or image
        # width fills whole registers. A convolution's weights are stored with a block of
        # output channels last, so each (c, ry, rx) reads its lanes contiguously and a
        # block's weights are one sequential run (blocks of the vector width when it
        # divides the channels, else the whole output-channel axis last).
        if shape.weight is not None:  # a convolution: rows over the flattened image
            spatial[-2:] = [s.fuse(st, spatial[-2], spatial[-1])]
        vec_axis, row_axis, vec, rows = spatial[1], spatial[-1], t.cvec, t.crows
        if shape.weight is not None:  # (a Winograd output transform reads no weight)
            if shape.extent[vec_axis] % vec == 0:
                s.layout(st, shape.weight, (0, 2, 3, 4, 1), (0, vec))
            else:
                s.layout(st, shape.weight, (1, 2, 3, 0))
    elif t.vec_axis == "block":
        # A blocked layout ([N, C / b, H, W, b]): lanes over the block's channels, rows
        # over the output row or (``flatten``) the whole image, ``cblocks`` blocks of
        # output channels unrolled in the tile. The weights are stored blocked likewise.
        if t.flatten:
            spatial[2:4] = [s.fuse(st, spatial[2], spatial[3])]
            row_axis = spatial[2]
        if shape.weight is not None:
            # (an integer convolution's four dot steps stay last: [O / b, C / 4, KH, KW,
            # b, 4], each block's dot one contiguous 4 x b bytes)
            dots = (5,) if shape.weight_rank == 5 else ()
            s.layout(st, shape.weight, (0, 2, 3, 4, 1, *dots), (0, shape.extent[spatial[-1]]))
        if t.cblocks > 1:
            spatial[1], block_inner = split_or_keep(s, st, spatial[1], shape.extent[spatial[1]],
                                                    t.cblocks)
    elif t.flatten:
        spatial[-2:] = [s.fuse(st, spatial[-2], spatial[-1])]
        vec_axis = spatial[-1]
    jo, ji = s.split(st, vec_axis, vec)
    if t.pack and shape.panel is not None:
        # B[k, j] stored as panels [j / vec, k, vec] (the last one zero-padded): the k loop
        # then walks one contiguous run instead of a row of B (up to a page apart) per step.
        _store_as(s, st, shape.panel, panel_layout(shape.panel.rank, vec, shape.panel.dots))
    if t.pack_rows and shape.row_panel is not None:
        # A[i, k] stored as row panels [i / rows, k, rows]: the tile's rows of one step
        # of k are then adjacent, where a row of A is K elements from the next (at K a
        # multiple of 1024 every row of the tile falls in the same L1 set, and the panels
        # of B streaming through evict them).
        _store_as(s, st, shape.row_panel, row_panel_layout(shape.row_panel.rank, rows))
    io = ii = None
    if row_axis is not None:
        io, ii = s.split(st, row_axis, rows)
    ioi = joi = None
    if t.tile_rows > 1 and io is not None:
        io, ioi = split_or_keep(s, st, io, s[st].leaf(io).extent, t.tile_rows)
    if 1 < t.tile_cols < s[st].leaf(jo).extent:
        jo, joi = s.split(st, jo, t.tile_cols)
    others = [a for a in spatial if a not in (row_axis, vec_axis)]
    if t.outer_order == "cols_first":
        outer = [*others, jo, io]
    elif t.outer_order == "rows_first" and t.vec_axis == "block":
        # pixels above the blocks of output channels: each tile's input is read once and
        # every block's weights come from cache (for weights that fit it)
        outer = [others[0], io, *others[1:], jo]
    elif t.outer_order == "rows_first":
        outer = [*others, io, jo]
    else:
        outer = [io if a == row_axis else jo if a == vec_axis else a for a in spatial]
    outer = [x for x in outer if x is not None]
    inner_tile = [x for x in (ioi, joi) if x is not None]
    if t.inner_order == "cr":
        inner_tile.reverse()
    reduce: list[str] = []
    ko = ki = kb = None
    for name in shape.reduce_orders[t.korder]:
        if name == shape.kaxis and 0 < t.kblock < shape.extent[name]:
            kb, name = s.split(st, name, t.kblock)
        if name == shape.kaxis and t.ksplit:
            ko, ki = s.split(st, name, t.ksplit)
            reduce += [ko, ki]
        else:
            reduce.append(name)
    if ii is not None and t.rows_pos == "mid" and ko is not None:
        reduce.insert(reduce.index(ko) + 1, ii)
        below = [*reduce, block_inner, ji]
    else:
        below = [*reduce, ii, block_inner, ji]
    if t.kpos == "outer" and ko is not None:
        below.remove(ko)
        order = [*outer, ko, *inner_tile, *below]
    else:
        order = [*outer, *inner_tile, *below]
    if kb is not None and t.kblock_pos == "tile" and inner_tile:
        order.insert(len(outer), kb)  # inside the parallel loop, above the block of tiles
    elif kb is not None:  # blocks of k outermost, the parallel loop inside
        order.insert(0, kb)
    s.reorder(st, *[x for x in order if x is not None])
    fused = fuse_all(s, st, outer)
    at = inner_tile[-1] if inner_tile else fused
    cached = t.cache and at is not None
    if cached:
        s.cache_write(st, at)  # type: ignore[arg-type]
    if ii is not None and t.unroll_rows:
        s.unroll(st, ii)
    if block_inner is not None and t.unroll_rows:
        s.unroll(st, block_inner)
    if ki is not None and t.unroll_k:
        s.unroll(st, ki)
    if t.unroll_reduce:
        for name in reduce:
            s.unroll(st, name)
    if t.vectorize and s[st].leaf(ji).extent <= VECTOR_LANES_MAX:
        s.vectorize(st, ji)
    if fused is not None and t.parallel and s[st].leaf(fused).extent > 1:
        s.parallel(st, fused)
    if cached and t.epilogue and shape.epilogue is not None and kb is None:
        try:
            s.fuse_epilogue(st, shape.epilogue)
        except ValueError:  # the consumer reads the stage at other indices
            s.steps.pop()
    return cached


def _store_as(s: Schedule, stage: str, operand: Operand,
              layout: tuple[tuple[int, ...], tuple[int, int]]) -> None:
    """Read ``operand`` in ``layout`` (order, block): a constant is stored so by
    ``build``; an input the kernel copies first."""
    order, block = layout
    if operand.at_run_time:
        s.pack(stage, operand.name, order, block)
    else:
        s.layout(stage, operand.name, order, block)


def split_or_keep(s: Schedule, stage: str, leaf: str, extent: int, factor: int
           ) -> tuple[str | None, str | None]:
    """(outer, inner) of ``leaf`` split by ``factor``; either is None when it would be 1."""
    if factor <= 1:
        return leaf, None
    if factor >= extent:
        return None, leaf
    return s.split(stage, leaf, factor)
