"""Integer matrix products (``qmatmul``) on GPUs: gpu_gemm.py's tiles, unstaged.

``qmatmul`` (ops/integer.py) has the loop structure of a float matrix product, each step
of its reduction a dot of four bytes (four adjacent activation bytes and the weight's
four bytes of that step, ``w[k, j, 0..3]``). So gpu_gemm.py's loops tile it: workgroups
of ``ty x tx`` invocations, each accumulating an ``ri x rj`` register tile of int32
sums, the reduction unrolled by ``kt`` dots, so each word of A an invocation reads meets
``rj`` words of B in registers. The operands are read from global memory where they
are: the shared-memory copies of the float schedule cannot stage the four bytes of a dot
(te/tiles.py stages one offset per tensor), and a packed dot (codegen-spirv's dot4.py)
needs its bytes in the parameter's buffer. Without this rule a qmatmul ran one output
per invocation, or per workgroup when long (gpu.py), 3x slower than the float product
it replaces on lavapipe; tiled it is faster (bench/quantized_gpu.py).
"""

from __future__ import annotations

from ..te.schedule import Stage, input_tensors
from .gpu_gemm import (
    MAX_INVOCATIONS,
    MAX_REGISTER_TILE,
    GemmTiles,
    choose_tiles,
    gemm_extents,
    pow2_at_least,
    up_to,
)
from .knobs import Choose, conflict_unless

#: Dots of the reduction unrolled (the float schedule's step of 16 products, in dots).
UNROLL = 4


def is_integer_gemm(st: Stage) -> bool:
    """A qmatmul stage: spatial ``(.., i, j)``, one reduction (of dots), two inputs."""
    op = st.tensor.op
    return (op is not None and op.tag == "qmatmul" and len(op.reduce_axes) == 1
            and len(op.axes) >= 2 and len(input_tensors(st.tensor)) == 2)


def ask_tiles(st: Stage, choose: Choose) -> GemmTiles:
    """The tiles of qmatmul stage ``st``: gpu_gemm's invocations and register tile for
    its extents (counted in dots along the reduction), the reduction unrolled by
    :data:`UNROLL` dots (or what divides it); each size asked of ``choose`` (knobs ``ty tx
    ri rj kt``; nothing is prefetched: nothing is staged)."""
    _, m, n, k = extents = gemm_extents(st)
    d = choose_tiles(*extents)
    kt = min(UNROLL, k)
    while k % kt:
        kt -= 1
    d = GemmTiles(d.ty, d.tx, d.ri, d.rj, kt, prefetch=False)
    rows, cols = pow2_at_least(m), pow2_at_least(n)
    t = GemmTiles(choose(st, "ty", d.ty, up_to((1, 2, 4, 8, 16, 32), rows)),
                  choose(st, "tx", d.tx, up_to((1, 2, 4, 8, 16, 32), cols)),
                  choose(st, "ri", d.ri, up_to((1, 2, 4, 8), rows)),
                  choose(st, "rj", d.rj, up_to((1, 2, 4, 8), cols)),
                  choose(st, "kt", d.kt, up_to((1, 2, 4, 8), k)), prefetch=False)
    conflict_unless(t == d or (
        t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
        and t.rows < 2 * rows and t.cols < 2 * cols), "the tiles exceed a device limit")
    return t
