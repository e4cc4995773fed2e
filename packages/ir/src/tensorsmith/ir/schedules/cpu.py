"""Default CPU schedules, sized by the CPU they compile for.

Rules, per stage of a fused kernel (``rules.py`` picks one by the stage's kind):
- non-output, non-reduction stages are inlined into their readers;
- a reduction whose output's last axis is also the last index of an input it reads
  (matmul's ``B[k, j]``) runs as a register tile (cpu_tile.py): ``[outer spatial] io, jo
  | k | ii, ji`` with ``ii`` rows unrolled and ``ji`` one vector block, accumulated in a
  local buffer over the whole reduction and written back once (with the elementwise ops
  after it); a constant ``B`` is stored as panels ``[N/vec, K, vec]`` so the ``k`` loop
  walks one contiguous run;
- convolution and pooling windows run the same register tile over output channels x
  output columns;
- other reductions fuse their spatial axes into one loop, which the thread pool splits
  into contiguous chunks; elementwise outputs are one flat loop in vector chunks;
- loops run in parallel only when the stage does enough work to pay for the wake-up.

The register tile comes from the target's vector unit (:class:`CpuResources`, which the
codegen plug-in reports): ``rows x vec`` accumulators plus the ``vec`` lanes of the
other operand and one broadcast must fit the vector registers, or every multiply-add
spills. That is 6 rows x 16 lanes (12 of 16 ymm) on AVX2 and 6 x 64 (24 of 32 zmm) on
AVX-512 (cpu_sizes.py).

Every free parameter goes through ``choose(stage, knob, default, choices)`` (knobs.py),
asked before the rule schedules anything, so that the auto-tuner sees every knob of a
stage whatever the others are answered: the tuner searches exactly these knobs, over
these choices, starting from these defaults.

No rule reassociates a reduction by default: every output accumulates its terms one
after another in the compute's axis order, so a default build's rounding does not depend
on tile sizes or thread counts. Vector lanes along a reduction (``rfactor``) and a split
reduction are choices only the tuner makes (its runner checks every candidate).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..target import CpuResources
from ..te.expr import Binary, Const
from ..te.schedule import Schedule, Stage, input_tensors
from ..te.visit import walk
from .cpu_shapes import (
    channel_vector_weight,
    depthwise_conv,
    dot_weight,
    element_bytes,
    elementwise_rows,
    fuse_all,
    group_outputs,
    left_hand_side,
    packable_input,
    packable_weight,
    pointwise_conv,
)
from .cpu_sizes import (
    ProductBlocks,
    blocked_tile,
    depthwise_tile,
    panel_group,
    pixels_outer,
    pointwise_kblock,
    reads_padding_in_place,
    register_tile,
    small_image,
)
from .cpu_tile import (
    UNROLL_MAX_SCALAR,
    UNROLL_MAX_TABLE,
    Operand,
    Tile,
    TileShape,
    build_tile,
    check_tile,
    split_or_keep,
)
from .epilogue import epilogue_consumer, fuse_epilogue_chain, stage_readers
from .knobs import Choose, conflict_unless

PARALLEL_MIN_WORK = 1 << 15
#: Elements per vector chunk of a flat elementwise loop (LLVM splits it into registers).
VECTOR_BLOCK = 64
#: A pointwise convolution (or small image) of at most this many output pixels puts
#: its vector lanes over output channels (``CpuRules.window``); measured on AVX2.
FLAT_CHANNEL_PIXELS = 256
#: A product packs an input right-hand side into panels at run time from this many
#: rows on: below, the copy's memory traffic is a large share of the product's own (a
#: 32-row vocabulary projection read its 154 MB B once, and twice with the copy: 0.73 ->
#: 0.62 of numpy); from 64 rows the copy is a few percent of the multiply-adds.
PACK_MIN_ROWS = 64
#: Reductions at least this long may run in cache-sized blocks (``CpuRules.blocking``):
#: shorter ones gain little and would lose their fused epilogue.
BLOCKED_DEPTH = 1024
#: The panels of ``B`` a thread walks per row tile when a product's blocks of k leave
#: one row tile per block of rows (``CpuRules.blocking``) take at most half the L2 cache
#: and at most this many bytes. Half of Zen's 512 KiB L2 was best there; on a Xeon with
#: 2 MiB of L2 (AVX-512, 64 KiB panels), 1 MiB of panels ran 4096^3 products 1.3-1.7x
#: slower than 512 KiB (A's rows streaming through the L2 push the panels out of it).
PANEL_GROUP_BYTES = 512 * 1024
#: A blocked product's parallel loop keeps at least this many blocks of rows x panels,
#: so that threads have blocks to share (``CpuRules.blocking`` makes its blocks of rows
#: shorter until it does).
BLOCKED_PARALLEL_MIN = 16
#: A stage read by one this many times its size is computed once, not inlined
#: (:meth:`CpuRules.inline`).
BROADCAST_READ_RATIO = 16
YES_NO = (True, False)
NO_YES = (False, True)


def options(extent: int, candidates: Sequence[int]) -> tuple[int, ...]:
    """The ``candidates`` that fit an axis of ``extent`` (at least ``(1,)``)."""
    return tuple(c for c in candidates if c <= extent) or (1,)


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

    # -- elementwise stages ----------------------------------------------------------
    def inline(self, st: Stage) -> None:
        """Inlined into its readers, unless a reader is many times its size (a
        Squeeze-Excite gate, ``sigmoid(conv(pooled))``, read by every pixel): inlined,
        its body would run once per element of that reader (an exp per pixel for one
        value per channel), so it gets loops and a buffer of its own instead. So does a
        stage that a reduction along its rows and another stage both read (a softmax's
        exponentials): computed once, a row at a time (:meth:`row_reductions`)."""
        size = math.prod(st.tensor.shape)
        readers = self.readers.get(st.tensor.uid, [])
        # (an empty stage, a batch of 0, has no work to save: it is inlined like any other)
        broadcast = size > 0 and any(math.prod(r.tensor.shape) >= BROADCAST_READ_RATIO * size
                                     for r in readers)
        row_shared = len(readers) > 1 and any(_reduces_rows_of(r, st) for r in readers)
        if not (broadcast or row_shared) or self.choose(st, "inline", False, NO_YES):
            self.s.compute_inline(st.name)
        elif row_shared:  # by rows, to be computed a row at a time with its readers
            self.elementwise(st)
        else:
            self.loops(st, 0, self.loop_knobs(st, VECTOR_BLOCK))

    def elementwise(self, st: Stage) -> None:
        """One flat loop over the elements in vector chunks; chunks shared by threads.

        Where the value selects between inputs by its leading coordinates (a Concat
        along channels), by rows instead: the rows are one loop the threads share, the
        rest a vector loop, and each select is then one branch per row (lowering turns
        a select that every lane agrees on into a branch)."""
        row_axes, split = elementwise_rows(st, self.s)
        by_rows = bool(row_axes) and self.choose(st, "by_rows", True, YES_NO)
        names = [lf.name for lf in st.leaves]
        # split along the last axis: rows of one block each, its lanes one vector
        lanes = split[1] if split is not None and split[0] == len(names) - 1 else 0
        knobs = self.loop_knobs(st, lanes or VECTOR_BLOCK)
        if by_rows and split is not None and not lanes:
            # a blocked layout written back to NCHW: the k channels of a block as
            # adjacent rows, so the k rows reading the same input run one after another
            axis, k = split
            outer, inner = self.s.split(st.name, names[axis], k)
            self.s.reorder(st.name, *names[:axis], outer, *names[axis + 1:-1], inner,
                           names[-1])
            row_axes += 1
        self.loops(st, row_axes if by_rows else 0, knobs)
        if by_rows and row_axes == len(names) - 1:
            self.row_reductions(st)

    def row_reductions(self, st: Stage) -> None:
        """Reductions along this stage's rows that it reads (a softmax's max and sum),
        and row-shaped stages they share with it (its exponentials), run one row at a
        time inside its row loop (``compute_at``): the row comes from memory once and
        stays in cache for every pass, instead of once per pass over the whole tensor
        (Whisper's [6, 1500, 1500] softmax read 54 MB three times)."""
        op = st.tensor.op
        assert op is not None
        rows = st.leaves[0]
        rows_shape = (*(a.extent for a in op.axes[:-1]), 1)
        reads = _reads(st, self.s)

        def row_stage(p: Stage) -> bool:
            op = p.tensor.op
            if op is None or p.tensor.uid not in reads or p.inline or p.merged:
                return False
            if op.reduce_axes:  # one value per row
                return p.tensor.shape == rows_shape
            return p.tensor.shape == st.tensor.shape and p.tensor.uid not in self.out_ids

        candidates = [p for p in self.s.stages if row_stage(p) and p.attached is None
                      and p.leaves and p.leaves[0].extent == rows.extent
                      and not p.leaves[0].reduce]
        # only what is read inside the row loop: by ``st``, by another stage moved into it,
        # or through stages inlined there (readers come later: decide from the last)
        inside: set[int] = {st.tensor.uid}

        def read_inside(t_uid: int) -> bool:
            return all(r.tensor.uid in inside or (r.inline and read_inside(r.tensor.uid))
                       for r in self.readers.get(t_uid, []))

        found: list[Stage] = []
        for p in reversed(candidates):
            if read_inside(p.tensor.uid):
                inside.add(p.tensor.uid)
                found.insert(0, p)
        if found and self.choose(st, "row_reductions", True, YES_NO):
            for p in found:
                self.s.compute_at(p.name, st.name, rows.name)

    def padding(self, st: Stage) -> None:
        """Inlined into its one reader where that pays (:func:`reads_padding_in_place`),
        else by rows: the rows (all axes but the last) are one loop the threads share,
        each row a vector loop over its columns. Flattening everything into one loop, as
        for other elementwise stages, left a division and a clamp of the flat index per
        lane, which turned every load into a gather; by rows, the row index is a scalar
        and the columns a contiguous, clamped span that codegen loads with a mask."""
        op = st.tensor.op
        assert op is not None
        inline = False
        if st.tensor.uid not in self.out_ids:
            inline = self.choose(st, "inline", reads_padding_in_place(
                st, self.readers, self.out_ids, self.res), NO_YES)
        row_axes = len(op.axes) - 1
        by_rows = row_axes > 0 and self.choose(st, "by_rows", True, YES_NO)
        vec, _ = register_tile(self.res, op.axes[-1].extent, 1)
        knobs = self.loop_knobs(st, vec)  # asked even when inlined: the tuner may not
        if inline:
            self.s.compute_inline(st.name)
        else:
            self.loops(st, row_axes if by_rows else 0, knobs)

    def loop_knobs(self, st: Stage, row_vec: int) -> dict[str, Any]:
        """The knobs of an elementwise stage's loops (see :meth:`loops`)."""
        work = math.prod(lf.extent for lf in st.leaves)
        return {
            "chunk": self.choose(st, "chunk", VECTOR_BLOCK if work >= 2 * VECTOR_BLOCK else 0,
                              options(work, (0, 8, 16, 32, 64))),
            "row_vec": self.choose(st, "row_vec", row_vec, (4, 8, 16, 32, 64)),
            "vectorize": self.choose(st, "vectorize", True, YES_NO),
            "parallel": self.choose(st, "parallel", work >= PARALLEL_MIN_WORK, NO_YES)}

    def loops(self, st: Stage, row_axes: int, knobs: dict[str, Any]) -> None:
        """The loops of an elementwise stage: with ``row_axes``, the first that many axes
        fused into rows the threads share and the others into one vector loop per row of
        ``row_vec`` lanes; without, all fused into one loop cut in vector chunks."""
        names = [lf.name for lf in st.leaves]
        if row_axes:
            rows = fuse_all(self.s, st.name, names[:row_axes])
            cols = fuse_all(self.s, st.name, names[row_axes:])
            assert rows is not None and cols is not None
            # (rows shorter than the vector: one vector of the row's length, unmasked)
            _, inner = self.s.split(st.name, cols, min(knobs["row_vec"], st.leaf(cols).extent))
            if knobs["vectorize"]:
                self.s.vectorize(st.name, inner)
            self.parallel(st, rows, knobs["parallel"])
            return
        fused = fuse_all(self.s, st.name, names)
        if fused is None:
            return
        chunk = knobs["chunk"]
        if chunk and chunk < st.leaf(fused).extent:
            fused, inner = self.s.split(st.name, fused, chunk)
            if knobs["vectorize"]:
                self.s.vectorize(st.name, inner)
        self.parallel(st, fused, knobs["parallel"])

    def winograd_input(self, st: Stage) -> None:
        """A Winograd input transform ``V[e, n, c, p]`` (ops/winograd.py): per channel and
        row of tiles, the ``alpha x alpha`` table entries unrolled (so each is the
        handful of terms its matrix row holds) over a vector of the row's tiles, whose
        inputs are ``m`` apart (one strided load per patch element)."""
        work = math.prod(lf.extent for lf in st.leaves)
        vectorize = self.choose(st, "vectorize", True, YES_NO)
        parallel = self.choose(st, "parallel", work >= PARALLEL_MIN_WORK, NO_YES)
        e, n, c, p = (lf.name for lf in st.leaves)
        rows, cols = split_or_keep(self.s, st.name, p, st.leaf(p).extent, _modulus(st, -1))
        self.s.reorder(st.name, *[x for x in (c, rows, e, n, cols) if x is not None])
        self.s.unroll(st.name, e)
        self.s.unroll(st.name, n)
        if cols is not None and vectorize:
            self.s.vectorize(st.name, cols)
        outer = fuse_all(self.s, st.name, [x for x in (c, rows) if x is not None])
        if outer is not None and parallel:
            self.s.parallel(st.name, outer)

    def winograd_input_blocked(self, st: Stage) -> None:
        """A Winograd input transform over channel-blocked activations, ``V[e, n, p,
        c]``: per tile and block of input channels, the ``alpha x alpha`` table entries
        unrolled over a vector of the block's lanes (``p, c.o | e, n | c.i``), each
        patch element one contiguous load shared by the entries that read it."""
        e, n, p, c = (lf.name for lf in st.leaves)
        self.unrolled_table(st, p, c, (e, n))

    def winograd_columns(self, st: Stage) -> None:
        """The first half of a separable Winograd output transform, ``T[e, p, j, o] =
        sum_n M[e, n, p, o] AT[j][n]``: per tile and vector of output channels (``p,
        o.o | e | n, j | o.i``), the table unrolled (constant coefficients), a row of
        ``m`` vectors accumulated in registers per ``e``."""
        e, p, j, o = (lf.name for lf in st.leaves if not lf.reduce)
        (n,) = (lf.name for lf in st.leaves if lf.reduce)
        self.unrolled_table(st, p, o, (e, n, j), cache_at=e)

    def unrolled_table(self, st: Stage, tile: str, vector: str, table: tuple[str, ...],
                       cache_at: str | None = None) -> None:
        """``tile, vector.o | table (unrolled) | vector.i``: the tiles and vectors of
        ``vector`` fused and in parallel, the Winograd table's loops unrolled (each
        coefficient a constant), ``vector``'s lanes innermost."""
        lanes = self.res.lanes(element_bytes(st))
        vec = self.choose(st, "vec", lanes, options(st.leaf(vector).extent, (4, 8, 16, 32)))
        parallel = self.choose(st, "parallel", math.prod(lf.extent for lf in st.leaves)
                               >= PARALLEL_MIN_WORK, NO_YES)
        vo, vi = split_or_keep(self.s, st.name, vector, st.leaf(vector).extent, vec)
        self.s.reorder(st.name, *[x for x in (tile, vo, *table, vi) if x is not None])
        outer = fuse_all(self.s, st.name, [x for x in (tile, vo) if x is not None])
        if cache_at is not None:
            self.s.cache_write(st.name, cache_at)
        for loop in table:
            self.s.unroll(st.name, loop)
        if vi is not None:
            self.s.vectorize(st.name, vi)
        if outer is not None and parallel:
            self.s.parallel(st.name, outer)

    # -- reductions --------------------------------------------------------------------
    def reduction(self, st: Stage) -> None:
        """Softmax sums, reductions along a row: the spatial axes fused, in parallel.

        The tuner may also run vector lanes across outputs (``chunk``: each lane reduces
        its own output, reading with the outputs' stride), or with ``rfactor`` along the
        innermost reduce axis: each lane accumulates every lanes-th element in a local
        vector, combined once at the end (this reassociates the sum, so it is never the
        default), and may split and unroll a reduce loop (``rsplit``)."""
        spatial = [lf.name for lf in st.leaves if not lf.reduce]
        reduce = [lf.name for lf in st.leaves if lf.reduce]
        outputs = math.prod(lf.extent for lf in st.leaves if not lf.reduce)
        last = st.leaves[-1].extent if reduce else 1
        work = math.prod(lf.extent for lf in st.leaves)
        chunk = self.choose(st, "chunk", 0, options(outputs, (0, 4, 8, 16, 32, 64))
                         if spatial else (0,))
        lanes_n = self.choose(st, "rfactor", 0, options(last // 2, (0, 8, 16, 32, 64))
                           if spatial else (0,))
        rsplit = self.choose(st, "rsplit", 0, options(last - 1, (0, 4, 8, 16)))
        parallel = self.choose(st, "parallel", work >= PARALLEL_MIN_WORK, NO_YES)
        conflict_unless(not (lanes_n and chunk),
                        "one vector loop: lanes run across outputs or along the reduction")
        conflict_unless(lanes_n * max(rsplit, 1) <= last, "the split exceeds the reduction")
        name = st.name
        fused = fuse_all(self.s, name, spatial)
        outer, inner = fused, None
        if fused is not None and chunk and chunk < outputs:
            outer, inner = self.s.split(name, fused, chunk)
        lanes = None
        if lanes_n and reduce and fused is not None:
            ro, lanes = self.s.split(name, reduce[-1], lanes_n)
            reduce[-1:] = [ro, lanes]
        if rsplit and reduce:
            at = len(reduce) - (2 if lanes is not None else 1)  # the loop above the lanes
            ro, ri = self.s.split(name, reduce[at], rsplit)
            reduce[at:at + 1] = [ro, ri]
            self.s.unroll(name, ri)
        order = [x for x in (outer, *reduce, inner) if x is not None]
        if order != [lf.name for lf in st.leaves]:
            self.s.reorder(name, *order)
        if lanes is not None:  # (rfactor excludes chunk: outer is the fused spatial loop)
            self.s.cache_write(name, fused)  # type: ignore[arg-type]
            self.s.rfactor(name, lanes)
            self.s.vectorize(name, lanes)
        if inner is not None:
            self.s.vectorize(name, inner)
        self.parallel(st, outer, parallel)

    def matmul(self, st: Stage) -> None:
        """Register tile: rows x a vector block of columns, accumulated in a local buffer
        over the whole reduction (or over one cache-sized block of it, see
        :meth:`blocking`), then written back with the elementwise ops after it (not when
        it writes partial sums)."""
        op = st.tensor.op
        assert op is not None
        row = len(op.axes) - 2 if len(op.axes) >= 2 else None
        row_extent = op.axes[-2].extent if row is not None else 1
        cols = op.axes[-1].extent
        vec, rows = register_tile(self.res, cols, row_extent, element_bytes(st))
        weight = packable_weight(st, self.constants) or dot_weight(st, self.constants)
        lhs = left_hand_side(st)
        shape = self.tile_shape(st, row, panel=weight or packable_input(st, self.constants),
                                row_panel=lhs.name if lhs is not None else None)
        vec = self.vec_knob(st, vec, cols)
        # B[k, j] stored as panels [j / vec, k, vec] (the last one zero-padded): the k loop
        # then walks one contiguous run instead of a row of B (up to a page apart) per
        # step, which is what kept wide products far from the FMA peak. A constant is
        # stored so once; an input is copied so by the kernel, which pays where B does
        # not stay in the L2 cache anyway and enough rows read each panel
        # (:data:`PACK_MIN_ROWS`). Attention's small products ran 3-8% slower packed.
        depth = math.prod(a.extent for a in op.reduce_axes)
        big = depth * cols * element_bytes(st) > self.res.l2_bytes // 2
        worth = cols > vec and (weight is not None or (row_extent >= PACK_MIN_ROWS and big))
        pack = shape.panel is not None and self.choose(st, "pack", worth, NO_YES)
        blocks = self.blocking(st, vec, rows)
        order = "cols_first" if blocks.kblock else self.matmul_order(st)
        # A as row panels where it is re-read, from beyond the L2, once per group of
        # panels of B: a product blocked for the caches (4096^3 with B an input on Zen 3,
        # 94 -> 127 GFLOP/s; one pass over A costs about 1% of such a product)
        self.tile(st, shape, vec=vec, rows=rows, outer_order=order, tile_cols=blocks.panels,
                  tile_rows=blocks.row_tiles, inner_order="cr" if blocks.row_tiles > 1 else "rc",
                  kblock=blocks.kblock, pack=pack, pack_rows=blocks.kblock > 0)

    def blocking(self, st: Stage, vec: int, rows: int) -> ProductBlocks:
        """How a product too large for the caches is cut into blocks (all ones and a
        ``kblock`` of 0 for one that is not).

        When ``A`` is over half the L2 cache, ``B`` over all of it, and the reduction long
        (:data:`BLOCKED_DEPTH`), the reduction runs in blocks of ``kblock`` (a divisor of
        its length), outermost, with the partial sums kept in the output between blocks:
        the cost is a write-back of the output per block and no fused epilogue. Within
        a block of k the three operands are sized for the three levels of cache, as
        BLAS libraries do:

        - one panel of ``B`` (``kblock`` x the tile's lanes) fills the L1 cache and is
          read from there by every row tile of a block of ``row_tiles`` row tiles;
        - that block of rows of ``A`` (row panels, ``row_tiles * rows * kblock``) takes
          an eighth of the L2 and is read from there by each of ``panels`` panels;
        - the ``panels`` panels of ``B`` (twice the L2 in all) stay in the shared L3
          while every block of rows walks them, so ``A`` is read from memory once per
          group of panels and the output once per block of k.

        On Zen 3 (AVX2) this ran 4096^3 products 164-167 -> 173-175 GFLOP/s (0.88-0.89
        -> 0.92-0.95 of OpenBLAS) against one row tile per block with the panels in half
        the L2 and blocks of k of 256 (with blocks of k of 512 there, blocks of 8 row
        tiles, 96 KiB of ``A``, ran the same and 16 slower). Where that would leave the
        threads fewer than :data:`BLOCKED_PARALLEL_MIN` blocks to share, the blocks of
        rows are shorter, down to one row tile; the panels then keep to half the L2
        (:data:`PANEL_GROUP_BYTES`)."""
        op = st.tensor.op
        assert op is not None
        if len(op.axes) < 2 or len(op.reduce_axes) != 1:
            return ProductBlocks()
        size = element_bytes(st)
        depth, height, cols = op.reduce_axes[0].extent, op.axes[-2].extent, op.axes[-1].extent
        half = self.res.l2_bytes // 2
        # B within the L2 stays there while every block of rows walks it (a product with
        # few columns, attention's probabilities times V: 1500 x 64 per head, 17.8 ms
        # blocked vs 13.4 ms not on Zen 3); blocks of k would only add write-backs
        if (depth < BLOCKED_DEPTH or depth * height * size <= half
                or depth * cols * size <= self.res.l2_bytes):
            return ProductBlocks()
        target = max(256, self.res.l1_bytes // (vec * size))
        kblock = next((d for d in sorted(range(128, 1025), key=lambda d: abs(d - target))
                       if depth % d == 0), 0)
        if not kblock:
            return ProductBlocks()
        count, row_count = -(-cols // vec), -(-height // rows)
        panel = kblock * vec * size
        row_tiles = max((t for t in (1, 2, 4, 8)
                         if t * rows * kblock * size <= self.res.l2_bytes // 8), default=1)
        while True:
            group = 2 * self.res.l2_bytes if row_tiles > 1 else min(half, PANEL_GROUP_BYTES)
            panels = panel_group(count, max(1, group // panel))
            blocks = -(-row_count // row_tiles) * -(-count // panels)
            if row_tiles == 1 or blocks >= BLOCKED_PARALLEL_MIN:
                return ProductBlocks(kblock, row_tiles, panels)
            row_tiles //= 2

    def matmul_order(self, st: Stage) -> str:
        """Which operand a thread keeps in cache while it walks the other.

        Rows outer (``natural``) reads the whole right-hand side ``B`` once per block of
        rows: right while ``B`` fits the L2 cache. Columns outer (``cols_first``) reads
        the whole left-hand side ``A`` once per panel of ``B`` instead: right for wide
        products with few rows (a vocabulary projection, a feed-forward layer of a short
        sequence), whose ``B`` is far larger than their ``A``."""
        op = st.tensor.op
        assert op is not None
        if len(op.axes) < 2:
            return "natural"  # one row: nothing to order
        size = element_bytes(st)
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
        instead (:meth:`channel_tile`); depthwise ones have their own tile
        (:meth:`depthwise`).
        """
        op = st.tensor.op
        assert op is not None
        if len(op.axes) == 5:
            self.blocked(st)
            return
        if depthwise_conv(st) or op.tag.startswith("pool_"):
            self.depthwise(st)
            return
        height, width = op.axes[2].extent, op.axes[3].extent
        flat = op.tag == "conv2d" and (pointwise_conv(st) or small_image(st, self.res))
        shape = self.tile_shape(st, 1, weight=channel_vector_weight(st, self.constants))
        flatten = flat and self.choose(st, "flatten", True, YES_NO)
        # Lanes over output channels, except for a pointwise convolution or small image
        # of many pixels (``flat``): that is a plain matrix product over the flattened
        # image already, whose long contiguous rows make the wider tile. Up to
        # FLAT_CHANNEL_PIXELS the channels win (rows then run over the flattened image:
        # 1.9x on ResNet-50's 1x1 convolutions at 7x7, 1.4x at 14x14, even at 28x28).
        channel_vec = self.channel_block(st)
        lanes_default = "channels" if channel_vec and (
            not flat or height * width <= FLAT_CHANNEL_PIXELS) else "cols"
        cols = height * width if flatten else width
        vec, rows = register_tile(self.res, cols, op.axes[1].extent, element_bytes(st))
        vec = self.vec_knob(st, vec, cols)
        channels = self.channel_tile(st, channel_vec) if shape.weight is not None else {}
        vec_axis = self.choose(st, "vec_axis", lanes_default, ("cols", "channels")) \
            if shape.weight is not None else "cols"
        order = self.conv_order(st) if vec_axis == "channels" else "cols_first"
        self.tile(st, shape, vec=vec, rows=rows, outer_order=order, flatten=flatten,
                  vec_axis=vec_axis, **channels)

    def depthwise(self, st: Stage) -> None:
        """One input channel per output channel (a depthwise convolution, a pooling
        window): a register tile of output rows x columns of one channel
        (``n, c, y.o, x.o | ry, rx | y.i, x.i``).

        The rows of a tile share the channel's weights (one broadcast per tap for all of
        them) and overlap in the input rows they read, so the unrolled taps load each
        input vector once for several rows. Lanes run along the output row."""
        op = st.tensor.op
        assert op is not None
        vec, rows = depthwise_tile(self.res, st)
        vec = self.vec_knob(st, vec, op.axes[3].extent)
        self.tile(st, self.tile_shape(st, 2), vec=vec, rows=rows, outer_order="natural")

    def blocked(self, st: Stage) -> None:
        """A window over channel-blocked activations (``[N, C / b, H, W, b]``,
        passes/blocked_layout.py): lanes over a block's ``b`` channels, so every tap at
        any stride is one contiguous vector load.

        A dense convolution tiles ``cblocks`` blocks of output channels by ``rows``
        output pixels of the flattened image (``n, ob.o, p.o | rc, ry, rci, rx | p.i,
        ob.i, lanes``): each input element is one broadcast for all its blocks, each
        weight vector (stored ``[O / b, C, KH, KW, b]``) one load for all its rows, and
        only the image's last tile is partial. A depthwise convolution or pooling window
        has one block and its rows along an output row (``n, c.o, y, x.o | ry, rx |
        x.i, lanes``): its padding is read in place, and the tiles inside the image run
        without the padding's selects (te/inside.py). A 1x1 convolution whose input
        outgrows the L2 cache runs in passes over blocks of input channels
        (:func:`pointwise_kblock`), or, strided, with its pixel tiles outermost
        (:func:`pixels_outer`)."""
        op = st.tensor.op
        assert op is not None
        lanes = op.axes[4].extent
        rows, cblocks = blocked_tile(self.res, st)
        dense = cblocks > 0
        # (an integer convolution's weight has a fifth axis: its dots, ops/integer.py)
        weight = next((t.name for t in input_tensors(st.tensor)[1:]
                       if t.op is None and t.ndim in (4, 5) and t.name in self.constants),
                      None)
        shape = self.tile_shape(st, 3, weight=weight)
        vec = self.vec_knob(st, lanes, lanes)
        order = "rows_first" if dense and pixels_outer(self.res, st) else "natural"
        self.tile(st, shape, vec=vec, rows=rows, outer_order=order, vec_axis="block",
                  flatten=dense, cblocks=max(1, cblocks),
                  kblock=pointwise_kblock(self.res, st, cblocks) if dense else None)

    def winograd_output(self, st: Stage) -> None:
        """A Winograd output transform reads its products with output channels
        contiguous: its vector loop runs over those, and its small reduce loops over the
        constant table are unrolled."""
        op = st.tensor.op
        assert op is not None
        table = math.prod(a.extent for a in op.reduce_axes)
        if len(op.axes) == 5:
            self.winograd_output_blocked(st)
            return
        shape = self.tile_shape(st, 1)
        vec, rows = register_tile(self.res, op.axes[-1].extent, op.axes[1].extent,
                                  element_bytes(st))
        vec = self.vec_knob(st, vec, op.axes[-1].extent)
        rows = max(1, min(rows, UNROLL_MAX_TABLE // table))
        pixels, channels = op.axes[-1].extent, op.axes[1].extent
        self.tile(st, shape, vec=vec, rows=rows, outer_order="cols_first",
                  vec_axis=self.choose(st, "vec_axis", "channels", ("cols", "channels")),
                  cvec=min(16, channels), crows=min(8, pixels, rows), unroll_reduce=True)

    def winograd_output_blocked(self, st: Stage) -> None:
        """A Winograd output transform written channel-blocked: per ``m x m`` output
        tile and block of output channels (``n, ob, y.o, x.o | y.i | re, rn, x.i |
        lanes``), with the tile's rows, columns and the ``alpha x alpha`` table
        unrolled. Every coefficient is then a constant (its zero terms are never
        emitted), and a tile row of ``m`` vectors is accumulated in registers and
        written back with the elementwise epilogue."""
        op = st.tensor.op
        assert op is not None
        m = _modulus(st, 3)
        n, ob, y, z, lanes = (lf.name for lf in st.leaves if not lf.reduce)
        reduce = [lf.name for lf in st.leaves if lf.reduce]
        parallel = self.choose(st, "parallel", math.prod(a.extent for a in op.axes)
                               >= PARALLEL_MIN_WORK, NO_YES)
        yo, yi = self.s.split(st.name, y, m)
        zo, zi = self.s.split(st.name, z, m)
        self.s.reorder(st.name, n, ob, yo, zo, yi, *reduce, zi, lanes)
        outer = fuse_all(self.s, st.name, [n, ob, yo, zo])
        self.s.cache_write(st.name, yi)
        for loop in (yi, *reduce, zi):
            self.s.unroll(st.name, loop)
        self.s.vectorize(st.name, lanes)
        if outer is not None and parallel:
            self.s.parallel(st.name, outer)
        fuse_epilogue_chain(self.s, st, self.out_ids, self.readers)

    def channel_block(self, st: Stage) -> int:
        """Output channels per vector block of :meth:`channel_tile`: the widest
        power-of-two number of whole registers (at most a quarter of the register file)
        that divides the channels; 0 where none does (24 channels on AVX-512: lanes over
        the columns instead), since a partial block would need masks in every tile. For a
        grouped convolution, one group's output channels (RegNet's 8 or 16) where they
        fit such a block."""
        op = st.tensor.op
        assert op is not None
        lanes = self.res.lanes(element_bytes(st))
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

    def channel_tile(self, st: Stage, vec: int = 0) -> dict[str, int]:
        """``cvec`` and ``crows`` of a dense convolution with constant weights and vector
        lanes over output channels, rows over the output pixels (``n, o.o, p.o | c, ry,
        rx | p.i, o.i``, ``p`` the image flattened).

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
        channels, width = op.axes[1].extent, op.axes[2].extent * op.axes[3].extent
        vec = vec or register_tile(self.res, channels, 1)[0]
        rows = register_tile(self.res, vec, width, element_bytes(st))[1]
        return {"cvec": min(vec, channels), "crows": rows}

    def conv_order(self, st: Stage) -> str:
        """Blocks of output channels outermost (``natural``: each block's weights stay in
        cache while it sweeps the image) unless the weights are small and the image
        large: then each row of pixels meets every block of weights (``rows_first``)
        while it is in cache."""
        op = st.tensor.op
        assert op is not None
        size = element_bytes(st)
        image = size * math.prod(input_tensors(st.tensor)[0].shape)
        weights = size * op.axes[1].extent * math.prod(a.extent for a in op.reduce_axes)
        if weights <= self.res.l2_bytes // 2 and image > self.res.l2_bytes:
            return "rows_first"
        return "natural"

    # -- the register tile ---------------------------------------------------------------
    def tile_shape(self, st: Stage, row_axis: int | None, weight: str | None = None,
                   panel: str | None = None, row_panel: str | None = None) -> TileShape:
        """The loops ``st`` offers a register tile, rows over axis ``row_axis``."""
        op = st.tensor.op
        assert op is not None
        extent = {a.var.name: a.extent for a in (*op.axes, *op.reduce_axes)}
        spatial = tuple(a.var.name for a in op.axes)
        reduce = tuple(a.var.name for a in op.reduce_axes)
        row = spatial[row_axis] if row_axis is not None else None
        rank = {t.name: t.ndim for t in input_tensors(st.tensor)}

        dots = dot_weight(st, self.constants)

        def operand(name: str | None) -> Operand | None:
            return None if name is None else Operand(name, rank.get(name, 2),
                                                      name not in self.constants, name == dots)

        return TileShape(
            st.name, spatial, reduce, extent,
            row if row is not None and extent[row] > 1 else None,
            max(reduce, key=lambda n: extent[n]),
            tuple(itertools.permutations(reduce))[:6],
            epilogue_consumer(st, self.out_ids, self.readers), weight, operand(panel),
            operand(row_panel), rank.get(weight, 4) if weight is not None else 4)

    def vec_knob(self, st: Stage, vec: int, cols: int) -> int:
        """The register tile's lanes per row (``vec``), asked once: a rule may size other
        choices by it (a product's panels and k blocks) before it builds the tile."""
        return self.choose(st, "vec", vec, options(cols, (4, 8, 16, 24, 32, 48, 64)))

    def tile(self, st: Stage, shape: TileShape, *, vec: int, rows: int, outer_order: str,
             tile_rows: int = 1, tile_cols: int = 1, inner_order: str = "rc",
             kblock: int | None = None, flatten: bool = False, pack: bool = False,
             pack_rows: bool = False, vec_axis: str = "cols", cvec: int = 0, crows: int = 0,
             unroll_reduce: bool = False, cblocks: int = 1) -> None:
        """Ask every other knob of a register tile (``vec`` is :meth:`vec_knob`'s
        answer), with the rule's choices as defaults, and build it (cpu_tile.py).
        Products and 1x1 convolutions may also run their reduction in cache-sized
        blocks: ``kblock`` is their rule's choice (0: one block)."""
        ext = shape.extent
        block = vec_axis == "block"
        cols = ext[shape.spatial[-1]] * (ext[shape.spatial[-2]] if flatten and not block else 1)
        height = ext[shape.row] if shape.row else 1
        if block and flatten:  # rows over the flattened image
            height *= ext[shape.spatial[2]]
        depth = ext[shape.kaxis]
        ask = self.choose
        knobs: dict[str, Any] = dict(
            vec=vec,
            # a tile one column wide is scalar code, which unrolls fewer rows
            rows=ask(st, "rows", (rows if cols > 1 else min(rows, UNROLL_MAX_SCALAR))
                     if shape.row else 1, options(height, (1, 2, 3, 4, 5, 6, 8, 10, 12))),
            outer_order=ask(st, "outer_order", outer_order,
                            ("natural", "cols_first", "rows_first")),
            tile_rows=ask(st, "tile_rows", tile_rows, (1, 2, 4, 8)),
            tile_cols=ask(st, "tile_cols", tile_cols, options(cols, (1, 2, 4, 8, 16, 32))),
            inner_order=ask(st, "inner_order", inner_order, ("rc", "cr")),
            ksplit=ask(st, "ksplit", 0, options(depth - 1, (0, 4, 8, 16, 32, 64))),
            korder=ask(st, "korder", 0, tuple(range(len(shape.reduce_orders)))),
            rows_pos=ask(st, "rows_pos", "inner", ("inner", "mid")),
            kpos=ask(st, "kpos", "inner", ("inner", "outer")),
            unroll_rows=ask(st, "unroll_rows", True, YES_NO),
            unroll_k=ask(st, "unroll_k", False, NO_YES),
            vectorize=ask(st, "vectorize", True, YES_NO),
            cache=ask(st, "cache", True, YES_NO),
            epilogue=ask(st, "epilogue", True, YES_NO),
            parallel=ask(st, "parallel", math.prod(ext.values()) >= PARALLEL_MIN_WORK,
                         NO_YES),
            flatten=flatten, pack=pack, vec_axis=vec_axis, unroll_reduce=unroll_reduce)
        if kblock is not None and (len(shape.reduce) == 1 or block):
            # a product's k in elements; a blocked convolution's in channel blocks
            sizes = (0, 2, 4, 8, 16, 32) if block else (0, 128, 256, 512)
            knobs["kblock"] = ask(st, "kblock", kblock, options(depth - 1, sizes))
            if knobs["kblock"]:
                knobs["kblock_pos"] = ask(st, "kblock_pos", "outer", ("outer", "tile"))
        if shape.row_panel is not None and shape.row is not None and not flatten:
            knobs["pack_rows"] = ask(st, "pack_rows", pack_rows, NO_YES)
        if unroll_reduce:
            knobs["unroll_reduce"] = ask(st, "unroll_reduce", True, YES_NO)
        if block:
            blocks = ext[shape.spatial[1]]
            knobs["cblocks"] = ask(st, "cblocks", cblocks, options(blocks, (1, 2, 3, 4, 6, 8)))
        elif shape.weight is not None or unroll_reduce:
            o = ext[shape.spatial[1]]
            pixels = ext[shape.spatial[-1]] * (ext[shape.spatial[-2]]
                                               if shape.weight is not None else 1)
            knobs["cvec"] = ask(st, "cvec", cvec or min(16, o), options(o, (8, 16, 32, 48, 64)))
            knobs["crows"] = ask(st, "crows", crows or min(8, pixels),
                                 options(pixels, (2, 4, 6, 7, 8, 10, 12, 14, 16)))
        t = Tile(**knobs)
        check_tile(shape, t)
        build_tile(self.s, shape, t)

    # -- helpers ---------------------------------------------------------------------
    def parallel(self, st: Stage, loop: str | None, parallel: bool) -> None:
        if loop is not None and parallel and st.leaf(loop).extent > 1:
            self.s.parallel(st.name, loop)


def _reduces_rows_of(reader: Stage, st: Stage) -> bool:
    """Whether ``reader`` reduces ``st`` along its last axis (keeping it as size 1)."""
    op = reader.tensor.op
    shape = st.tensor.shape
    return (op is not None and bool(op.reduce_axes) and len(shape) > 1
            and reader.tensor.shape == (*shape[:-1], 1))


def _reads(st: Stage, s: Schedule) -> set[int]:
    """Uids of the tensors ``st`` reads, directly or through stages of ``s``."""
    stages = {x.tensor.uid for x in s.stages}
    seen: set[int] = set()
    todo = list(input_tensors(st.tensor))
    while todo:
        t = todo.pop()
        if t.uid in seen:
            continue
        seen.add(t.uid)
        if t.uid in stages:
            todo += input_tensors(t)
    return seen


def _modulus(stage: Stage, axis: int) -> int:
    """The constant a Winograd stage's body takes output axis ``axis`` modulo: an output
    transform's tile size ``m`` (its coefficient table's index), an input transform's
    tiles per row (a tile's column); the axis's extent where it takes none."""
    op = stage.tensor.op
    assert op is not None
    var = op.axes[axis].var
    for e in walk(op.body):
        if (isinstance(e, Binary) and e.op == "floormod" and e.a is var
                and isinstance(e.b, Const)):
            return int(e.b.value)
    return op.axes[axis].extent


__all__ = ["CpuRules"]
