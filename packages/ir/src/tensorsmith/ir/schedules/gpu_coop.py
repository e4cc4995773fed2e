"""Matrix products on cooperative matrices: the GPU rule for float16 products on a
target whose GPU multiplies whole subgroup-held blocks (``vulkan
-cooperative-matrix=16x16x16``, see codegen-spirv's target options).

The product is tensorized (``Schedule.tensorize``, lowered by te/matrix_lower.py, whose
docstring describes the kernel); this module decides when, and sizes it. Every size is
asked of ``choose`` so the auto-tuner searches the same kernel: subgroups per workgroup
along M and N (``warps_m``, ``warps_n``), accumulator fragments per subgroup
(``frags_m``, ``frags_n``), the reduction step (``kt``), whether shared tiles hold
16-byte words or float16 elements (``tile_lanes``, 8 or 1), the padding of their rows
(``pad``), steps prefetched into registers (``prefetch``), the sub-steps multiplied
before the prefetched step is stored (``stash_after``), fragments loaded a step ahead
(``preload``), the grouping of workgroups for L2 reuse (``raster``) and the operands
whose fragments are loaded from global memory instead of shared tiles (``a_global``,
``b_global``), and the order of A's chunks among the invocations (``a_interleave``);
te/matrix_lower.py says what each does to the kernel.

Where the target also offers matrices a whole workgroup holds (``-workgroup-matrix``,
NVIDIA's VK_NV_cooperative_matrix2), the rule first asks ``workgroup``: with 1, a
workgroup of ``wg_invocations`` multiplies one ``wg_rows x wg_k`` block of A by one
``wg_k x wg_cols`` block of B per step, read from global memory, and the driver stages
and splits the work itself. It is the default where one of
:data:`WORKGROUP_CANDIDATES` divides the product, fills the GPU and stores its result
directly; on an H100 it then runs 13% faster than the subgroup kernel at 4096^3.
Products this kernel cannot take (float32 operands, sizes known only at run time, K or
N not a multiple of 8, an operand computed in the kernel) keep the tiled rule of
gpu_gemm.py, as does every product on a target without cooperative matrices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..op_registry import TensorType, get_op
from ..target import GpuResources, MatrixShape, WorkgroupMatrix
from ..te.matrix_lower import ACC_DTYPE, INPUT_DTYPE, PREFETCH, Params, Product, writes_directly
from ..te.schedule import Schedule, Stage
from ..te.tensor import Tensor, placeholder
from .knobs import Choose, conflict_unless

#: Rows of shared memory are padded by this many elements by default (16 bytes: chunks
#: stay aligned, and the eight 16-byte row pieces a fragment load reads at once fall in
#: distinct banks for rows of 16 + 8, 32 + 8 and 128 + 8 float16).
PAD = 8
#: Accumulator fragments of one subgroup at most: 16 float32 16x16 fragments are 128
#: registers of each of 32 invocations, the most that leaves room for the operands.
MAX_FRAGMENTS = 16


@dataclass(frozen=True)
class CoopTiles:
    """Subgroups (``warps_m`` x ``warps_n``), fragments per subgroup, reduction step,
    elements per element of the shared tiles, and the pipeline's choices (row padding,
    steps prefetched, sub-steps before the stash, 0 for all; workgroup grouping; fragments
    loaded a step ahead; operands whose fragments are loaded from global memory; the order
    of A's chunks)."""

    warps_m: int
    warps_n: int
    frags_m: int
    frags_n: int
    kt: int
    tile_lanes: int = 8
    pad: int = PAD
    prefetch: int = 1
    stash_after: int = 0
    raster: int = 1
    preload: int = 0
    a_global: int = 0
    b_global: int = 0
    a_interleave: int = 0


#: From the largest block to the smallest, as measured on an H100 at 4096^3
#: (bench/results/gpu_coop_h100_2026-12-05.txt). 2x4 subgroups of 4x4 fragments make a
#: 128x256 block of 256 invocations; with fragments loaded a step ahead, two steps
#: prefetched and workgroups grouped by 8 block rows it ran at 269 TFLOP/s, against 222
#: for 4x2 subgroups without the pipeline choices and 177 for the first default (2x4
#: subgroups of 4x2 fragments, k 32). A reduction step of 16 beat 32 for every block.
#: The grouped form needs the block rows to be a multiple of 8; the next one does not.
_PIPELINED = {"prefetch": 2, "preload": 1}
CANDIDATES = (CoopTiles(2, 4, 4, 4, 16, raster=8, **_PIPELINED),
              CoopTiles(2, 4, 4, 4, 16, **_PIPELINED), CoopTiles(4, 2, 4, 4, 16),
              CoopTiles(2, 2, 4, 4, 16), CoopTiles(2, 2, 2, 2, 32), CoopTiles(1, 2, 2, 2, 32),
              CoopTiles(1, 1, 1, 1, 16))
#: Enough workgroups to fill a large GPU: blocks shrink until a product yields this many.
TARGET_WORKGROUPS = 128


@dataclass(frozen=True)
class WorkgroupTiles:
    """The block of a workgroup-held product: rows and columns of C, the reduction
    step, the workgroup's invocations (one of the target's ``-workgroup-matrix``
    entries), the grouping of workgroups for L2 reuse (as ``CoopTiles.raster``), whether
    each step's operands are requested before the previous step's product, and the
    steps one trip of the loop over K takes (the loop unrolled)."""

    rows: int
    cols: int
    kt: int
    invocations: int
    raster: int = 1
    preload: int = 0
    substeps: int = 1


#: The default workgroup-held blocks, as measured on an H100 and an H200 at 4096^3
#: against the subgroup kernel's 268-270 TFLOP/s (bench/results/gpu_coop_h100_2026-12-05.txt,
#: gpu_coop_h200_2026-12-05.txt): 128x256 blocks of 256 invocations reached 303-305 at a
#: step of 64 (196 at 32, 131 at 16; 128 spilled and 256 did not build), 310-312 with the
#: loop over K unrolled by two (``substeps`` 2: two steps of 64 a trip; 4: 160); 128x128
#: blocks of 128 invocations 280 (291 unrolled); wider, taller or smaller blocks, and
#: preloading, ran slower. The first that divides the product and yields
#: ``TARGET_WORKGROUPS`` workgroups is the default; where none does (smaller products, a
#: trip of 128 not dividing K) the subgroup kernel, which runs as fast there, is the
#: default, and the ``workgroup`` knob can still ask for a block.
WORKGROUP_CANDIDATES = (WorkgroupTiles(128, 256, 64, 256, 8, substeps=2),
                        WorkgroupTiles(128, 128, 64, 128, 8, substeps=2))


def workgroup_params(t: WorkgroupTiles) -> dict[str, int]:
    """The ``matrix_product`` parameters of a workgroup-held block (te/matrix_lower.py):
    one fragment of the whole block, held by the workgroup's invocations."""
    return {"m": t.rows, "n": t.cols, "k": t.kt, "warps_m": 1, "warps_n": 1, "frags_m": 1,
            "frags_n": 1, "kt": t.kt * t.substeps, "subgroup": t.invocations, "pad": PAD,
            "tile_lanes": 8, "raster": t.raster, "preload": t.preload, "a_global": 1,
            "b_global": 1, "workgroup": 1}


def _workgroup_fits(product: Product, entries: list[WorkgroupMatrix], t: WorkgroupTiles,
                    tensor: Tensor, epilogue: Stage | None) -> bool:
    """Whether block ``t`` divides the product, is a block of the target's entry for
    its invocations, and stores its result directly (no scratch: a workgroup-held
    accumulator is as large as the block)."""
    w = next((e for e in entries if e.invocations == t.invocations), None)
    return (w is not None
            and all(d % g == 0 and d <= w.max_dimension
                    for d, g in ((t.rows, w.m), (t.cols, w.n), (t.kt, w.k)))
            and product.m % t.rows == 0 and product.n % t.cols == 0
            and product.k % (t.kt * t.substeps) == 0 and (product.m // t.rows) % t.raster == 0
            and not (t.preload and t.substeps > 1)
            and writes_directly(product, Params(workgroup_params(t)), tensor, epilogue))


def _schedule_workgroup(s: Schedule, st: Stage, choose: Choose, resources: GpuResources,
                        epilogue: Stage | None) -> bool:
    """Tensorize ``st`` on workgroup-held matrices where the target has them and the
    ``workgroup`` knob says so (see the module docstring); False leaves it to the
    subgroup kernel."""
    entries = [w for w in resources.workgroup_matrices
               if (w.a, w.c) == (INPUT_DTYPE, ACC_DTYPE)
               and w.invocations <= resources.max_invocations]
    product = Product(st)
    if not entries or product.problem:
        return False
    batch = math.prod(product.batch)
    default = next((t for t in WORKGROUP_CANDIDATES
                    if _workgroup_fits(product, entries, t, st.tensor, epilogue)
                    and batch * (product.m // t.rows) * (product.n // t.cols)
                    >= TARGET_WORKGROUPS), None)
    if not choose(st, "workgroup", int(default is not None), (1, 0)):
        return False
    widest = max(entries, key=lambda e: e.invocations)
    d = default or WorkgroupTiles(widest.m, widest.n, widest.k, widest.invocations)
    t = WorkgroupTiles(choose(st, "wg_rows", d.rows, (32, 64, 128, 256)),
                       choose(st, "wg_cols", d.cols, (32, 64, 128, 256, 512)),
                       choose(st, "wg_k", d.kt, (16, 32, 64)),
                       choose(st, "wg_invocations", d.invocations,
                              tuple(sorted({e.invocations for e in entries}))),
                       choose(st, "raster", d.raster, (1, 2, 4, 8, 16)),
                       choose(st, "preload", d.preload, (0, 1)),
                       choose(st, "wg_substeps", d.substeps, (1, 2, 4)))
    conflict_unless((t == default) or _workgroup_fits(product, entries, t, st.tensor,
                                                      epilogue),
                    "the workgroup-held block does not divide the product or the "
                    "device's sizes")
    s.tensorize(st.name, "matrix_product", workgroup_params(t))
    return True


def matrix_shape(st: Stage, resources: GpuResources) -> MatrixShape | None:
    """The cooperative-matrix shape ``st`` would be tensorized with on a GPU of
    ``resources``, or None when that GPU has none for it or the kernel cannot take it."""
    shape = resources.matrix_shape(INPUT_DTYPE, ACC_DTYPE)
    if shape is None or Product(st).problem:
        return None
    return shape


def takes_matmul(a: TensorType, b: TensorType, resources: GpuResources) -> bool:
    """Whether this rule would tensorize the graph's ``matmul`` of ``a`` and ``b`` on a
    GPU of ``resources``: asked of the stage the op's compute makes, so a graph pass
    that turns other ops into products (passes/pointwise_convs.py) applies exactly
    :class:`Product`'s conditions and the device's, never a copy of them."""
    op = get_op("matmul")
    inputs = [placeholder(t.shape, t.dtype, f"in{i}") for i, t in enumerate((a, b))]
    outputs = op.compute(inputs, {}, op.infer([a, b], {}), "product")
    st = Schedule(outputs)["product"]
    shape = matrix_shape(st, resources)
    return shape is not None and choose_tiles(st, shape, resources) is not None


def params(shape: MatrixShape, tiles: CoopTiles, subgroup: int) -> dict[str, int]:
    return {"m": shape.m, "n": shape.n, "k": shape.k, "warps_m": tiles.warps_m,
            "warps_n": tiles.warps_n, "frags_m": tiles.frags_m, "frags_n": tiles.frags_n,
            "kt": tiles.kt, "subgroup": subgroup, "pad": tiles.pad, "tile_lanes": tiles.tile_lanes,
            "prefetch": tiles.prefetch, "stash_after": tiles.stash_after or tiles.kt // shape.k,
            "raster": tiles.raster, "preload": tiles.preload, "a_global": tiles.a_global,
            "b_global": tiles.b_global, "a_interleave": tiles.a_interleave}


def _fits(st: Stage, shape: MatrixShape, tiles: CoopTiles, resources: GpuResources,
          epilogue: Stage | None) -> bool:
    """Whether ``tiles`` fit the device and ``st`` with ``epilogue`` fused (whose
    write-back may need a scratch in workgroup memory, te/matrix_lower.py)."""
    p = Params(params(shape, tiles, resources.subgroup_size))
    product = Product(st)
    scratch = not writes_directly(product, p, st.tensor, epilogue)
    return (p.threads <= resources.max_invocations
            and tiles.frags_m * tiles.frags_n <= MAX_FRAGMENTS
            and tiles.kt % shape.k == 0 and p.pad % 8 == 0
            and p.stash_after <= p.kt // shape.k and p.prefetch in PREFETCH
            and -(-product.m // p.rows) % p.raster == 0
            and (not p.preload or p.kt == shape.k)
            and (not p.a_interleave or p.kt == 16)
            and (not p.a_global or (product.m % p.rows == 0 and product.k % p.kt == 0))
            and (not p.b_global or (product.k % p.kt == 0 and product.n % p.cols == 0))
            and p.shared_bytes(scratch) <= resources.shared_bytes)


def choose_tiles(st: Stage, shape: MatrixShape, resources: GpuResources,
                 epilogue: Stage | None = None) -> CoopTiles | None:
    """The largest block that fits the workgroup memory and still gives
    ``TARGET_WORKGROUPS`` workgroups (else the smallest that fits), or None."""
    product = Product(st)
    batch = math.prod(product.batch)
    fitting = [t for t in CANDIDATES if _fits(st, shape, t, resources, epilogue)]
    for t in fitting:
        rows, cols = t.warps_m * t.frags_m * shape.m, t.warps_n * t.frags_n * shape.n
        if batch * -(-product.m // rows) * -(-product.n // cols) >= TARGET_WORKGROUPS:
            return t
    return fitting[-1] if fitting else None


def ask_tiles(st: Stage, choose: Choose, shape: MatrixShape, d: CoopTiles,
              resources: GpuResources, epilogue: Stage | None = None) -> CoopTiles:
    """``d`` with each size asked of ``choose``; other answers must fit the device."""
    t = CoopTiles(choose(st, "warps_m", d.warps_m, (1, 2, 4)),
                  choose(st, "warps_n", d.warps_n, (1, 2, 4)),
                  choose(st, "frags_m", d.frags_m, (1, 2, 4)),
                  choose(st, "frags_n", d.frags_n, (1, 2, 4)),
                  choose(st, "kt", d.kt, (16, 32, 64)),
                  choose(st, "tile_lanes", d.tile_lanes, (8, 1)),
                  choose(st, "pad", d.pad, (8, 16, 24)),
                  choose(st, "prefetch", d.prefetch, PREFETCH),
                  choose(st, "stash_after", d.stash_after, (0, 1, 2, 3)),
                  choose(st, "raster", d.raster, (1, 2, 4, 8, 16)),
                  choose(st, "preload", d.preload, (0, 1)),
                  choose(st, "a_global", d.a_global, (0, 1)),
                  choose(st, "b_global", d.b_global, (0, 1)),
                  choose(st, "a_interleave", d.a_interleave, (0, 1)))
    conflict_unless(t == d or _fits(st, shape, t, resources, epilogue),
                    "the cooperative-matrix tiles exceed a device limit")
    return t


def schedule_coop(s: Schedule, st: Stage, choose: Choose, resources: GpuResources,
                  epilogue: Stage | None = None) -> bool:
    """Tensorize matmul stage ``st`` when the target's cooperative matrices can compute
    it (see the module docstring); False leaves it to the tiled rule. ``epilogue``: the
    stage the caller will fuse into ``st``'s write-back, if any."""
    if _schedule_workgroup(s, st, choose, resources, epilogue):
        return True
    shape = matrix_shape(st, resources)
    if shape is None:
        return False
    default = choose_tiles(st, shape, resources, epilogue)
    if default is None:
        return False
    tiles = ask_tiles(st, choose, shape, default, resources, epilogue)
    s.tensorize(st.name, "matrix_product", params(shape, tiles, resources.subgroup_size))
    return True


__all__ = ["CANDIDATES", "WORKGROUP_CANDIDATES", "CoopTiles", "WorkgroupTiles", "ask_tiles",
           "choose_tiles", "matrix_shape", "schedule_coop", "takes_matmul", "workgroup_params"]
