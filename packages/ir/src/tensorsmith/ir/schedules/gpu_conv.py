"""2-D convolutions on GPUs: the matrix-product schedule over channels x pixels.

A convolution is a matrix product of the weights (output channels x ``c*kh*kw``) with
the input windows (``c*kh*kw`` x output pixels). Each workgroup computes ``to*ri``
output channels of a ``ty x (tx*rj)`` block of output pixels of one image: invocations
along the channels (``threadIdx.z``), rows (``threadIdx.y``) and columns
(``threadIdx.x``), each accumulating ``ri x rj`` outputs in registers. Input channels
are reduced ``kt`` at a time: the workgroup stages the weights of its channels and the
input window its pixels read (with the padding, which stays an inlined stage: the copy
evaluates it) in shared memory, then each invocation copies its ``ri`` weights and
``rj`` inputs per filter tap into registers. The next step's copies are loaded into
registers while the current one is used (as in ``gpu_gemm.py``).

Only ungrouped convolutions take this path (a grouped one's input channel depends on
the output channel, so its window is not a box); the others keep the simple schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..te.expr import IterVar, Load
from ..te.schedule import Schedule, Stage, input_tensors
from ..te.tiles import affine_form
from ..te.visit import collect_loads
from .gpu_gemm import MAX_INVOCATIONS, MAX_REGISTER_TILE, SHARED_FLOATS, pow2_at_least, up_to
from .knobs import Choose, conflict_unless


@dataclass(frozen=True)
class ConvTiles:
    """Invocations along channels/rows/columns, register tile, channel step."""

    to: int
    ty: int
    tx: int
    ri: int
    rj: int
    kt: int


def _window(st: Stage) -> tuple[Load, Load] | None:
    """The data and weight reads of an ungrouped convolution stage, else None."""
    op = st.tensor.op
    if (op is None or op.tag != "conv2d" or len(op.axes) != 4 or len(op.reduce_axes) != 3):
        return None
    inputs = input_tensors(st.tensor)
    if len(inputs) != 2:
        return None
    loads = collect_loads(op.body)
    data = [ld for ld in loads if ld.buffer is inputs[0]]
    weight = [ld for ld in loads if ld.buffer is inputs[1]]
    if len(data) != 1 or len(weight) != 1 or data[0].indices[1] is not op.reduce_axes[0].var:
        return None
    return data[0], weight[0]


def is_conv(st: Stage) -> bool:
    return _window(st) is not None


def _geometry(st: Stage, data: Load) -> tuple[int, int, int, int]:
    """Stride and dilation along rows and columns, read off the data index."""
    op = st.tensor.op
    assert op is not None
    out: list[int] = []
    for index, axis, tap in ((data.indices[2], op.axes[2], op.reduce_axes[1]),
                             (data.indices[3], op.axes[3], op.reduce_axes[2])):
        form = affine_form(index, {id(axis.var): 1, id(tap.var): 1})
        coefs = form[1] if form is not None else {}
        out += [abs(coefs.get(id(axis.var), 1)), abs(coefs.get(id(tap.var), 1))]
    return out[0], out[1], out[2], out[3]


def choose_tiles(st: Stage) -> ConvTiles | None:
    """Tiles for ``st``'s shape whose staged copies fit in ``SHARED_FLOATS``, or None."""
    window = _window(st)
    assert window is not None
    op = st.tensor.op
    assert op is not None
    _, o, oh, ow = (a.extent for a in op.axes)
    c = op.reduce_axes[0].extent
    rj = 4 if ow >= 64 else 2 if ow >= 16 else 1
    steps = sorted({k for k in (min(c, 8), 8, 4, 2, 1) if k <= c},
                   key=lambda k: (c % k != 0, -k))
    for ri in (4, 2, 1) if o >= 32 else (1,):  # fewer channels per workgroup if need be
        to = min(16, pow2_at_least(-(-o // ri)))
        tx = min(pow2_at_least(-(-ow // rj)), MAX_INVOCATIONS // to)
        ty = min(pow2_at_least(oh), max(1, MAX_INVOCATIONS // (to * tx)))
        for kt in steps:
            tiles = ConvTiles(to, ty, tx, ri, rj, kt)
            if shared_floats(st, tiles) <= SHARED_FLOATS:
                return tiles
    return None


def ask_tiles(st: Stage, choose: Choose, d: ConvTiles) -> ConvTiles:
    """``d`` (:func:`choose_tiles`'s), each size asked of ``choose``; a tile other than
    the default must fit every device's limits and its shared memory."""
    op = st.tensor.op
    assert op is not None
    _, o, oh, ow = (a.extent for a in op.axes)
    c = op.reduce_axes[0].extent
    t = ConvTiles(choose(st, "to", d.to, up_to((1, 2, 4, 8, 16, 32), pow2_at_least(o))),
                  choose(st, "ty", d.ty, up_to((1, 2, 4, 8, 16), pow2_at_least(oh))),
                  choose(st, "tx", d.tx, up_to((1, 2, 4, 8, 16, 32, 64), pow2_at_least(ow))),
                  choose(st, "ri", d.ri, up_to((1, 2, 4), pow2_at_least(o))),
                  choose(st, "rj", d.rj, up_to((1, 2, 4), pow2_at_least(ow))),
                  choose(st, "kt", d.kt, up_to((1, 2, 4, 8, 16), c)))
    conflict_unless(t == d or (
        t.to * t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
        and t.to * t.ri < 2 * pow2_at_least(o) and t.tx * t.rj < 2 * pow2_at_least(ow)
        and shared_floats(st, t) <= SHARED_FLOATS), "the tiles exceed a device limit")
    return t


def shared_floats(st: Stage, t: ConvTiles) -> int:
    """Elements of the shared-memory tiles ``t`` stages for ``st``: the weights of its
    channels and the input window its pixels read, one channel step of each."""
    window = _window(st)
    assert window is not None
    op = st.tensor.op
    assert op is not None
    kh, kw = op.reduce_axes[1].extent, op.reduce_axes[2].extent
    sy, dy, sx, dx = _geometry(st, window[0])
    rows = (t.ty - 1) * sy + (kh - 1) * dy + 1
    cols = (t.tx * t.rj - 1) * sx + (kw - 1) * dx + 1
    return t.to * t.ri * t.kt * kh * kw + t.kt * rows * cols


def schedule_conv(s: Schedule, st: Stage, tiles: ConvTiles | None = None,
                  staged: bool = True) -> str | None:
    """Tile ``st`` (see the module docstring); returns the loop its register tile is
    cached at, or None when no tiling fits (the caller schedules it simply).
    ``staged=False`` leaves the operands in global memory (gpu_integer.py)."""
    op = st.tensor.op
    assert op is not None
    t = tiles or choose_tiles(st)
    if t is None:
        return None
    name = st.name
    n, o, y, x = (a.var.name for a in op.axes)
    rc, ry, rx = (a.var.name for a in op.reduce_axes)
    ob, o_rest = s.split(name, o, t.to * t.ri)
    oi, t_o = s.split(name, o_rest, t.to)
    xb, x_rest = s.split(name, x, t.tx * t.rj)
    xi, t_x = s.split(name, x_rest, t.tx)
    yb, t_y = s.split(name, y, t.ty)
    rco, rci = s.split(name, rc, t.kt)
    s.reorder(name, n, yb, ob, xb, t_o, t_y, t_x, rco, rci, ry, rx, oi, xi)
    images = s.fuse(name, n, yb)
    for leaf, kind in ((images, "blockIdx.z"), (ob, "blockIdx.y"), (xb, "blockIdx.x"),
                       (t_o, "threadIdx.z"), (t_y, "threadIdx.y"), (t_x, "threadIdx.x")):
        s.annotate(name, leaf, kind)
    s.cache_write(name, t_x)
    if staged:
        data, weight = input_tensors(st.tensor)
        for tensor in (weight, data):
            s.cache_read(name, tensor.name, "shared", rco, prefetch=True)
        for tensor in (weight, data):
            s.cache_read(name, tensor.name, "local", rx)
    taps = t.kt * _extent(op.reduce_axes[1]) * _extent(op.reduce_axes[2])
    for leaf in ([rci] if taps <= 36 else []) + [ry, rx, oi, xi]:
        s.unroll(name, leaf)
    return t_x


def _extent(axis: IterVar) -> int:
    return axis.extent
