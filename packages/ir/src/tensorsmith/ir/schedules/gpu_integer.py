"""Integer products on GPUs (``qmatmul``, ``qconv2d``): the float rules' tiles, unstaged.

``qmatmul`` and NCHW ``qconv2d`` (ops/integer.py) have the loop structure of a float
matrix product and convolution, each step of their reduction a dot of four bytes (four
activation bytes and the weight's four bytes of that step). So gpu_gemm.py's and
gpu_conv.py's loops tile them: workgroups of invocations, each accumulating an ``ri x
rj`` register tile of int32 sums (output rows or channels x columns or pixels), the
reduction unrolled by ``kt`` dots, so each activation word an invocation reads meets
``ri`` or ``rj`` weight words in registers. The operands are read from global memory
where they are: the shared-memory copies of the float schedules cannot stage the four
bytes of a dot (te/tiles.py stages one offset per tensor), and a packed dot
(codegen-spirv's dot4.py) loads a word only from a parameter's buffer. Untiled (one
output per invocation, or per workgroup when long) they ran 2-5x slower than the float
ones on lavapipe and PoCL; tiled they run faster (build._integer_products quotes
bench/quantized_gpu.py).
"""

from __future__ import annotations

from ..te.schedule import Stage, input_tensors
from .gpu_conv import ConvTiles
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


def is_integer_conv(st: Stage) -> bool:
    """A plain (NCHW) qconv2d stage: axes ``(n, o, y, x)``, reduction ``(rc, ry, rx)``
    over dots of four channels, two inputs (the padded data, inlined, and the weight)."""
    op = st.tensor.op
    return (op is not None and op.tag == "qconv2d" and len(op.axes) == 4
            and len(op.reduce_axes) == 3 and len(input_tensors(st.tensor)) == 2)


def ask_conv_tiles(st: Stage, choose: Choose) -> ConvTiles:
    """gpu_conv.py's loops for qconv2d stage ``st``, unstaged: invocations along output
    channels (``to``), rows (``ty``) and columns (``tx``), each an ``ri x rj`` register
    tile of channels x pixels, the channel dots unrolled by ``kt``; sized as gpu_conv
    sizes them (without its shared-memory bound: nothing is staged), each asked of
    ``choose``."""
    op = st.tensor.op
    assert op is not None
    # (static: a kernel with run-time sizes is scheduled on a stand-in, gpu_dynamic.py)
    _, o, oh, ow = (int(a.extent) for a in op.axes)
    c4 = int(op.reduce_axes[0].extent)
    rj = 4 if ow >= 64 else 2 if ow >= 16 else 1
    ri = 4 if o >= 32 else 1
    to = min(16, pow2_at_least(-(-o // ri)))
    tx = min(pow2_at_least(-(-ow // rj)), MAX_INVOCATIONS // to)
    ty = min(pow2_at_least(oh), max(1, MAX_INVOCATIONS // (to * tx)))
    kt = min(c4, 2)
    while c4 % kt:
        kt -= 1
    d = ConvTiles(to, ty, tx, ri, rj, kt)
    t = ConvTiles(choose(st, "to", d.to, up_to((1, 2, 4, 8, 16, 32), pow2_at_least(o))),
                  choose(st, "ty", d.ty, up_to((1, 2, 4, 8, 16), pow2_at_least(oh))),
                  choose(st, "tx", d.tx, up_to((1, 2, 4, 8, 16, 32, 64), pow2_at_least(ow))),
                  choose(st, "ri", d.ri, up_to((1, 2, 4), pow2_at_least(o))),
                  choose(st, "rj", d.rj, up_to((1, 2, 4), pow2_at_least(ow))),
                  choose(st, "kt", d.kt, up_to((1, 2, 4), c4)))
    conflict_unless(t == d or (
        t.to * t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
        and t.to * t.ri < 2 * pow2_at_least(o) and t.tx * t.rj < 2 * pow2_at_least(ow)),
        "the tiles exceed a device limit")
    return t
