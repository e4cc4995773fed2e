"""Default CPU schedules.

Rules, per stage of a fused kernel:
- non-output, non-reduction stages are inlined into their readers;
- a reduction whose output's last axis is also the last index of an input it reads
  (matmul's ``B[k, j]``) runs as ``[outer spatial] jo, k, ji``: the innermost loop
  walks contiguous memory on both sides and LLVM vectorizes it;
- otherwise (reductions along the contiguous axis, elementwise outputs) the spatial
  axes are fused into one loop, which the thread pool splits into contiguous chunks —
  each chunk is a unit-stride loop LLVM vectorizes;
- loops run in parallel only when the stage does enough work to pay for the wake-up.

No rule reassociates a reduction: every output accumulates its terms one after another
in the compute's axis order, so a default build's rounding does not depend on tile sizes
or thread counts. Vector lanes along a reduction (``rfactor``) are a tuning choice.
"""

from __future__ import annotations

from ..te.expr import Binary, Const, Load
from ..te.schedule import Schedule, Stage
from ..te.tensor import Tensor
from ..te.visit import walk
from .epilogue import fuse_epilogue_chain, stage_readers

PARALLEL_MIN_WORK = 1 << 15
VECTOR_BLOCK = 64


def schedule_cpu(outputs: list[Tensor], num_threads: int = 0) -> Schedule:
    s = Schedule(outputs)
    out_ids = {t.uid for t in outputs}
    readers = stage_readers(s)
    read_in_place = _pads_read_in_place(s, readers, out_ids)
    for st in s.stages:
        op = st.tensor.op
        assert op is not None
        if st.tensor.uid not in out_ids and not op.reduce_axes and (
                not st.name.endswith("_pad") or st.tensor.uid in read_in_place):
            s.compute_inline(st.name)
        elif op.reduce_axes and (op.tag == "conv2d" or op.tag.startswith("pool_")):
            _schedule_window(s, st)
            _try_epilogue(s, st, readers, out_ids)
        elif op.reduce_axes:
            _schedule_reduction(s, st)
            _try_epilogue(s, st, readers, out_ids)
        elif st.name.endswith("_pad") and len(op.axes) >= 2:
            _schedule_rows(s, st)
        else:
            _schedule_elementwise(s, st)
    return s


def _pads_read_in_place(s: Schedule, readers: dict[int, list[Stage]],
                        out_ids: set[int]) -> set[int]:
    """Padding stages to inline into their one reader instead of materialising."""
    return {st.tensor.uid for st in s.stages if reads_padding_in_place(st, readers, out_ids)}


def reads_padding_in_place(pad: Stage, readers: dict[int, list[Stage]],
                           out_ids: set[int]) -> bool:
    """True for a padding stage whose one reader is a depthwise convolution or a pooling
    window: inline it there instead of materialising it.

    Those read each input element a handful of times, with one multiply-add or max each:
    copying the padded input first cost as much as the convolution itself (more with
    stride 2, which reads a 4x larger input than it writes). Inlined, the padded read is
    ``select(inside, x[clamped], fill)``, which codegen emits as one masked span load.
    Convolutions with many input channels per output keep the copy: every padded row is
    read there by many output channels.
    """
    if not pad.name.endswith("_pad") or pad.tensor.op is None or pad.tensor.uid in out_ids:
        return False
    users = readers.get(pad.tensor.uid, [])
    if len(users) != 1:
        return False
    op = users[0].tensor.op
    assert op is not None
    return op.tag.startswith("pool_") or (
        op.tag == "conv2d" and bool(op.reduce_axes) and op.reduce_axes[0].extent == 1)


def _work(st: Stage) -> int:
    n = 1
    for leaf in st.leaves:
        n *= leaf.extent
    return n


def _fuse_all(s: Schedule, st: Stage, names: list[str]) -> str | None:
    if not names:
        return None
    fused = names[0]
    for name in names[1:]:
        fused = s.fuse(st.name, fused, name)
    return fused


def _schedule_elementwise(s: Schedule, st: Stage) -> None:
    """One flat loop over the elements in vector blocks; blocks shared by the threads."""
    fused = _fuse_all(s, st, [lf.name for lf in st.leaves])
    if fused is None:
        return
    extent = st.leaf(fused).extent
    if extent >= 2 * VECTOR_BLOCK:
        outer, inner = s.split(st.name, fused, VECTOR_BLOCK)
        s.vectorize(st.name, inner)
        fused = outer
    if _work(st) >= PARALLEL_MIN_WORK:
        s.parallel(st.name, fused)


def _schedule_rows(s: Schedule, st: Stage) -> None:
    """A padding stage: the rows (all axes but the last) are one loop the threads share,
    each row a vector loop over its columns. Flattening everything into one loop, as for
    other elementwise stages, left a division and a clamp of the flat index per lane,
    which turned every load into a gather; by rows, the row index is a scalar and the
    columns a contiguous, clamped span that codegen loads with a mask."""
    op = st.tensor.op
    assert op is not None
    names = [a.var.name for a in op.axes]
    work = _work(st)
    rows = _fuse_all(s, st, names[:-1])
    assert rows is not None
    _, xi = s.split(st.name, names[-1], _vector_block(op.axes[-1].extent))
    s.vectorize(st.name, xi)
    if work >= PARALLEL_MIN_WORK and st.leaf(rows).extent > 1:
        s.parallel(st.name, rows)


def _last_axis_contiguous(st: Stage) -> bool:
    op = st.tensor.op
    assert op is not None
    last = op.axes[-1].var if op.axes else None
    if last is None or op.axes[-1].extent == 1:
        return False
    return any(isinstance(e, Load) and e.indices and e.indices[-1] is last for e in walk(op.body))




ACCUMULATOR_LANES = 256  # 16 of the 32 zmm registers hold the tile


def _row_block(extent: int, lanes: int = 64) -> int:
    """Rows of the register tile, so that rows x lanes fills ~16 vector registers: a
    divisor of ``extent`` near that when one exists, else that many rows with the tail
    tile clamped to the last row (lowering keeps branches out of the tile)."""
    target = max(2, min(12, ACCUMULATOR_LANES // lanes))
    for f in sorted(range(2, 13), key=lambda f: (abs(f - target), -f)):
        if extent % f == 0 and abs(f - target) <= target // 2:
            return f
    return min(target, extent)


def _schedule_reduction(s: Schedule, st: Stage) -> None:
    op = st.tensor.op
    assert op is not None
    spatial = [a.var.name for a in op.axes]
    reduce = [a.var.name for a in op.reduce_axes]
    work = _work(st)
    if _last_axis_contiguous(st):
        # Register tile: rows x a vector block of columns, accumulated in a local buffer
        # over the whole reduction, then written back once.
        jo, ji = s.split(st.name, spatial[-1], _vector_block(op.axes[-1].extent))
        tile_rows: list[str] = []
        outer = [*spatial[:-1], jo]
        if len(spatial) >= 2 and op.axes[-2].extent > 1:
            io, ii = s.split(st.name, spatial[-2], _row_block(op.axes[-2].extent,
                                                              st.leaf(ji).extent))
            outer = [*spatial[:-2], io, jo]
            tile_rows = [ii]
        s.reorder(st.name, *outer, *reduce, *tile_rows, ji)
        fused = _fuse_all(s, st, outer)
        assert fused is not None
        s.cache_write(st.name, fused)
        for r in tile_rows:
            s.unroll(st.name, r)
        if st.leaf(ji).extent <= 64:
            s.vectorize(st.name, ji)
    else:
        fused = _fuse_all(s, st, spatial)
    if fused is not None and work >= PARALLEL_MIN_WORK and st.leaf(fused).extent > 1:
        s.parallel(st.name, fused)


def _try_epilogue(s: Schedule, st: Stage, readers: dict[int, list[Stage]],
                  out_ids: set[int]) -> None:
    """Fold the elementwise chain after a tiled reduction into its write-back."""
    if st.cache_at is not None:
        fuse_epilogue_chain(s, st, out_ids, readers)


def _vector_block(extent: int) -> int:
    """Lanes of a register tile's vector loop: 64, 32 or 16 (whole zmm registers), the
    widest whose masked tail wastes at most a quarter of its lanes."""
    for block in (64, 32):
        if -(-extent // block) * block - extent <= block // 4 * max(1, extent // block):
            return block
    return 16


def _schedule_window(s: Schedule, st: Stage) -> None:
    """Convolution/pooling: a register tile of output channels x output columns.

    Loops ``n, y, x.o, o.o | reduce | o.i (unrolled), x.i (vector)``: each weight is a
    scalar broadcast, each input row segment one contiguous vector load (for stride 1),
    and the input rows a tile reads stay in cache while every output-channel block uses
    them. A 1x1, stride-1, unpadded convolution is a matrix product over the flattened
    image, so its rows and columns are fused first and the vector runs along both.
    """
    op = st.tensor.op
    assert op is not None
    n, o, y, x = (a.var.name for a in op.axes)
    reduce = [a.var.name for a in op.reduce_axes]
    pointwise = (op.tag == "conv2d" and all(a.extent == 1 for a in op.reduce_axes[1:])
                 and _reads_unpadded_contiguously(st))
    if pointwise or _small_image(st):
        cols = s.fuse(st.name, y, x)
        spatial_outer: list[str] = []
    else:
        cols, spatial_outer = x, [y]
    width = st.leaf(cols).extent
    co, ci = s.split(st.name, cols, _vector_block(width))
    rows: list[str] = []
    outer = [n, *spatial_outer, co]
    if op.tag == "conv2d":
        oo, oi = s.split(st.name, o, _row_block(op.axes[1].extent, st.leaf(ci).extent))
        outer, rows = [n, *spatial_outer, co, oo], [oi]
    else:
        outer = [n, o, *spatial_outer, co]
    s.reorder(st.name, *outer, *reduce, *rows, ci)
    fused = _fuse_all(s, st, outer)
    assert fused is not None
    s.cache_write(st.name, fused)
    for r in rows:
        s.unroll(st.name, r)
    s.vectorize(st.name, ci)
    if _work(st) >= PARALLEL_MIN_WORK and st.leaf(fused).extent > 1:
        s.parallel(st.name, fused)


def _small_image(st: Stage) -> bool:
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
    lanes = _vector_block(height * width)
    if height * width > lanes:
        return False
    pitch = _input_pitch(st)
    return pitch is not None and (height - 1) * pitch + width <= 2 * lanes


def _input_pitch(st: Stage) -> int | None:
    """Elements between the input rows consecutive output rows read (stride x width),
    or None when that is not a plain multiple of the output row."""
    from ..te.schedule import input_tensors
    from ..te.visit import collect_loads

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


def _reads_unpadded_contiguously(st: Stage) -> bool:
    """True when the stage reads a placeholder (no pad stage) at unit stride in x."""
    from ..te.schedule import input_tensors

    op = st.tensor.op
    assert op is not None
    data = input_tensors(st.tensor)[0]
    if data.op is not None:  # a pad stage
        return False
    x = op.axes[3].var
    for e in walk(op.body):
        if isinstance(e, Load) and e.buffer is data:
            return e.indices[3] is x or (
                hasattr(e.indices[3], "a") and getattr(e.indices[3], "a", None) is x)
    return False
