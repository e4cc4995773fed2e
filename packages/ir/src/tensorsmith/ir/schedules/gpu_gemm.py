"""Matrix products on GPUs: workgroup tiles staged in shared memory, register tiles.

For ``C[b.., i, j] = sum_k A[.., i, k] * B[.., k, j]`` each workgroup computes a
``rows x cols`` block of C with ``ty x tx`` invocations, each accumulating an
``ri x rj`` register tile. The reduction runs in steps of ``kt``: at each step the
workgroup copies the ``rows x kt`` slice of A and the ``kt x cols`` slice of B into
shared memory together (every element is fetched from global memory once per workgroup
instead of once per invocation), then each invocation copies the ``ri`` values of A and
``rj`` of B it needs per ``k`` into registers and does ``ri * rj`` multiply-adds. While a
step is used, each invocation already holds its share of the next step's slices in
registers (loaded before the multiply-adds, stored to shared memory after them), so the
global memory latency overlaps the arithmetic.

An invocation's rows and columns are interleaved with its neighbours' (``i = block +
ii * ty + thread``), so neighbouring invocations read neighbouring shared-memory words
(no bank conflicts) and write neighbouring elements of C (coalesced stores). Shapes that
no tile divides are handled by the staged copies' zero fill and the guarded write-back.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..te.schedule import Schedule, Stage, input_tensors
from .knobs import Choose, conflict_unless

#: Shared memory the staged tiles may take: the 16 KiB every Vulkan device offers.
SHARED_FLOATS = 4096
#: Enough workgroups to keep every multiprocessor of a large GPU busy: tiles shrink until
#: a product yields this many (or the smallest tile is reached).
TARGET_WORKGROUPS = 128
#: Invocations a workgroup should have at least (two 32-wide SIMD groups).
MIN_INVOCATIONS = 64
#: Invocations of one workgroup at most: what the default rules use at most, and a
#: size every GPU the runtime targets accepts.
MAX_INVOCATIONS = 256
#: Accumulators of one invocation's register tile at most (more spills to memory).
MAX_REGISTER_TILE = 64


@dataclass(frozen=True)
class GemmTiles:
    """Invocations (``ty`` x ``tx``), register tile (``ri`` x ``rj``), reduction step,
    and whether the next step's slices are loaded while the current one is used."""

    ty: int
    tx: int
    ri: int
    rj: int
    kt: int
    prefetch: bool = False

    @property
    def rows(self) -> int:
        return self.ty * self.ri

    @property
    def cols(self) -> int:
        return self.tx * self.rj


# From the largest tile (most reuse) to the smallest (most workgroups). Smaller tiles
# keep 4x4 register tiles and take fewer invocations: at 2x2 an invocation would issue a
# shared-memory load per multiply-add.
# All prefetch the next reduction step (8 more registers) to overlap memory latency.
# The largest tile steps 16 along the reduction (2 x 8 KiB of shared memory, the 16 KiB
# every Vulkan device offers): on an H200, 4096^3 fp32 ran at 35.7 TFLOP/s with it against
# 28.8 with a step of 8 (bench/gpu_gemm_variants.py; the timings are in bench/results/
# gpu_gemm_variants_h200_2026-12-03.jsonl).
CANDIDATES = (GemmTiles(16, 16, 8, 8, 16, True), GemmTiles(16, 16, 4, 4, 16, True),
              GemmTiles(8, 8, 4, 4, 16, True), GemmTiles(8, 8, 2, 2, 16, True))


def is_gemm(st: Stage) -> bool:
    """A matmul stage: spatial ``(.., i, j)``, one reduction, reading two tensors."""
    op = st.tensor.op
    return (op is not None and op.tag == "matmul" and len(op.reduce_axes) == 1
            and len(op.axes) >= 2 and len(input_tensors(st.tensor)) == 2)


def choose_tiles(batch: int, m: int, n: int, k: int) -> GemmTiles:
    """The largest tile that still gives ``TARGET_WORKGROUPS``, fitted to small extents."""
    for cand in CANDIDATES:
        t = _fit(cand, m, n, k)
        if batch * -(-m // t.rows) * -(-n // t.cols) >= TARGET_WORKGROUPS:
            return t
    return _fit(CANDIDATES[-1], m, n, k)


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def up_to(candidates: tuple[int, ...], limit: int) -> tuple[int, ...]:
    return tuple(c for c in candidates if c <= limit)


def ask_tiles(st: Stage, choose: Choose) -> GemmTiles:
    """The tiles of matmul stage ``st``: :func:`choose_tiles`'s, each size asked of
    ``choose``. A tile other than the default must fit every device's limits and not
    overhang its axis by half or more (that only wastes invocations)."""
    _, m, n, k = extents = gemm_extents(st)
    d = choose_tiles(*extents)
    rows, cols = pow2_at_least(m), pow2_at_least(n)
    t = GemmTiles(choose(st, "ty", d.ty, up_to((1, 2, 4, 8, 16, 32), rows)),
                  choose(st, "tx", d.tx, up_to((1, 2, 4, 8, 16, 32), cols)),
                  choose(st, "ri", d.ri, up_to((1, 2, 4, 8), rows)),
                  choose(st, "rj", d.rj, up_to((1, 2, 4, 8), cols)),
                  choose(st, "kt", d.kt, up_to((4, 8, 16, 32), max(k, 4))),
                  choose(st, "prefetch", d.prefetch, (False, True)))
    conflict_unless(t == d or (
        t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
        and (t.rows + t.cols) * t.kt <= SHARED_FLOATS
        and t.rows < 2 * rows and t.cols < 2 * cols), "the tiles exceed a device limit")
    return t


def _fit(t: GemmTiles, m: int, n: int, k: int) -> GemmTiles:
    """Shrink a tile along an axis it overhangs by half or more, move invocations freed
    that way to the other axis (a workgroup of a few invocations leaves most of a SIMD
    unit idle), and pick a reduction step that divides ``k`` when one is close."""
    ty, ri = _fit_axis(m, t.ty, t.ri)
    tx, rj = _fit_axis(n, t.tx, t.rj)
    while ty * tx < MIN_INVOCATIONS and tx * rj < n:
        tx, rj = (tx * 2, rj // 2) if rj > 1 else (tx * 2, rj)
    while ty * tx < MIN_INVOCATIONS and ty * ri < m:
        ty, ri = (ty * 2, ri // 2) if ri > 1 else (ty * 2, ri)
    kt = min(t.kt, k)
    if k % kt:
        kt = next((c for c in range(kt, 3, -1) if k % c == 0), kt)
    return GemmTiles(ty, tx, ri, rj, kt, t.prefetch)


def _fit_axis(extent: int, threads: int, per: int) -> tuple[int, int]:
    while per > 1 and threads * per >= 2 * extent:
        per //= 2
    while threads > 1 and threads * per >= 2 * extent:
        threads //= 2
    return threads, per


def gemm_extents(st: Stage) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a matmul stage: its batch axes' product, rows, columns and
    reduction length."""
    op = st.tensor.op
    assert op is not None
    nbatch = 1
    for a in op.axes[:-2]:
        nbatch *= a.extent
    return nbatch, op.axes[-2].extent, op.axes[-1].extent, op.reduce_axes[0].extent


def schedule_gemm(s: Schedule, st: Stage, tiles: GemmTiles | None = None,
                  staged: bool = True) -> str:
    """Tile ``st`` (see the module docstring); returns the loop the register tile is
    cached at, where an elementwise epilogue can be fused. ``staged=False`` leaves the
    operands in global memory (no shared or register copies: gpu_integer.py)."""
    op = st.tensor.op
    assert op is not None
    *batch, i, j = (a.var.name for a in op.axes)
    (k,) = (a.var.name for a in op.reduce_axes)
    t = tiles or choose_tiles(*gemm_extents(st))
    name = st.name
    ib, i_rest = s.split(name, i, t.rows)
    ii, ti = s.split(name, i_rest, t.ty)
    jb, j_rest = s.split(name, j, t.cols)
    jj, tj = s.split(name, j_rest, t.tx)
    ko, ki = s.split(name, k, t.kt)
    outer: list[str] = []
    if batch:
        fused = batch[0]
        for axis in batch[1:]:
            fused = s.fuse(name, fused, axis)
        outer = [fused]
    s.reorder(name, *outer, ib, jb, ti, tj, ko, ki, ii, jj)
    if outer:
        s.annotate(name, outer[0], "blockIdx.z")
    s.annotate(name, ib, "blockIdx.y")
    s.annotate(name, jb, "blockIdx.x")
    s.annotate(name, ti, "threadIdx.y")
    s.annotate(name, tj, "threadIdx.x")
    s.cache_write(name, tj)
    if staged:
        a, b = input_tensors(st.tensor)
        for tensor in (a, b):
            s.cache_read(name, tensor.name, "shared", ko, prefetch=t.prefetch)
        for tensor in (a, b):
            s.cache_read(name, tensor.name, "local", ki)
    for leaf in (ki, ii, jj):
        s.unroll(name, leaf)
    return tj
