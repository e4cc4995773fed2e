"""2-D convolution and pooling (NCHW). 1-D and 3-D forms are reshaped by the importer.

Padding is its own stage (``*_pad``): materialized once per kernel it makes every load
of the convolution's inner loop unconditional and contiguous, which is what lets the
CPU schedule vectorize across output columns.

Both also run on channel-blocked activations (``NCHW[b]c``: ``[N, C / b, H, W, b]``,
see passes/blocked_layout.py). A convolution with ``block=b`` writes its output so; its
input may be blocked (rank 5) or plain NCHW (a first layer of three channels). A pooling
window of a rank-5 input keeps the input's blocks. Weights stay OIHW in the graph: the
CPU rule stores them blocked (``[O / b, C, KH, KW, b]``) as a ``layout`` step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..dtypes import accumulator
from ..op_registry import Attrs, Pattern, TensorType, check, check_dim, register
from ..symbolic import Dim, SymbolicDimError, dim_max, dim_min, is_static, shape_text, static_dim
from ..te.expr import Expr, const, select


def _out_size(n: Dim, k: int, stride: int, pad0: int, pad1: int, dil: int, ceil: bool = False
              ) -> Dim:
    """Windows along an axis of ``n``; a symbolic ``n`` with a stride gives a floordiv
    (``(h - 1)//2 + 1``), whose ceiling is written as a floor so that it prints so."""
    span = n + pad0 + pad1 - dil * (k - 1) - 1
    if ceil:
        return (-(-span // stride) if isinstance(span, int) else (span + stride - 1) // stride) + 1
    return span // stride + 1


def _ceil_mode_size(o: Dim, n: Dim, stride: int, pad0: int) -> Dim:
    """``o`` windows of ceil mode less the last one where it starts past the input and
    its left padding (ONNX's rule). Where only the run-time size can tell, the count is
    that of the windows that start inside: at most one fewer, ``min(o, (n + pad0 -
    1)//stride + 1)``."""
    try:
        return o - 1 if (o - 1) * stride >= n + pad0 else o
    except SymbolicDimError:
        return dim_min(o, (n + pad0 - 1) // stride + 1)


def _static_weight(w: TensorType) -> tuple[int, ...]:
    """The weight's shape, which must be static: it gives the window and the channels."""
    return tuple(static_dim(d, f"the conv2d weight's {'OIHW'[i]} dim (of {shape_text(w.shape)})")
                 for i, d in enumerate(w.shape))


def _geometry(attrs: Attrs, kh: int, kw: int) -> tuple[list[int], list[int], list[int]]:
    strides = list(attrs.get("strides", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    dil = list(attrs.get("dilations", [1, 1]))
    return strides, pads, dil


def pad_stage(x: te.Tensor, pads: Sequence[int], value: float, tag: str,
              dtype: str | None = None) -> te.Tensor:
    """x padded spatially by ``pads`` = [top, left, bottom, right] with ``value``, and
    converted to ``dtype`` if given (a stage even without padding, then)."""
    top, left, bottom, right = pads
    dtype = dtype or x.dtype
    if not any(pads) and dtype == x.dtype:
        return x
    n, c, h, w, *block = x.shape
    fill = const(value, dtype)

    def element(i: Expr, j: Expr, y: Expr, z: Expr, *rest: Expr) -> Expr:
        if not any(pads):
            return te.cast(dtype, x[(i, j, y, z, *rest)])
        inside = (y >= top) & (y < top + h) & (z >= left) & (z < left + w)
        yy = te.maximum(te.minimum(y - top, h - 1), 0)
        zz = te.maximum(te.minimum(z - left, w - 1), 0)
        return select(inside, te.cast(dtype, x[(i, j, yy, zz, *rest)]), fill)

    return te.compute((n, c, h + top + bottom, w + left + right, *block), element,
                      name=tag + "_pad")


def block_channels(a: np.ndarray, block: int) -> np.ndarray:
    """NCHW -> ``[N, C / block, H, W, block]``."""
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def unblock_channels(a: np.ndarray) -> np.ndarray:
    """``[N, C / b, H, W, b]`` -> NCHW."""
    n, cb, h, w, b = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def _plain(t: TensorType) -> TensorType:
    """The NCHW type of a (possibly blocked) activation."""
    if len(t.shape) != 5:
        return t
    n, cb, h, w, b = t.shape
    return TensorType((n, cb * b, h, w), t.dtype)


def _conv_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    block = attrs.get("block", 0)
    if block:
        check(len(inputs[0].shape) in (4, 5), "a blocked conv2d takes an NCHW or "
              f"[N, C/b, H, W, b] input, got {shape_text(inputs[0].shape)}")
        check(_static_weight(inputs[1])[0] % block == 0,
              f"{inputs[1].shape[0]} output channels are not blocks of {block}")
        n, o, oh, ow = _conv_infer([_plain(inputs[0]), inputs[1]], _unblocked(attrs))[0].shape
        return [TensorType((n, o // block, oh, ow, block), inputs[0].dtype)]
    x, w = inputs[0], inputs[1]
    check(len(x.shape) == 4 and len(w.shape) == 4, f"conv2d takes NCHW input and OIHW "
          f"weight, got {shape_text(x.shape)}, {shape_text(w.shape)}")
    o, cg, kh, kw = _static_weight(w)
    groups = attrs.get("groups", 1)
    check_dim(x.shape[1], "==", cg * groups,
              f"input has {x.shape[1]} channels but weight expects {cg} x {groups} groups")
    check(o % groups == 0, f"{o} output channels not divisible by {groups}")
    strides, pads, dil = _geometry(attrs, kh, kw)
    oh = _out_size(x.shape[2], kh, strides[0], pads[0], pads[2], dil[0])
    ow = _out_size(x.shape[3], kw, strides[1], pads[1], pads[3], dil[1])
    # a symbolic image too small for the window is refused: no run-time check follows
    for size in (oh, ow):
        check_dim(size, ">", 0, f"kernel larger than the padded input ({oh}x{ow} output)"
                  if is_static((oh, ow)) else f"the {kh}x{kw} kernel may be larger than the "
                  f"padded input ({oh} by {ow} output)")
    return [TensorType((x.shape[0], o, oh, ow), x.dtype)]


def _unblocked(attrs: Attrs) -> Attrs:
    return {k: v for k, v in attrs.items() if k != "block"}


def _conv_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    if attrs.get("block"):
        x = arrays[0] if arrays[0].ndim == 4 else unblock_channels(arrays[0])
        out = _conv_reference([x, arrays[1]], _unblocked(attrs))[0]
        return [block_channels(out, attrs["block"])]
    x, w = arrays[0], arrays[1]
    groups = attrs.get("groups", 1)
    strides, pads, dil = _geometry(attrs, w.shape[2], w.shape[3])
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    (_, _, oh, ow), = [t.shape for t in _conv_infer(
        [TensorType(x.shape, str(x.dtype)), TensorType(w.shape, str(w.dtype))], attrs)]
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dil[0]: ky * dil[0] + strides[0] * (oh - 1) + 1: strides[0],
                           kx * dil[1]: kx * dil[1] + strides[1] * (ow - 1) + 1: strides[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, ky, kx])
    return [out.astype(x.dtype)]


def _conv_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                  ) -> list[te.Tensor]:
    """The convolution in :func:`accumulator`'s dtype: 16-bit float operands are widened
    (the weights as they are read, the input so too or, ``widen_input``, by its padding
    stage) and the float32 sums rounded once, by a last stage of their own (as matmul
    does)."""
    x, w = inputs[0], inputs[1]
    if attrs.get("weight_transform"):  # weights stored for a fast algorithm
        from .winograd import winograd_conv2d

        return [winograd_conv2d(x, w, attrs, out[0].shape, attrs["weight_transform"], tag)]
    acc = accumulator(x.dtype)
    if attrs.get("block"):
        y = _blocked_conv(x, w, attrs, out[0].shape, tag, acc)
    else:
        y = _direct_conv(x, w, attrs, out[0].shape, tag, acc)
    if y.dtype != x.dtype:
        wide = y
        y = te.compute(wide.shape, lambda *i: te.cast(x.dtype, wide[i]), name=tag + "_cast")
    return [y]


def _padded(x: te.Tensor, pads: Sequence[int], tag: str, acc: str, attrs: Attrs
            ) -> te.Tensor | WidenedReads:
    """The padded input read in ``acc``: widened by the padding stage where the op is
    marked ``widen_input`` (CPUs, passes/precision.py), else at each read."""
    if attrs.get("widen_input"):
        return pad_stage(x, pads, 0.0, tag, acc)
    return WidenedReads(pad_stage(x, pads, 0.0, tag), acc)


class WidenedReads:
    """Reads of ``t`` converted to ``dtype`` where they happen (``r[i]`` is
    ``cast(dtype, t[i])``): the weights stay 16-bit in memory, each vector of them
    converted once per load and used by every row of the register tile. (On CPUs the
    input is converted by its padding stage instead, :func:`_padded`: in the loop nest
    each input element is one broadcast per multiply-add, and a conversion there
    halved the multiply-adds' rate.)"""

    def __init__(self, t: te.Tensor, dtype: str) -> None:
        self.t, self.dtype, self.shape, self.ndim = t, dtype, t.shape, t.ndim

    def __getitem__(self, index: tuple[Expr, ...]) -> Expr:
        return te.cast(self.dtype, self.t[index])  # te.cast: as it is where dtypes match


def _direct_conv(x: te.Tensor, w: te.Tensor, attrs: Attrs, shape: Sequence[Dim], tag: str,
                 acc: str) -> te.Tensor:
    groups = attrs.get("groups", 1)
    o, cg, kh, kw = w.shape
    strides, pads, dil = _geometry(attrs, kh, kw)
    xp, w = _padded(x, pads, tag, acc, attrs), WidenedReads(w, acc)
    og = o // groups
    rc, ry, rx = te.reduce_axis(cg, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")

    def element(n: Expr, oc: Expr, y: Expr, z: Expr) -> Expr:
        c = rc.var if groups == 1 else (oc // og) * cg + rc.var
        return te.sum(xp[n, c, y * strides[0] + ry.var * dil[0], z * strides[1] + rx.var * dil[1]]
                      * w[oc, rc.var, ry.var, rx.var], [rc, ry, rx])

    return te.compute(shape, element, name=tag, tag="conv2d")


def _blocked_conv(x: te.Tensor, w: te.Tensor, attrs: Attrs, shape: Sequence[int], tag: str,
                  acc: str) -> te.Tensor:
    """``out[n, ob, y, z, oi]``, output channel ``ob * b + oi``: a dense or grouped
    convolution reduces over ``(input block of its group, ry, lane of the block, rx)``
    (or over the channels of a plain input), a depthwise one reads its own channel's
    lane. That reduce order is the CPU tile's loop order: consecutive steps read
    adjacent weight vectors (stored ``[O / b, C, KH, KW, b]``) and input pixels (3-5% on
    ResNets against ``rx`` before the lane, AVX2)."""
    block = attrs["block"]
    _, cg, kh, kw = w.shape
    strides, pads, dil = _geometry(attrs, kh, kw)
    xp, w = _padded(x, pads, tag, acc, attrs), WidenedReads(w, acc)
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")

    def at(y: Expr, z: Expr) -> tuple[Expr, Expr]:
        return y * strides[0] + ry.var * dil[0], z * strides[1] + rx.var * dil[1]

    groups = attrs.get("groups", 1)
    if groups != 1 and cg == 1:  # depthwise
        def depthwise(n: Expr, ob: Expr, y: Expr, z: Expr, oi: Expr) -> Expr:
            return te.sum(xp[(n, ob, *at(y, z), oi)] * w[ob * block + oi, 0, ry.var, rx.var],
                          [ry, rx])

        return te.compute(shape, depthwise, name=tag, tag="conv2d_blocked")
    if x.ndim == 5:
        # a group's input blocks (all of them when ungrouped): whole blocks on both sides
        lanes = x.shape[4]
        cb, ci = te.reduce_axis(cg // lanes, "rc"), te.reduce_axis(lanes, "rci")
        out_blocks = w.shape[0] // groups // block  # of one group

        def dense(n: Expr, ob: Expr, y: Expr, z: Expr, oi: Expr) -> Expr:
            first = (ob // out_blocks) * (cg // lanes) + cb.var if groups > 1 else cb.var
            return te.sum(xp[(n, first, *at(y, z), ci.var)]
                          * w[ob * block + oi, cb.var * lanes + ci.var, ry.var, rx.var],
                          [cb, ry, ci, rx])

        return te.compute(shape, dense, name=tag, tag="conv2d_blocked")
    rc = te.reduce_axis(cg, "rc")

    def from_plain(n: Expr, ob: Expr, y: Expr, z: Expr, oi: Expr) -> Expr:
        return te.sum(xp[(n, rc.var, *at(y, z))] * w[ob * block + oi, rc.var, ry.var, rx.var],
                      [rc, ry, rx])

    return te.compute(shape, from_plain, name=tag, tag="conv2d_blocked")


register("conv2d", Pattern.OUT_ELEMWISE_FUSABLE, _conv_infer, _conv_reference, _conv_compute,
         num_inputs=(2, 2))


def _pool_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(len(x.shape) in (4, 5), f"pool2d takes an NCHW or [N, C/b, H, W, b] input, got "
          f"{shape_text(x.shape)}")
    kh, kw = attrs["kernel"]
    strides, pads, dil = _geometry(attrs, kh, kw)
    ceil = bool(attrs.get("ceil_mode", False))
    oh = _out_size(x.shape[2], kh, strides[0], pads[0], pads[2], dil[0], ceil)
    ow = _out_size(x.shape[3], kw, strides[1], pads[1], pads[3], dil[1], ceil)
    if ceil:  # the last window must start inside the input or left padding
        oh = _ceil_mode_size(oh, x.shape[2], strides[0], pads[0])
        ow = _ceil_mode_size(ow, x.shape[3], strides[1], pads[1])
    if not is_static((oh, ow)):  # as for conv2d: no run-time check would catch it
        for size in (oh, ow):
            check_dim(size, ">", 0, f"the {kh}x{kw} window may be larger than the padded "
                      f"input ({oh} by {ow} output)")
    return [TensorType((x.shape[0], x.shape[1], oh, ow, *x.shape[4:]), x.dtype)]


def _pool_windows(x: np.ndarray, attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    """Windows as (N, C, OH, OW, KH*KW) with a validity mask (for padding)."""
    kh, kw = attrs["kernel"]
    strides, pads, dil = _geometry(attrs, kh, kw)
    (_, _, oh, ow), = [t.shape for t in _pool_infer([TensorType(x.shape, str(x.dtype))], attrs)]
    n, c, h, w = x.shape
    vals = np.zeros((n, c, oh, ow, kh * kw), dtype=x.dtype)
    mask = np.zeros((oh, ow, kh * kw), dtype=bool)
    for ky in range(kh):
        for kx in range(kw):
            ys = np.arange(oh) * strides[0] - pads[0] + ky * dil[0]
            xs = np.arange(ow) * strides[1] - pads[1] + kx * dil[1]
            vy, vx = (ys >= 0) & (ys < h), (xs >= 0) & (xs < w)
            m = vy[:, None] & vx[None, :]
            vals[..., ky * kw + kx] = x[:, :, np.clip(ys, 0, h - 1)][:, :, :, np.clip(xs, 0, w - 1)]
            mask[..., ky * kw + kx] = m
    return vals, mask


def _pool_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    if x.ndim == 5:
        return [block_channels(_pool_reference([unblock_channels(x)], attrs)[0], x.shape[4])]
    vals, mask = _pool_windows(x, attrs)
    if attrs["mode"] == "max":
        return [np.where(mask, vals, -np.inf).max(axis=-1).astype(x.dtype)]
    total = np.where(mask, vals, 0).sum(axis=-1)
    if attrs.get("count_include_pad", False):
        kh, kw = attrs["kernel"]
        pads = attrs.get("pads", [0, 0, 0, 0])
        h, w = x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]
        strides = attrs.get("strides", [1, 1])
        dil = attrs.get("dilations", [1, 1])
        oh, ow = vals.shape[2], vals.shape[3]
        ys = np.arange(oh) * strides[0]
        xs = np.arange(ow) * strides[1]
        # taps of a dilated window inside the padded input (as the compute counts them)
        cy = (np.minimum(ys + (kh - 1) * dil[0] + 1, h) - ys + dil[0] - 1) // dil[0]
        cx = (np.minimum(xs + (kw - 1) * dil[1] + 1, w) - xs + dil[1] - 1) // dil[1]
        count = cy[:, None] * cx[None, :]
    else:
        count = mask.sum(axis=-1)
    return [(total / np.maximum(count, 1)).astype(x.dtype)]


def _pool_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                  ) -> list[te.Tensor]:
    x = inputs[0]
    kh, kw = attrs["kernel"]
    strides, pads, dil = _geometry(attrs, kh, kw)
    h, w = x.shape[2:4]
    oh, ow = out[0].shape[2:4]
    is_max = attrs["mode"] == "max"
    # Pad far enough for ceil-mode windows that run past the bottom/right edge.
    # (dim_max: for a symbolic image, max(0, ...) evaluated at run time)
    extra_b = dim_max(0, (oh - 1) * strides[0] + dil[0] * (kh - 1) + 1 - (h + pads[0] + pads[2]))
    extra_r = dim_max(0, (ow - 1) * strides[1] + dil[1] * (kw - 1) + 1 - (w + pads[1] + pads[3]))
    full = [pads[0], pads[1], pads[2] + extra_b, pads[3] + extra_r]
    xp = pad_stage(x, full, float("-inf") if is_max else 0.0, tag)
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")

    def window(i: Expr, j: Expr, y: Expr, z: Expr, *block: Expr) -> Expr:
        v = xp[(i, j, y * strides[0] + ry.var * dil[0], z * strides[1] + rx.var * dil[1],
                *block)]
        return te.max(v, [ry, rx]) if is_max else te.sum(v, [ry, rx])

    red = te.compute(out[0].shape, window, name=tag + ("" if is_max else "_sum"),
                     tag="pool_max" if is_max else "pool_sum")
    if is_max:
        return [red]

    def count(y: Expr, z: Expr) -> Expr:
        """Window elements inside the input (or inside input+pads with count_include_pad)."""
        lo_y, hi_y = (0, h + pads[0] + pads[2]) if attrs.get("count_include_pad") else (
            pads[0], pads[0] + h)
        lo_x, hi_x = (0, w + pads[1] + pads[3]) if attrs.get("count_include_pad") else (
            pads[1], pads[1] + w)
        y0, x0 = y * strides[0], z * strides[1]
        cy = te.minimum(y0 + (kh - 1) * dil[0] + 1, hi_y) - te.maximum(y0, lo_y)
        cx = te.minimum(x0 + (kw - 1) * dil[1] + 1, hi_x) - te.maximum(x0, lo_x)
        if dil != [1, 1]:
            cy = (cy + dil[0] - 1) // dil[0]
            cx = (cx + dil[1] - 1) // dil[1]
        return te.cast(x.dtype, te.maximum(cy * cx, 1))

    return [te.compute(out[0].shape, lambda *i: red[i] / count(i[2], i[3]),
                       name=tag, tag="pool_avg")]


register("pool2d", Pattern.OUT_ELEMWISE_FUSABLE, _pool_infer, _pool_reference, _pool_compute)
