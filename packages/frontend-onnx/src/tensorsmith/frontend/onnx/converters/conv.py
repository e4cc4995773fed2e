"""Conv, MaxPool, AveragePool onto the canonical 2-D ``conv2d`` and ``pool2d`` (NCHW).

1-D forms become 2-D with a height of 1; ``auto_pad`` is resolved into explicit pads here,
so the ops only ever see [top, left, bottom, right]. A bias is a per-channel add after
the convolution, where fusion turns it into the kernel's epilogue.
"""

from __future__ import annotations

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..registry import converter
from .common import reshape


def _spatial(ctx: NodeContext, x: Value) -> int:
    dims = len(x.shape) - 2
    if dims not in (1, 2):
        raise ctx.error(f"only 1-D and 2-D {ctx.op_type} are supported; the input "
                        f"{list(x.shape)} has {dims} spatial dimension(s)")
    return dims


def _geometry(ctx: NodeContext, in_size: list[int], kernel: list[int]
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
            out = -(-in_size[d] // strides[d])
            total = max(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1
                        - in_size[d])
            small, large = total // 2, total - total // 2
            pads[d], pads[d + n] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    elif auto_pad != "NOTSET":
        raise ctx.error(f"auto_pad={auto_pad!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    if n == 1:  # as 2-D with a unit height
        return {"strides": [1, strides[0]], "dilations": [1, dilations[0]],
                "pads": [0, pads[0], 0, pads[1]]}
    return {"strides": strides, "dilations": dilations, "pads": pads}


def _as_2d(ctx: NodeContext, v: Value, dims: int) -> Value:
    return v if dims == 2 else reshape(ctx, v, (*v.shape[:2], 1, v.shape[2]))


def _from_2d(ctx: NodeContext, v: Value, dims: int) -> Value:
    return v if dims == 2 else reshape(ctx, v, (v.shape[0], v.shape[1], v.shape[3]))


@converter("Conv", since=1)
def convert_conv(ctx: NodeContext) -> Value:
    x, w, bias = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    dims = _spatial(ctx, x)
    if len(w.shape) != len(x.shape):
        raise ctx.error(f"weight {list(w.shape)} does not match the input {list(x.shape)}")
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    if kernel != list(w.shape[2:]):
        raise ctx.error(f"kernel_shape {kernel} differs from the weight's {list(w.shape[2:])}")
    attrs = _geometry(ctx, list(x.shape[2:]), kernel)
    attrs["groups"] = int(ctx.attr("group", 1))  # type: ignore[assignment]
    y = ctx.add("conv2d", [_as_2d(ctx, x, dims), _as_2d(ctx, w, dims)], attrs)
    if bias is not None:
        y = ctx.add("add", [y, reshape(ctx, bias, (bias.shape[0], 1, 1))])
    return _from_2d(ctx, y, dims)


def _pool(ctx: NodeContext, mode: str) -> Value:
    x = ctx.input(0)
    dims = _spatial(ctx, x)
    if not x.dtype.startswith("float"):
        raise ctx.error(f"pooling takes float tensors, got {x.dtype}")
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    if len(kernel) != dims:
        raise ctx.error(f"kernel_shape {kernel} does not fit {dims} spatial dimension(s)")
    attrs: dict[str, object] = dict(_geometry(ctx, list(x.shape[2:]), kernel))
    attrs.update(kernel=[1, kernel[0]] if dims == 1 else kernel, mode=mode,
                 ceil_mode=bool(ctx.attr("ceil_mode", 0)))
    if mode == "avg":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    if int(ctx.attr("storage_order", 0)):
        raise ctx.error("storage_order=1 (column-major indices) is not supported")
    return _from_2d(ctx, ctx.add("pool2d", [_as_2d(ctx, x, dims)], attrs), dims)


@converter("MaxPool", since=1)
def convert_max_pool(ctx: NodeContext) -> Value:
    return _pool(ctx, "max")


@converter("AveragePool", since=1)
def convert_average_pool(ctx: NodeContext) -> Value:
    return _pool(ctx, "avg")
