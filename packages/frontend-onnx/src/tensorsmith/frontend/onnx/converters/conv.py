"""Conv, ConvTranspose, MaxPool, AveragePool, LpPool onto the canonical 2-D ``conv2d`` and
``pool2d`` (NCHW).

1-D forms become 2-D with a height of 1, 3-D pooling two 2-D poolings; ``auto_pad`` is
resolved into explicit pads here, so the ops only ever see [top, left, bottom, right]. A
bias is a per-channel add after the convolution, where fusion turns it into the kernel's
epilogue.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import Dim, shape_text, static_dim

from ..context import NodeContext
from ..registry import converter
from ..shape_values import size_max
from .common import filled, reshape, transpose


def _spatial(ctx: NodeContext, x: Value) -> int:
    dims = len(x.shape) - 2
    if dims not in (1, 2):
        raise ctx.error(f"only 1-D and 2-D {ctx.op_type} are supported; the input "
                        f"{shape_text(x.shape)} has {dims} spatial dimension(s)")
    return dims


def _geometry(ctx: NodeContext, in_size: list[Dim], kernel: list[int]
              ) -> dict[str, list[int]]:
    """Strides, dilations and explicit pads for ``in_size`` spatial dims (1 or 2 of them)."""
    n = len(in_size)
    strides = list(ctx.attr("strides") or [1] * n)
    dilations = list(ctx.attr("dilations") or [1] * n)
    pads = list(ctx.attr("pads") or [0] * (2 * n))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        raise ctx.error(f"strides {strides}, dilations {dilations} or pads {pads} do not fit "
                        f"{n} spatial dimension(s)")
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for d in range(n):
            total = _same_padding(in_size[d], kernel[d], strides[d], dilations[d], auto_pad)
            small, large = total // 2, total - total // 2
            pads[d], pads[d + n] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    elif auto_pad != "NOTSET":
        raise ctx.error(f"auto_pad={auto_pad!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    if n == 1:  # as 2-D with a unit height
        return {"strides": [1, strides[0]], "dilations": [1, dilations[0]],
                "pads": [0, pads[0], 0, pads[1]]}
    return {"strides": strides, "dilations": dilations, "pads": pads}


def _same_padding(size: Dim, kernel: int, stride: int, dilation: int, auto_pad: str) -> int:
    """The total padding of one axis under SAME_UPPER/SAME_LOWER. It is static for a
    stride of 1 (the window's reach); for a larger stride it depends on the size modulo
    the stride, which a symbolic size leaves open, while pads must be fixed."""
    out = -(-size // stride)
    total = size_max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return static_dim(total, f"the {auto_pad} padding of a spatial axis of size {size} with "
                             f"stride {stride}")


def _as_2d(ctx: NodeContext, v: Value, dims: int) -> Value:
    return v if dims == 2 else reshape(ctx, v, (*v.shape[:2], 1, v.shape[2]))


def _from_2d(ctx: NodeContext, v: Value, dims: int) -> Value:
    return v if dims == 2 else reshape(ctx, v, (v.shape[0], v.shape[1], v.shape[3]))


@converter("Conv", since=1)
def convert_conv(ctx: NodeContext) -> Value:
    return conv_values(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2))


def conv_values(ctx: NodeContext, x: Value, w: Value, bias: Value | None) -> Value:
    """The node's convolution (its strides, pads, ... attributes) of ``x`` by ``w``."""
    dims = _spatial(ctx, x)
    if len(w.shape) != len(x.shape):
        raise ctx.error(f"weight {shape_text(w.shape)} does not match the input "
                        f"{shape_text(x.shape)}")
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    if kernel != list(w.shape[2:]):
        raise ctx.error(f"kernel_shape {kernel} differs from the weight's "
                        f"{shape_text(w.shape[2:])}")
    attrs = _geometry(ctx, list(x.shape[2:]), kernel)
    attrs["groups"] = int(ctx.attr("group", 1))  # type: ignore[assignment]
    y = ctx.add("conv2d", [_as_2d(ctx, x, dims), _as_2d(ctx, w, dims)], attrs)
    if bias is not None:
        y = ctx.add("add", [y, reshape(ctx, bias, (bias.shape[0], 1, 1))])
    return _from_2d(ctx, y, dims)


def _pool_attrs(ctx: NodeContext, x: Value, mode: str, dims: int, kernel: list[int]
                ) -> dict[str, object]:
    attrs: dict[str, object] = dict(_geometry(ctx, list(x.shape[2:]), kernel))
    attrs.update(kernel=[1, kernel[0]] if dims == 1 else kernel, mode=mode,
                 ceil_mode=bool(ctx.attr("ceil_mode", 0)))
    if mode == "avg":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    return attrs


def _pool3d(ctx: NodeContext, x: Value, mode: str, kernel: list[int]) -> Value:
    """A 3-D window is a box, so max and average pooling separate: 2-D pooling over
    (H, W) of every depth slice, then 1-D pooling over depth (the counts of an average
    multiply like the box's sides, with or without counting the padding)."""
    n, c, d, h, w = x.shape
    strides = list(ctx.attr("strides") or [1, 1, 1])
    dilations = list(ctx.attr("dilations") or [1, 1, 1])
    pads = list(ctx.attr("pads") or [0] * 6)
    geometry = _geometry3d(ctx, [d, h, w], kernel, strides, dilations, pads)
    common = {"mode": mode, "ceil_mode": bool(ctx.attr("ceil_mode", 0))}
    if mode == "avg":
        common["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    st, dl, pd = geometry
    plane = ctx.add("pool2d", [reshape(ctx, x, (n, c * d, h, w))], {
        **common, "kernel": kernel[1:], "strides": st[1:], "dilations": dl[1:],
        "pads": [pd[1], pd[2], pd[4], pd[5]]})
    oh, ow = plane.shape[2:]
    depth = ctx.add("pool2d", [reshape(ctx, plane, (n, c, d, oh * ow))], {
        **common, "kernel": [kernel[0], 1], "strides": [st[0], 1], "dilations": [dl[0], 1],
        "pads": [pd[0], 0, pd[3], 0]})
    return reshape(ctx, depth, (n, c, depth.shape[2], oh, ow))


def _geometry3d(ctx: NodeContext, size: list[Dim], kernel: list[int], strides: list[int],
                dilations: list[int], pads: list[int]
                ) -> tuple[list[int], list[int], list[int]]:
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0] * 6
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(3):
            total = _same_padding(size[i], kernel[i], strides[i], dilations[i], auto_pad)
            small, large = total // 2, total - total // 2
            pads[i], pads[i + 3] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    return strides, dilations, pads


def _pool(ctx: NodeContext, mode: str) -> Value:
    x = ctx.input(0)
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    if int(ctx.attr("storage_order", 0)):
        raise ctx.error("storage_order=1 (column-major indices) is not supported")
    if len(x.shape) - 2 != len(kernel):
        raise ctx.error(f"kernel_shape {kernel} does not fit the input {shape_text(x.shape)}")
    dtype = x.dtype
    if not dtype.startswith("float"):
        if mode != "max" or dtype not in ("int8", "uint8", "int16", "uint16"):
            raise ctx.error(f"pooling takes float tensors (and 8-/16-bit integers for max), "
                            f"got {dtype}")
        x = ctx.add("cast", [x], {"dtype": "float32"})  # exact for these types
    if len(kernel) == 3:
        y = _pool3d(ctx, x, mode, kernel)
    else:
        dims = _spatial(ctx, x)
        y = _from_2d(ctx, ctx.add("pool2d", [_as_2d(ctx, x, dims)],
                                  _pool_attrs(ctx, x, mode, dims, kernel)), dims)
    return y if y.dtype == dtype else ctx.add("cast", [y], {"dtype": dtype})


@converter("MaxPool", since=1)
def convert_max_pool(ctx: NodeContext) -> Value:
    return _pool(ctx, "max")


@converter("AveragePool", since=1)
def convert_average_pool(ctx: NodeContext) -> Value:
    return _pool(ctx, "avg")


@converter("LpPool", since=11)
def convert_lp_pool(ctx: NodeContext) -> Value:
    """(sum of |x|^p over the window)^(1/p): an average over the padded window (padding
    counted, it adds zeros) times the window's size, as ONNX's reference computes it."""
    x = ctx.input(0)
    p = float(ctx.attr("p", 2))
    powered = ctx.add("abs", [x])
    powered = ctx.add("mul", [powered, powered]) if p == 2 else \
        ctx.add("pow", [powered, ctx.scalar(p, x)])
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    if len(kernel) == 3:
        ctx.attrs["count_include_pad"] = 1
        mean = _pool3d(ctx, powered, "avg", kernel)
    else:
        dims = _spatial(ctx, x)
        attrs = _pool_attrs(ctx, x, "avg", dims, kernel)
        attrs["count_include_pad"] = True
        mean = _from_2d(ctx, ctx.add("pool2d", [_as_2d(ctx, powered, dims)], attrs), dims)
    total = ctx.add("mul", [mean, ctx.scalar(float(np.prod(kernel)), x)])
    return ctx.add("sqrt", [total]) if p == 2 else \
        ctx.add("pow", [total, ctx.scalar(1.0 / p, x)])


def _zero_insert(ctx: NodeContext, x: Value, strides: list[int]) -> Value:
    """[N, C, H, W] with strides-1 zeros between neighbours: [.., (H-1)sh+1, (W-1)sw+1]."""
    sh, sw = strides
    if sh == sw == 1:
        return x
    n, c, h, w = x.shape
    view = reshape(ctx, x, (n, c, h, 1, w, 1))
    spread = ctx.add("pad", [view], {"before": [0] * 6, "after": [0, 0, 0, sh - 1, 0, sw - 1],
                                     "mode": "constant", "value": 0.0})
    flat = reshape(ctx, spread, (n, c, h * sh, w * sw))
    return ctx.add("slice", [flat], {"begin": [0, 0, 0, 0],
                                     "end": [n, c, (h - 1) * sh + 1, (w - 1) * sw + 1],
                                     "step": [1, 1, 1, 1]})


def _pad_or_crop(ctx: NodeContext, x: Value, before: list[int], after: list[int]) -> Value:
    """Spatial padding by [top, left] / [bottom, right]; negative amounts crop."""
    n, c, h, w = x.shape
    begin = [0, 0, max(-before[0], 0), max(-before[1], 0)]
    end = [n, c, h - max(-after[0], 0), w - max(-after[1], 0)]
    if begin != [0, 0, 0, 0] or end != [n, c, h, w]:
        x = ctx.add("slice", [x], {"begin": begin, "end": end, "step": [1, 1, 1, 1]})
    grow_b = [0, 0, max(before[0], 0), max(before[1], 0)]
    grow_a = [0, 0, max(after[0], 0), max(after[1], 0)]
    if any(grow_b) or any(grow_a):
        x = ctx.add("pad", [x], {"before": grow_b, "after": grow_a, "mode": "constant",
                                 "value": 0.0})
    return x


@converter("ConvTranspose", since=1)
def convert_conv_transpose(ctx: NodeContext) -> Value:
    """The gradient of a convolution as a convolution: the input spread out by the
    strides (zeros between), padded by the kernel's reach minus ``pads``, convolved with
    the kernel flipped and its channel axes swapped (per group)."""
    x, w, bias = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    dims = _spatial(ctx, x)
    groups = int(ctx.attr("group", 1))
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    n_in = list(x.shape[2:])
    strides = list(ctx.attr("strides") or [1] * dims)
    dilations = list(ctx.attr("dilations") or [1] * dims)
    out_pad = list(ctx.attr("output_padding") or [0] * dims)
    pads = list(ctx.attr("pads") or [0] * (2 * dims))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    wanted = ctx.attr("output_shape")
    if wanted is not None:
        wanted = list(wanted)[-dims:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [n * s for n, s in zip(n_in, strides)]
    if wanted is not None:
        for d in range(dims):
            total = (strides[d] * (n_in[d] - 1) + out_pad[d] + (kernel[d] - 1) * dilations[d]
                     + 1 - wanted[d])
            if auto_pad == "SAME_UPPER":
                pads[d], pads[d + dims] = total // 2, total - total // 2
            else:
                pads[d], pads[d + dims] = total - total // 2, total // 2
    elif auto_pad == "VALID":
        pads = [0] * (2 * dims)
    if dims == 1:
        strides, dilations, out_pad = [1, *strides], [1, *dilations], [0, *out_pad]
        pads, kernel = [0, pads[0], 0, pads[1]], [1, *kernel]
    x2, w2 = _as_2d(ctx, x, dims), _as_2d(ctx, w, dims)
    c_in, c_out_g, kh, kw = w2.shape
    if c_in != x2.shape[1] or c_in % groups:
        raise ctx.error(f"weight {shape_text(w.shape)} does not fit the input "
                        f"{shape_text(x.shape)} with {groups} group(s)")
    if (groups == 1 and strides == [kh, kw] and dilations == [1, 1] and not any(pads)
            and not any(out_pad)):
        return _from_2d(ctx, _tiles_transpose(ctx, x2, w2, bias), dims)
    # [Cin, Cout/g, kh, kw] -> [Cout, Cin/g, kh, kw], flipped spatially
    wt = reshape(ctx, w2, (groups, c_in // groups, c_out_g, kh, kw))
    wt = transpose(ctx, wt, (0, 2, 1, 3, 4))
    wt = reshape(ctx, wt, (groups * c_out_g, c_in // groups, kh, kw))
    wt = ctx.add("slice", [wt], {"begin": [0, 0, kh - 1, kw - 1],
                                 "end": [groups * c_out_g, c_in // groups, -1, -1],
                                 "step": [1, 1, -1, -1]})
    spread = _zero_insert(ctx, x2, strides)
    reach = [(kernel[d] - 1) * dilations[d] for d in range(2)]
    padded = _pad_or_crop(ctx, spread, [reach[0] - pads[0], reach[1] - pads[1]],
                          [reach[0] - pads[2] + out_pad[0], reach[1] - pads[3] + out_pad[1]])
    y = ctx.add("conv2d", [padded, wt], {"strides": [1, 1], "dilations": dilations,
                                        "pads": [0, 0, 0, 0], "groups": groups})
    if bias is not None:
        y = ctx.add("add", [y, reshape(ctx, bias, (bias.shape[0], 1, 1))])
    return _from_2d(ctx, y, dims)


def _tiles_transpose(ctx: NodeContext, x: Value, w: Value, bias: Value | None) -> Value:
    """A transposed convolution whose strides equal its kernel (U-Net's 2x2/2 upsampling):
    each input pixel writes its own ``kh x kw`` tile of the output, so it is a 1x1
    convolution to ``O * kh * kw`` channels and a depth-to-space transpose. Spread with
    zeros and convolved instead, it multiplied 3 zeros for every product and copied the
    image twice (6.8 ms of a U-Net's 100 on 2 cores, AVX2)."""
    n, _, h, width = x.shape
    c_in, c_out, kh, kw = w.shape
    per_tile = reshape(ctx, transpose(ctx, w, (1, 2, 3, 0)), (c_out * kh * kw, c_in, 1, 1))
    y = ctx.add("conv2d", [x, per_tile], {"strides": [1, 1], "dilations": [1, 1],
                                          "pads": [0, 0, 0, 0], "groups": 1})
    y = transpose(ctx, reshape(ctx, y, (n, c_out, kh, kw, h, width)), (0, 1, 4, 2, 5, 3))
    y = reshape(ctx, y, (n, c_out, h * kh, width * kw))
    if bias is not None:
        y = ctx.add("add", [y, reshape(ctx, bias, (c_out, 1, 1))])
    return y


@converter("CausalConvWithState", since=27)
def convert_causal_conv_with_state(ctx: NodeContext) -> list[Value | None]:
    """A depthwise 1-D convolution over [past_state, input] (zeros without a past), with an
    optional SiLU; the new state is the last kernel-1 positions of that sequence."""
    x, w, bias, past = (ctx.optional_input(i) for i in range(4))
    assert x is not None and w is not None
    if len(x.shape) != 3 or len(w.shape) != 3 or w.shape[1] != 1 or w.shape[0] != x.shape[1]:
        raise ctx.error(f"needs input [B, C, L] and weight [C, 1, k], got {shape_text(x.shape)} "
                        f"and {shape_text(w.shape)}")
    b, c, length = x.shape
    k = w.shape[2]
    if past is None:
        past = filled(ctx, (b, c, k - 1), 0, x.dtype, hint="state")
    seq = ctx.add("concat", [past, x], {"axis": 2}) if k > 1 else x
    y = ctx.add("conv2d", [reshape(ctx, seq, (b, c, 1, length + k - 1)),
                           reshape(ctx, w, (c, 1, 1, k))],
                {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0], "groups": c})
    y = reshape(ctx, y, (b, c, length))
    if bias is not None:
        y = ctx.add("add", [y, reshape(ctx, bias, (c, 1))])
    activation = str(ctx.attr("activation", "none"))
    if activation in ("silu", "swish"):
        wide = y if y.dtype != "float16" else ctx.add("cast", [y], {"dtype": "float32"})
        wide = ctx.add("mul", [wide, ctx.add("sigmoid", [wide])])
        y = wide if wide.dtype == x.dtype else ctx.add("cast", [wide], {"dtype": x.dtype})
    elif activation != "none":
        raise ctx.error(f"unknown activation {activation!r}")
    state = ctx.add("slice", [seq], {"begin": [0, 0, length], "end": [b, c, length + k - 1],
                                     "step": [1, 1, 1]}) if k > 1 else \
        filled(ctx, (b, c, 0), 0, x.dtype, hint="state")
    return [y, state if ctx.output_wanted(1) else None]


@converter("Col2Im", since=18)
def convert_col2im(ctx: NodeContext) -> Value:
    """Sum of sliding blocks back into an image: each kernel offset's column block is
    spread by the strides (zeros between), shifted into place by its offset and the
    pads (cropping what falls outside), and the kernel_size placements are added."""
    cols = ctx.input(0)
    image = [int(v) for v in np.asarray(ctx.constant(1, "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(ctx.constant(2, "block_shape")).reshape(-1)]
    nd = len(image)
    strides = list(ctx.attr("strides") or [1] * nd)
    dilations = list(ctx.attr("dilations") or [1] * nd)
    pads = list(ctx.attr("pads") or [0] * (2 * nd))
    counts = [(image[d] + pads[d] + pads[d + nd] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(nd)]
    n, ck, length = cols.shape
    kernel = int(np.prod(block))
    if ck % kernel or length != int(np.prod(counts)):
        raise ctx.error(f"input {shape_text(cols.shape)} does not hold blocks {block} of an image "
                        f"{image} ({counts} positions)")
    c = ck // kernel
    blocks = reshape(ctx, cols, (n, c, kernel, *counts))
    total: Value | None = None
    for k, offset in enumerate(np.ndindex(*block)):
        part = ctx.add("slice", [blocks], {
            "begin": [0, 0, k] + [0] * nd, "end": [n, c, k + 1, *counts],
            "step": [1] * (nd + 3)})
        part = reshape(ctx, part, (n, c, *counts))
        part = _spread(ctx, part, strides)
        before = [offset[d] * dilations[d] - pads[d] for d in range(nd)]
        after = [image[d] - before[d] - part.shape[2 + d] for d in range(nd)]
        part = _place(ctx, part, before, after)
        total = part if total is None else ctx.add("add", [total, part])
    assert total is not None
    return total


def _spread(ctx: NodeContext, x: Value, strides: list[int]) -> Value:
    """Zeros between neighbours on every spatial axis of [N, C, *spatial] (any rank)."""
    if all(s == 1 for s in strides):
        return x
    n, c, *sizes = x.shape
    view = reshape(ctx, x, (n, c, *[d for size in sizes for d in (size, 1)]))
    after = [0, 0, *[a for s in strides for a in (0, s - 1)]]
    wide = ctx.add("pad", [view], {"before": [0] * len(after), "after": after,
                                   "mode": "constant", "value": 0.0})
    flat = reshape(ctx, wide, (n, c, *[size * s for size, s in zip(sizes, strides)]))
    end = [n, c, *[(size - 1) * s + 1 for size, s in zip(sizes, strides)]]
    return ctx.add("slice", [flat], {"begin": [0] * len(end), "end": end,
                                     "step": [1] * len(end)})


def _place(ctx: NodeContext, x: Value, before: list[int], after: list[int]) -> Value:
    """Pad (positive) or crop (negative) each spatial axis of [N, C, *spatial]."""
    rank = len(x.shape)
    begin = [0, 0, *[max(-b, 0) for b in before]]
    end = [x.shape[0], x.shape[1], *[x.shape[2 + d] - max(-a, 0) for d, a in enumerate(after)]]
    if begin != [0] * rank or end != list(x.shape):
        x = ctx.add("slice", [x], {"begin": begin, "end": end, "step": [1] * rank})
    grow_b = [0, 0, *[max(b, 0) for b in before]]
    grow_a = [0, 0, *[max(a, 0) for a in after]]
    if any(grow_b) or any(grow_a):
        x = ctx.add("pad", [x], {"before": grow_b, "after": grow_a, "mode": "constant",
                                 "value": 0.0})
    return x


@converter("MaxUnpool", since=9)
def convert_max_unpool(ctx: NodeContext) -> Value:
    """Zeros with each value written at its flat index (MaxPool's indices output), as a
    ScatterND over the flattened output; output_shape only pads at the end."""
    x, indices = ctx.input(0), ctx.input(1)
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    dims = len(kernel)
    strides = list(ctx.attr("strides") or [1] * dims)
    pads = list(ctx.attr("pads") or [0] * (2 * dims))
    inferred = [x.shape[0], x.shape[1]] + [
        (x.shape[2 + d] - 1) * strides[d] - (pads[d] + pads[dims + d]) + kernel[d]
        for d in range(dims)]
    total = int(np.prod(inferred))
    count = int(np.prod(x.shape))
    idx = indices if indices.dtype == "int64" else ctx.add("cast", [indices],
                                                            {"dtype": "int64"})
    flat = ctx.add("scatter_nd", [ctx.const(np.zeros(total, x.dtype), hint="zeros"),
                                  reshape(ctx, idx, (count, 1)), reshape(ctx, x, (count,))],
                   {"reduction": "none"})
    y = reshape(ctx, flat, inferred)
    given = ctx.optional_constant(2, "output_shape")
    if given is not None:
        wanted = [int(v) for v in np.asarray(given).reshape(-1)]
        if any(w < i for w, i in zip(wanted, inferred)) or len(wanted) != len(inferred):
            raise ctx.error(f"output_shape {wanted} is smaller than {inferred}")
        if wanted != inferred:
            y = ctx.add("pad", [y], {"before": [0] * len(wanted),
                                     "after": [w - i for w, i in zip(wanted, inferred)],
                                     "mode": "constant", "value": 0.0})
    return y
