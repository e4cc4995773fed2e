"""Default CPU schedules, sized by the CPU they compile for.

Rules, per stage of a fused kernel (``CpuRules.stage`` picks one by the stage's kind):
- non-output, non-reduction stages are inlined into their readers;
- a reduction whose output's last axis is also the last index of an input it reads
  (matmul's ``B[k, j]``) runs as a register tile: ``[outer spatial] io, jo | k | ii, ji``
  with ``ii`` rows unrolled and ``ji`` one vector block, accumulated in a local buffer
  over the whole reduction and written back once (with the elementwise ops after it);
  a constant ``B`` is stored as panels ``[N/vec, K, vec]`` so the ``k`` loop walks one
  contiguous run;
- convolution and pooling windows run the same register tile over output channels x
  output columns;
- other reductions fuse their spatial axes into one loop, which the thread pool splits
  into contiguous chunks; elementwise outputs are one flat loop in vector chunks;
- loops run in parallel only when the stage does enough work to pay for the wake-up.

The register tile comes from the target's vector unit (:class:`CpuResources`, which the
codegen plug-in reports): ``rows x vec`` accumulators plus the ``vec`` lanes of the
other operand and one broadcast must fit the vector registers, or every multiply-add
spills. That is 6 rows x 16 lanes (12 of 16 ymm) on AVX2 and 6 x 64 (24 of 32 zmm) on
AVX-512.

Every free parameter goes through ``choose(stage, knob, default)`` (knobs.py): the
auto-tuner searches exactly these knobs, starting from these defaults.

No rule reassociates a reduction: every output accumulates its terms one after another
in the compute's axis order, so a default build's rounding does not depend on tile sizes
or thread counts. Vector lanes along a reduction (``rfactor``) are a tuning choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..dtypes import itemsize
from ..target import BASELINE_CPU, CpuResources
from ..te.expr import Binary, Const, Expr, Load, Select, Var
from ..te.schedule import Schedule, Stage, input_tensors
from ..te.tensor import Tensor
from ..te.tiles import affine_form
from ..te.visit import collect_loads, free_vars, rewrite, substitute, walk
from .epilogue import fuse_epilogue_chain, stage_readers
from .knobs import Choose, default_choice

PARALLEL_MIN_WORK = 1 << 15
#: Elements per vector chunk of a flat elementwise loop (LLVM splits it into registers).
VECTOR_BLOCK = 64
#: Rows of a register tile at most: beyond this the unrolled body only grows.
MAX_TILE_ROWS = 12
#: What one more register tile costs, in rows of multiply-adds: its loads of the vector
#: operand, loop and write-back. Fewer, fuller tiles win until the tail wastes more.
TILE_OVERHEAD_ROWS = 1.5
#: A pointwise convolution (or small image) of at most this many output pixels puts
#: its vector lanes over output channels (``CpuRules.window``); measured on AVX2.
FLAT_CHANNEL_PIXELS = 256
#: A strided depthwise convolution reads its padding in place when at least this share
#: of its register tiles reads none (``reads_padding_in_place``).
INTERIOR_SHARE_TO_INLINE = 0.5
#: Vector registers a depthwise tile leaves for the input vectors being loaded.
DEPTHWISE_SPARE_REGISTERS = 3
#: A depthwise convolution whose output rows are at most this wide reads its padding
#: in place (``reads_padding_in_place``).
SMALL_DEPTHWISE_WIDTH = 8
#: Reductions at least this long may run in cache-sized blocks (``CpuRules.blocking``):
#: shorter ones gain little and would lose their fused epilogue.
BLOCKED_DEPTH = 1024


def schedule_cpu(outputs: list[Tensor], num_threads: int = 0,
                 resources: CpuResources = BASELINE_CPU, choose: Choose = default_choice,
                 constants: frozenset[str] = frozenset()) -> Schedule:
    """The default schedule of a fused kernel; ``constants`` names the input placeholders
    that are weights (a rule may store those in another layout)."""
    rules = CpuRules(Schedule(outputs), resources, choose, constants)
    for st in rules.s.stages:
        rules.stage(st)
    return rules.s


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


class CpuRules:
    """The rules applied to one schedule, with what they are sized by."""

    def __init__(self, s: Schedule, resources: CpuResources, choose: Choose,
                 constants: frozenset[str]) -> None:
        self.s = s
        self.res = resources
        self.choose = choose
        self.constants = constants
        self.out_ids = {t.uid for t in s.outputs}
        self.readers = stage_readers(s)

    def stage(self, st: Stage) -> None:
        op = st.tensor.op
        assert op is not None
        output = st.tensor.uid in self.out_ids
        if st.name.endswith("_pad") and not op.reduce_axes:
            self.padding(st, output)
        elif not output and not op.reduce_axes:
            self.s.compute_inline(st.name)
        elif op.reduce_axes and (op.tag == "conv2d" or op.tag.startswith("pool_")):
            self.window(st)
            self.epilogue(st)
        elif op.reduce_axes and last_axis_contiguous(st):
            if self.matmul(st):
                self.epilogue(st)
        elif op.reduce_axes:
            self.reduction(st)
        else:
            self.elementwise(st)

    # -- the rules -------------------------------------------------------------------
    def elementwise(self, st: Stage) -> None:
        """One flat loop over the elements in vector chunks; chunks shared by threads.

        Where the value selects between inputs by its leading coordinates (a Concat
        along channels), by rows instead: the rows are one loop the threads share, the
        rest a vector loop, and each select is then one branch per row (lowering turns
        a select that every lane agrees on into a branch)."""
        row_axes = select_rows(st, self.s)
        if row_axes and self.choose(st, "by_rows", True):
            self.rows(st, self.choose(st, "row_axes", row_axes), VECTOR_BLOCK)
            return
        fused = self.fuse_all(st, [lf.name for lf in st.leaves])
        if fused is None:
            return
        extent = st.leaf(fused).extent
        chunk = self.choose(st, "chunk", VECTOR_BLOCK if extent >= 2 * VECTOR_BLOCK else 0)
        if chunk and chunk < extent:
            outer, inner = self.s.split(st.name, fused, chunk)
            self.s.vectorize(st.name, inner)
            fused = outer
        self.parallel(st, fused)

    def padding(self, st: Stage, output: bool = False) -> None:
        """Inlined into its one reader where that pays (:func:`reads_padding_in_place`),
        else by rows: the rows (all axes but the last) are one loop the threads share,
        each row a vector loop over its columns. Flattening everything into one loop, as
        for other elementwise stages, left a division and a clamp of the flat index per
        lane, which turned every load into a gather; by rows, the row index is a scalar
        and the columns a contiguous, clamped span that codegen loads with a mask."""
        op = st.tensor.op
        assert op is not None
        if not output and self.choose(st, "inline", reads_padding_in_place(
                st, self.readers, self.out_ids, self.res)):
            self.s.compute_inline(st.name)
            return
        if len(op.axes) < 2:
            self.elementwise(st)
            return
        vec, _ = register_tile(self.res, op.axes[-1].extent, 1)
        self.rows(st, len(op.axes) - 1, vec)

    def rows(self, st: Stage, row_axes: int, vec: int) -> None:
        """The first ``row_axes`` axes fused into rows the threads share, the others
        fused into one vector loop per row."""
        names = [lf.name for lf in st.leaves]
        rows = self.fuse_all(st, names[:row_axes])
        cols = self.fuse_all(st, names[row_axes:])
        assert rows is not None and cols is not None
        _, xi = self.s.split(st.name, cols, self.choose(st, "row_vec", vec))
        self.s.vectorize(st.name, xi)
        self.parallel(st, rows)

    def matmul(self, st: Stage) -> bool:
        """Register tile: rows x a vector block of columns, accumulated in a local buffer
        over the whole reduction (or over one cache-sized block of it, see
        :meth:`blocking`), then written back. Returns whether elementwise ops after it
        may ride the write-back (not when it writes partial sums)."""
        op = st.tensor.op
        assert op is not None
        spatial = [a.var.name for a in op.axes]
        reduce = [a.var.name for a in op.reduce_axes]
        row_extent = op.axes[-2].extent if len(spatial) >= 2 else 1
        vec, rows = register_tile(self.res, op.axes[-1].extent, row_extent,
                                  _element_bytes(st))
        vec = self.choose(st, "vec", vec)
        jo, ji = self.s.split(st.name, spatial[-1], vec)
        panel = packable_weight(st, self.constants)
        if panel is not None and op.axes[-1].extent > vec and self.choose(st, "pack", True):
            # B[k, j] stored as panels [j / vec, k, vec] (the last one zero-padded): the k
            # loop then walks one contiguous run instead of a row of B (up to a page
            # apart) per step, which is what kept wide products far from the FMA peak.
            self.s.layout(st.name, panel, (1, 0, 2), (1, vec))
        kblock, panels = self.blocking(st, vec)
        tile_rows: list[str] = []
        outer = [*spatial[:-1], jo]
        if row_extent > 1:
            io, ii = self.s.split(st.name, spatial[-2], self.choose(st, "rows", rows))
            order = self.choose(st, "outer_order",
                                "cols_first" if kblock else self.matmul_order(st))
            outer = [*spatial[:-2], *((jo, io) if order == "cols_first" else (io, jo))]
            tile_rows = [ii]
        panels = self.choose(st, "tile_cols", panels)
        inner_tile: list[str] = []
        if panels > 1 and st.leaf(jo).extent > panels:
            jo_outer, joi = self.s.split(st.name, jo, panels)
            outer = [jo_outer if x == jo else x for x in outer]
            inner_tile = [joi]
        blocks: list[str] = []
        kblock = self.choose(st, "kblock", kblock) if len(reduce) == 1 else 0
        if 0 < kblock < op.reduce_axes[0].extent:
            ko, ki = self.s.split(st.name, reduce[0], kblock)
            blocks, reduce = [ko], [ki]
        self.s.reorder(st.name, *blocks, *outer, *inner_tile, *reduce, *tile_rows, ji)
        fused = self.fuse_all(st, outer)
        assert fused is not None
        self.s.cache_write(st.name, inner_tile[-1] if inner_tile else fused)
        for r in tile_rows:
            self.s.unroll(st.name, r)
        if st.leaf(ji).extent <= 64:
            self.s.vectorize(st.name, ji)
        self.parallel(st, fused)
        return not blocks

    def blocking(self, st: Stage, vec: int) -> tuple[int, int]:
        """``(kblock, panels)`` for a product too large for the caches, else ``(0, 1)``.

        When neither operand fits half the L2 cache and the reduction is long
        (:data:`BLOCKED_DEPTH`), the reduction runs in blocks of ``kblock`` (a divisor of
        its length near 256, partial sums kept in the output between blocks), and each
        thread walks ``panels`` panels of ``B`` (one block of them fits half the L2) for
        every block of rows before it moves on: a block of ``B`` is then read from memory
        once per block of rows, not once per register tile. The cost is a write-back per
        block and no fused epilogue."""
        op = st.tensor.op
        assert op is not None
        if len(op.axes) < 2 or len(op.reduce_axes) != 1:
            return 0, 1
        size = _element_bytes(st)
        depth, rows, cols = op.reduce_axes[0].extent, op.axes[-2].extent, op.axes[-1].extent
        half = self.res.l2_bytes // 2
        if depth < BLOCKED_DEPTH or depth * rows * size <= half or depth * cols * size <= half:
            return 0, 1
        kblock = next((d for d in sorted(range(128, 513), key=lambda d: abs(d - 256))
                       if depth % d == 0), 0)
        if not kblock:
            return 0, 1
        panels = max(1, half // (kblock * vec * size))
        return kblock, min(panels, -(-cols // vec))

    def matmul_order(self, st: Stage) -> str:
        """Which operand a thread keeps in cache while it walks the other.

        Rows outer (``natural``) reads the whole right-hand side ``B`` once per block of
        rows: right while ``B`` fits the L2 cache. Columns outer (``cols_first``) reads
        the whole left-hand side ``A`` once per panel of ``B`` instead: right for wide
        products with few rows (a vocabulary projection, a feed-forward layer of a short
        sequence), whose ``B`` is far larger than their ``A``."""
        op = st.tensor.op
        assert op is not None
        size = _element_bytes(st)
        rows, cols = op.axes[-2].extent, op.axes[-1].extent
        depth = math.prod(a.extent for a in op.reduce_axes)
        b_bytes, a_bytes = depth * cols * size, depth * rows * size
        return "cols_first" if b_bytes > self.res.l2_bytes // 2 and a_bytes < b_bytes \
            else "natural"

    def window(self, st: Stage) -> None:
        """Convolution/pooling: a register tile of output channels x output columns.

        Loops ``n, y, x.o, o.o | reduce | o.i (unrolled), x.i (vector)``: each weight is
        a scalar broadcast, each input row segment one contiguous vector load (for
        stride 1), and the input rows a tile reads stay in cache while every
        output-channel block uses them. A 1x1, stride-1, unpadded convolution is a matrix
        product over the flattened image, so its rows and columns are fused first and the
        vector runs along both (``flatten``); so is a small image (:func:`small_image`).
        With constant weights most convolutions put their lanes over output channels
        instead (:meth:`conv_channels`); depthwise ones have their own tile
        (:meth:`depthwise`).
        """
        op = st.tensor.op
        assert op is not None
        n, o, y, x = (a.var.name for a in op.axes)
        reduce = [a.var.name for a in op.reduce_axes]
        if depthwise_conv(st) or op.tag.startswith("pool_"):
            self.depthwise(st)
            return
        flat = op.tag == "conv2d" and (pointwise_conv(st) or small_image(st, self.res))
        flatten = flat and self.choose(st, "flatten", True)
        # Lanes over output channels, except for a pointwise convolution or small image
        # of many pixels (``flat``): that is a plain matrix product over the flattened
        # image already, whose long contiguous rows make the wider tile. Up to
        # FLAT_CHANNEL_PIXELS the channels win (rows then run over the flattened image:
        # 1.9x on ResNet-50's 1x1 convolutions at 7x7, 1.4x at 14x14, even at 28x28).
        weight = channel_vector_weight(st, self.constants)
        channel_vec = self.channel_block(st)
        pixels = op.axes[2].extent * op.axes[3].extent
        lanes_default = "channels" if channel_vec and (
            not flat or pixels <= FLAT_CHANNEL_PIXELS) else "cols"
        if weight is not None and self.choose(st, "vec_axis", lanes_default) == "channels":
            self.conv_channels(st, weight, channel_vec)
            return
        if flatten:
            cols = self.s.fuse(st.name, y, x)
            spatial_outer: list[str] = []
        else:
            cols, spatial_outer = x, [y]
        width = st.leaf(cols).extent
        vec, rows = register_tile(self.res, width, op.axes[1].extent, _element_bytes(st))
        co, ci = self.s.split(st.name, cols, self.choose(st, "vec", vec))
        tile_rows: list[str] = []
        outer = [n, o, *spatial_outer, co]
        if op.tag == "conv2d":
            oo, oi = self.s.split(st.name, o, self.choose(st, "rows", rows))
            outer, tile_rows = [n, *spatial_outer, co, oo], [oi]
        self.s.reorder(st.name, *outer, *reduce, *tile_rows, ci)
        fused = self.fuse_all(st, outer)
        assert fused is not None
        self.s.cache_write(st.name, fused)
        for r in tile_rows:
            self.s.unroll(st.name, r)
        self.s.vectorize(st.name, ci)
        self.parallel(st, fused)

    def depthwise(self, st: Stage) -> None:
        """One input channel per output channel (a depthwise convolution, a pooling
        window): a register tile of output rows x columns of one channel
        (``n, c, y.o, x.o | ry, rx | y.i, x.i``).

        The rows of a tile share the channel's weights (one broadcast per tap for all of
        them) and overlap in the input rows they read, so the unrolled taps load each
        input vector once for several rows. Lanes run along the output row."""
        op = st.tensor.op
        assert op is not None
        n, c, y, x = (a.var.name for a in op.axes)
        reduce = [a.var.name for a in op.reduce_axes]
        vec, rows = depthwise_tile(self.res, st)
        xo, xi = self.s.split(st.name, x, self.choose(st, "vec", vec))
        yo, yi = self.s.split(st.name, y, self.choose(st, "rows", rows))
        order = self.choose(st, "outer_order", "natural")
        outer = [n, c, xo, yo] if order == "cols_first" else [n, c, yo, xo]
        self.s.reorder(st.name, *outer, *reduce, yi, xi)
        fused = self.fuse_all(st, outer)
        assert fused is not None
        self.s.cache_write(st.name, fused)
        self.s.unroll(st.name, yi)
        self.s.vectorize(st.name, xi)
        self.parallel(st, fused)

    def channel_block(self, st: Stage) -> int:
        """Output channels per vector block of :meth:`conv_channels`: the widest
        power-of-two number of whole registers (at most a quarter of the register file)
        that divides the channels; 0 where none does (24 channels on AVX-512: lanes over
        the columns instead), since a partial block would need masks in every tile. For a
        grouped convolution, one group's output channels (RegNet's 8 or 16) where they
        fit such a block."""
        op = st.tensor.op
        assert op is not None
        lanes = self.res.lanes(_element_bytes(st))
        block = lanes * max(1, self.res.vector_registers // 8)
        per_group = group_outputs(st)
        if per_group:
            # A block is one group's output channels: they all read the same input
            # channels, so each input element is still one broadcast for the block.
            return per_group if 1 < per_group <= block and per_group % 4 == 0 else 0
        while block >= lanes:
            if op.axes[1].extent % block == 0:
                return block
            block //= 2
        return 0

    def conv_channels(self, st: Stage, weight: str, vec: int = 0) -> None:
        """A dense convolution with constant weights: vector lanes over output channels,
        rows over the output pixels (``n, o.o, p.o | c, ry, rx | p.i, o.i``, ``p`` the
        image flattened).

        Every image width and stride fills whole registers (output channels come in
        multiples of the vector width), no tile needs a lane mask, and each input element
        is one broadcast. The weights are stored with a block of output channels last
        (``[O / vec, C, KH, KW, vec]``), so each ``(c, ry, rx)`` reads its lanes in one
        load and a block's weights are one sequential run. The rows run over the
        flattened image, so only the image's last tile is partial: a 7x7 image is 49 rows,
        not seven rows of seven, and 56x56 at six rows wastes 2 of 3138, not 4 of every
        56 (flattened, ResNet's strided 3x3 and stem convolutions ran 1.2-1.35x faster on
        AVX2). A row's input address is a division of the pixel index, computed once per
        tile, outside the reduction."""
        op = st.tensor.op
        assert op is not None
        n, o, y, x = (a.var.name for a in op.axes)
        reduce = [a.var.name for a in op.reduce_axes]
        channels, width = op.axes[1].extent, op.axes[2].extent * op.axes[3].extent
        x = self.s.fuse(st.name, y, x)
        vec = vec or self.channel_block(st) or register_tile(self.res, channels, 1)[0]
        rows = register_tile(self.res, vec, width, _element_bytes(st))[1]
        vec = self.choose(st, "cvec", min(vec, channels))
        rows = self.choose(st, "crows", rows)
        if channels % vec == 0:
            self.s.layout(st.name, weight, (0, 2, 3, 4, 1), (0, vec))
        else:
            self.s.layout(st.name, weight, (1, 2, 3, 0))
        oo, oi = self.s.split(st.name, o, vec)
        xo, xi = self.s.split(st.name, x, rows)
        order = self.choose(st, "outer_order", self.conv_order(st))
        outer = {"natural": [n, oo, xo], "rows_first": [n, xo, oo],
                 "cols_first": [n, oo, xo]}[order]
        self.s.reorder(st.name, *outer, *reduce, xi, oi)
        fused = self.fuse_all(st, outer)
        assert fused is not None
        self.s.cache_write(st.name, fused)
        self.s.unroll(st.name, xi)
        if st.leaf(oi).extent <= 64:
            self.s.vectorize(st.name, oi)
        self.parallel(st, fused)

    def conv_order(self, st: Stage) -> str:
        """Blocks of output channels outermost (``natural``: each block's weights stay in
        cache while it sweeps the image) unless the weights are small and the image
        large: then each row of pixels meets every block of weights (``rows_first``)
        while it is in cache."""
        op = st.tensor.op
        assert op is not None
        size = _element_bytes(st)
        image = size * math.prod(input_tensors(st.tensor)[0].shape)
        weights = size * op.axes[1].extent * math.prod(a.extent for a in op.reduce_axes)
        if weights <= self.res.l2_bytes // 2 and image > self.res.l2_bytes:
            return "rows_first"
        return "natural"

    def reduction(self, st: Stage) -> None:
        """Softmax sums, reductions along a row: the spatial axes fused, in parallel."""
        op = st.tensor.op
        assert op is not None
        fused = self.fuse_all(st, [a.var.name for a in op.axes])
        if fused is not None:
            self.parallel(st, fused)

    def epilogue(self, st: Stage) -> None:
        """Fold the elementwise chain after a tiled reduction into its write-back."""
        if st.cache_at is not None:
            fuse_epilogue_chain(self.s, st, self.out_ids, self.readers)

    # -- helpers ---------------------------------------------------------------------
    def parallel(self, st: Stage, loop: str | None) -> None:
        if loop is None:
            return
        work = math.prod(leaf.extent for leaf in st.leaves)
        if self.choose(st, "parallel", work >= PARALLEL_MIN_WORK) and st.leaf(loop).extent > 1:
            self.s.parallel(st.name, loop)

    def fuse_all(self, st: Stage, names: list[str]) -> str | None:
        return fuse_all(self.s, st.name, names)


def fuse_all(s: Schedule, stage: str, names: Sequence[str]) -> str | None:
    """The loops ``names`` of ``stage`` fused into one, in order (None for no loops)."""
    if not names:
        return None
    fused = names[0]
    for name in names[1:]:
        fused = s.fuse(stage, fused, name)
    return fused


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
    vec = resources.lanes(_element_bytes(st))
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


def axis_reads(st: Stage, tensor: Tensor, axis: int) -> tuple[int, int] | None:
    """How stage ``st`` reads axis ``axis`` of ``tensor`` (an input of its own shape's
    rank): ``(stride, reach)``, the step per output index along that axis (a
    convolution's stride) and the span the other loops add (its taps, dilated); None
    where its reads there are not one affine form."""
    op = st.tensor.op
    assert op is not None
    bounds = {id(a.var): a.extent for a in (*op.axes, *op.reduce_axes)}
    own = id(op.axes[axis].var)
    forms = set()
    for load in collect_loads(op.body):
        if load.buffer is tensor:
            form = affine_form(load.indices[axis], bounds)
            if form is None:
                return None
            coefs = form[1]
            forms.add((coefs.get(own, 0),
                       sum(c * (bounds[v] - 1) for v, c in coefs.items() if v != own)))
    return forms.pop() if len(forms) == 1 else None


def _element_bytes(st: Stage) -> int:
    """Bytes per lane of the stage's arithmetic: narrower types compute in 32-bit lanes."""
    return max(4, itemsize(st.tensor.dtype))


def last_axis_contiguous(st: Stage) -> bool:
    """The output's last axis is the last index of some input read (matmul's B[k, j])."""
    op = st.tensor.op
    assert op is not None
    if not op.axes or op.axes[-1].extent == 1:
        return False
    last = op.axes[-1].var
    return any(isinstance(e, Load) and e.indices and e.indices[-1] is last
               for e in walk(op.body))


def packable_weight(st: Stage, constants: frozenset[str]) -> str | None:
    """The constant 2-D right-hand side ``B[k, j]`` of a matrix product (``j`` the
    output's last axis, ``k`` a reduce axis), which may be stored as panels."""
    op = st.tensor.op
    assert op is not None
    if not op.reduce_axes or len(op.axes) < 2:
        return None
    j = op.axes[-1].var
    reduce_vars = {id(a.var) for a in op.reduce_axes}
    for load in collect_loads(op.body):
        t = load.buffer
        if (isinstance(t, Tensor) and t.op is None and t.name in constants and t.ndim == 2
                and load.indices[1] is j and isinstance(load.indices[0], Var)
                and id(load.indices[0]) in reduce_vars):
            return t.name
    return None


def select_rows(st: Stage, s: Schedule) -> int:
    """How many leading axes of an elementwise stage the conditions of its selects, or
    the reads of its broadcast operands, depend on (its own and those of the stages
    inlined into it), when that leaves trailing axes worth a vector loop; else 0.

    By rows, such a condition or read is one scalar per row. Flattened into one vector
    loop, a per-channel scale (a batch norm after a DenseNet Concat) is a division of the
    flat index per lane and a gather: slow to run, and a second per kernel for LLVM."""
    op = st.tensor.op
    assert op is not None
    axes = [a.var for a in op.axes]
    if len(axes) < 2:
        return 0

    def expand(e: Expr, depth: int = 0) -> Expr:
        def visit(x: Expr) -> Expr | None:
            t = x.buffer if isinstance(x, Load) else None
            if (isinstance(t, Tensor) and t.op is not None and s[t.name].inline
                    and depth < 16):
                body = substitute(t.op.body, {id(a.var): i for a, i in
                                              zip(t.op.axes, x.indices)})  # type: ignore[union-attr]
                return expand(body, depth + 1)
            return None

        return rewrite(e, visit)

    def deepest_axis(*exprs: Expr) -> int:
        used = {id(v) for e in exprs for v in free_vars(e)}
        return max((k for k, a in enumerate(axes) if id(a) in used), default=-1)

    deepest = -1
    for e in walk(expand(op.body)):
        if isinstance(e, Select) and not any(isinstance(x, Load) for x in walk(e.cond)):
            deepest = max(deepest, deepest_axis(e.cond))
        elif isinstance(e, Load) and isinstance(e.buffer, Tensor):
            reads = deepest_axis(*e.indices)
            if reads < len(axes) - 1:  # constant along the last axis: a broadcast
                deepest = max(deepest, reads)
    if deepest < 0 or deepest >= len(axes) - 1:
        return 0
    tail = math.prod(a.extent for a in op.axes[deepest + 1:])
    return deepest + 1 if tail >= 16 else 0


def channel_vector_weight(st: Stage, constants: frozenset[str]) -> str | None:
    """The weight a dense or grouped (not depthwise) convolution reads, when it is a
    constant the build can store transposed: only then may the vector loop run over
    output channels."""
    op = st.tensor.op
    assert op is not None
    if op.tag != "conv2d" or not op.reduce_axes or group_outputs(st) == 1:
        return None
    rest = input_tensors(st.tensor)[1:]
    weights = [t for t in rest if t.op is None and t.ndim == 4 and t.name in constants]
    return weights[0].name if weights else None


def group_outputs(st: Stage) -> int:
    """Output channels per group of a grouped convolution (its input channel is
    ``(o // og) * cg + rc``); 0 for a dense one, 1 where that is not known."""
    op = st.tensor.op
    assert op is not None
    data = input_tensors(st.tensor)[0]
    rc, o = op.reduce_axes[0].var, op.axes[1].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            if load.indices[1] is rc:
                return 0
            for e in walk(load.indices[1]):
                if (isinstance(e, Binary) and e.op == "floordiv" and e.a is o
                        and isinstance(e.b, Const)):
                    return int(e.b.value)
            return 1
    return 1


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
    return depthwise_conv(users[0]) and (
        op.axes[3].extent <= SMALL_DEPTHWISE_WIDTH
        or ((axis_reads(users[0], pad.tensor, 3) or (0, 0))[0] > 1
            and interior_share(pad, users[0], depthwise_tile(resources, users[0]))
            >= INTERIOR_SHARE_TO_INLINE))


def depthwise_conv(st: Stage) -> bool:
    """A grouped convolution with one input channel per group: each output channel reads
    the input channel of its group (``x[n, o // m, ...]``), not a reduce axis."""
    op = st.tensor.op
    assert op is not None
    if op.tag != "conv2d" or not op.reduce_axes or op.reduce_axes[0].extent != 1:
        return False
    return group_outputs(st) != 0


def pointwise_conv(st: Stage) -> bool:
    """A 1x1 convolution reading a placeholder (no pad stage) at unit stride along x: a
    matrix product over the flattened image."""
    op = st.tensor.op
    assert op is not None
    if any(a.extent != 1 for a in op.reduce_axes[1:]):
        return False
    data = input_tensors(st.tensor)[0]
    if data.op is not None:  # a pad stage
        return False
    x = op.axes[3].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            index = load.indices[3]
            return index is x or (isinstance(index, Binary) and index.a is x)
    return False


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
    lanes, _ = register_tile(resources, height * width, 1, _element_bytes(st))
    if height * width > lanes:
        return False
    pitch = _input_pitch(st)
    return pitch is not None and (height - 1) * pitch + width <= 2 * lanes


def _input_pitch(st: Stage) -> int | None:
    """Elements between the input rows consecutive output rows read (stride x width),
    or None when that is not a plain multiple of the output row."""
    op = st.tensor.op
    assert op is not None
    data = input_tensors(st.tensor)[0]
    y = op.axes[2].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            rows = load.indices[2]  # y * stride + ry * dilation
            if isinstance(rows, Binary) and rows.op == "add":
                rows = rows.a
            if rows is y:
                return int(data.shape[3])
            if (isinstance(rows, Binary) and rows.op == "mul" and rows.a is y
                    and isinstance(rows.b, Const)):
                return int(rows.b.value) * int(data.shape[3])
            return None
    return None
