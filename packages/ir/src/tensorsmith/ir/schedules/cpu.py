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
"""

from __future__ import annotations

from ..te.expr import Load
from ..te.schedule import Schedule, Stage
from ..te.tensor import Tensor
from ..te.visit import walk

PARALLEL_MIN_WORK = 1 << 15
VECTOR_BLOCK = 64


def schedule_cpu(outputs: list[Tensor], num_threads: int = 0) -> Schedule:
    s = Schedule(outputs)
    out_ids = {t.uid for t in outputs}
    readers = _readers(s)
    for st in s.stages:
        op = st.tensor.op
        assert op is not None
        if st.tensor.uid not in out_ids and not op.reduce_axes and not st.name.endswith("_pad"):
            s.compute_inline(st.name)
        elif op.reduce_axes and (op.tag == "conv2d" or op.tag.startswith("pool_")):
            _schedule_window(s, st)
            _try_epilogue(s, st, readers, out_ids)
        elif op.reduce_axes:
            _schedule_reduction(s, st)
            _try_epilogue(s, st, readers, out_ids)
        else:
            _schedule_elementwise(s, st)
    return s


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
    fused = _fuse_all(s, st, [lf.name for lf in st.leaves])
    if fused is not None and _work(st) >= PARALLEL_MIN_WORK:
        s.parallel(st.name, fused)


def _inner_block(extent: int) -> int:
    """A block for the vector loop that divides ``extent`` when it can (no tail guard)."""
    if extent <= VECTOR_BLOCK:
        return extent
    for f in range(VECTOR_BLOCK, 7, -1):
        if extent % f == 0:
            return f
    return VECTOR_BLOCK


def _last_axis_contiguous(st: Stage) -> bool:
    op = st.tensor.op
    assert op is not None
    last = op.axes[-1].var if op.axes else None
    if last is None or op.axes[-1].extent == 1:
        return False
    return any(isinstance(e, Load) and e.indices and e.indices[-1] is last for e in walk(op.body))


ROW_BLOCKS = (4, 6, 8, 5, 7, 3, 2)


def _row_block(extent: int) -> int:
    """Rows of the register tile: a divisor of ``extent`` so no guard enters the tile."""
    for f in ROW_BLOCKS:
        if extent % f == 0:
            return f
    return 1


def _schedule_reduction(s: Schedule, st: Stage) -> None:
    op = st.tensor.op
    assert op is not None
    spatial = [a.var.name for a in op.axes]
    reduce = [a.var.name for a in op.reduce_axes]
    work = _work(st)
    if _last_axis_contiguous(st):
        # Register tile: rows x a vector block of columns, accumulated in a local buffer
        # over the whole reduction, then written back once.
        jo, ji = s.split(st.name, spatial[-1], _inner_block(op.axes[-1].extent))
        tile_rows: list[str] = []
        outer = [*spatial[:-1], jo]
        if len(spatial) >= 2 and op.axes[-2].extent > 1:
            io, ii = s.split(st.name, spatial[-2], _row_block(op.axes[-2].extent))
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


def _readers(s: Schedule) -> dict[int, list[Stage]]:
    """Stages reading each tensor, looking through stages that will be inlined."""
    from ..te.schedule import input_tensors

    out: dict[int, list[Stage]] = {}
    for st in s.stages:
        for t in input_tensors(st.tensor):
            out.setdefault(t.uid, []).append(st)
    return out


def _try_epilogue(s: Schedule, st: Stage, readers: dict[int, list[Stage]],
                  out_ids: set[int]) -> None:
    """Fold the elementwise chain after a tiled reduction into its write-back."""
    if st.cache_at is None or st.tensor.uid in out_ids:
        return
    chain = st
    while True:
        users = readers.get(chain.tensor.uid, [])
        if len(users) != 1:
            return
        user = users[0]
        op = user.tensor.op
        if op is None or op.reduce_axes or user.tensor.shape != st.tensor.shape:
            return
        if user.tensor.uid in out_ids:
            try:
                s.fuse_epilogue(st.name, user.name)
            except ValueError:
                s.steps.pop()
            return
        chain = user


def _schedule_window(s: Schedule, st: Stage) -> None:
    """Convolution/pooling: a register tile of output channels x output columns.

    Loops ``n, o.o, y, x.o | reduce | o.i (unrolled), x.i (vector)``: each weight is a
    scalar broadcast, each input row segment one contiguous vector load (for stride 1).
    """
    op = st.tensor.op
    assert op is not None
    n, o, y, x = (a.var.name for a in op.axes)
    reduce = [a.var.name for a in op.reduce_axes]
    xo, xi = s.split(st.name, x, _inner_block(op.axes[3].extent))
    rows: list[str] = []
    outer = [n, o, y, xo]
    if op.tag == "conv2d":
        oo, oi = s.split(st.name, o, _row_block(op.axes[1].extent))
        outer, rows = [n, oo, y, xo], [oi]
    s.reorder(st.name, *outer, *reduce, *rows, xi)
    fused = _fuse_all(s, st, outer)
    assert fused is not None
    s.cache_write(st.name, fused)
    for r in rows:
        s.unroll(st.name, r)
    s.vectorize(st.name, xi)
    if _work(st) >= PARALLEL_MIN_WORK and st.leaf(fused).extent > 1:
        s.parallel(st.name, fused)
