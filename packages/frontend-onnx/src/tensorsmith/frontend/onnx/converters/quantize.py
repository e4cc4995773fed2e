"""Integer quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
integer products MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.

Each is written with the canonical ops in the order and precision of ONNX's reference
implementation: quantizing divides in the input's type, rounds half to even, adds the
zero point in int32 and saturates; dequantizing works in float32; the integer products
accumulate in int32 and requantize in float64, as NumPy's promotion does there.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import math_prod, shape_text

from ..context import NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import normalize_axis, reshape

_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
           "int16": (-32768, 32767)}


def _cast(ctx: NodeContext, v: Value, dtype: str) -> Value:
    return v if v.dtype == dtype else ctx.add("cast", [v], {"dtype": dtype})


def _param(ctx: NodeContext, v: Value, shape: tuple[int, ...], axis: int, block: int) -> Value:
    """A scale or zero point made broadcastable to ``shape``: a scalar as is, a 1-D one
    along ``axis``, a blocked one repeated ``block`` times along ``axis``."""
    if len(v.shape) == 0:
        return v
    if int(np.prod(v.shape)) == 1:
        return reshape(ctx, v, ())
    if not block:
        if len(v.shape) != 1 or v.shape[0] != shape[axis]:
            raise ctx.error(f"a per-axis parameter {shape_text(v.shape)} does not fit axis {axis} "
                            f"of {list(shape)}")
        return reshape(ctx, v, [v.shape[0] if d == axis else 1 for d in range(len(shape))])
    index = (np.arange(shape[axis]) // block).astype(np.int64)
    return ctx.add("gather", [v, ctx.const(index, hint="blocks")], {"axis": axis})


def _saturate(ctx: NodeContext, v: Value, dtype: str) -> Value:
    if dtype not in _RANGES:
        raise ctx.error(f"quantizing to {dtype} is not supported (8- and 16-bit integers are)")
    lo, hi = _RANGES[dtype]
    return _cast(ctx, ctx.add("clip", [v], {"min": lo, "max": hi}), dtype)


def _attrs(ctx: NodeContext, x: Value, scale: Value) -> tuple[int, int]:
    """The quantization axis (only checked where a per-axis scale needs it) and block."""
    axis = int(ctx.attr("axis", 1))
    if math_prod(scale.shape) != 1:
        axis = normalize_axis(ctx, axis, len(x.shape))
    return axis, int(ctx.attr("block_size", 0))


@converter("QuantizeLinear", since=10)
def convert_quantize_linear(ctx: NodeContext) -> Value:
    x, scale, zero = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    axis, block = _attrs(ctx, x, scale)
    given = ctx.attr("output_dtype")
    dtype = zero.dtype if zero is not None else (
        to_numpy_dtype(int(given), f"{ctx.where}: output_dtype") if given else "uint8")
    precision = ctx.attr("precision")
    if precision:
        compute = to_numpy_dtype(int(precision), f"{ctx.where}: precision")
        q = ctx.add("div", [_cast(ctx, x, compute),
                            _cast(ctx, _param(ctx, scale, x.shape, axis, block), compute)])
    else:
        q = ctx.add("div", [x, _cast(ctx, _param(ctx, scale, x.shape, axis, block), x.dtype)])
    rounded = ctx.add("round", [q])
    q = _cast(ctx, rounded, "int32")
    if zero is not None:
        q = ctx.add("add", [q, _cast(ctx, _param(ctx, zero, x.shape, axis, block), "int32")])
    result = _saturate(ctx, q, dtype)
    zero_point = _scalar_constant(zero)
    if rounded.dtype == "float32" and math_prod(scale.shape) == 1 and zero_point is not None:
        ctx.state.quantized[result.uid] = (rounded, scale, zero_point, dtype)
    return result


def _scalar_constant(zero: Value | None) -> int | None:
    """A zero point that is one constant integer (absent: 0), else None."""
    if zero is None:
        return 0
    if zero.data is None or zero.data.size != 1:
        return None
    return int(zero.data.reshape(-1)[0])


def _requantized(ctx: NodeContext, x: Value, scale: Value, zero: Value | None
                 ) -> Value | None:
    """DequantizeLinear(QuantizeLinear(v)) with the same per-tensor parameters, which
    exporters write around every quantized op: ``clip(round(v / s), lo - zp, hi - zp) * s``
    in float, without the integer tensor and its casts. The same values bit for bit:
    (q - zp) is the clipped round(v / s), a small integer float32 holds exactly."""
    known = ctx.state.quantized.get(x.uid)
    if known is None:
        return None
    rounded, quant_scale, zero_point, dtype = known
    if _scalar_constant(zero) != zero_point or not _same(quant_scale, scale):
        return None
    lo, hi = _RANGES[dtype]
    clipped = ctx.add("clip", [rounded], {"min": float(lo - zero_point),
                                          "max": float(hi - zero_point)})
    return ctx.add("mul", [clipped, _cast(ctx, reshape(ctx, scale, ()), "float32")])


def _same(a: Value, b: Value) -> bool:
    """One value, or two constants of equal data."""
    if a.uid == b.uid:
        return True
    return (a.data is not None and b.data is not None and a.data.dtype == b.data.dtype
            and np.array_equal(a.data.reshape(-1), b.data.reshape(-1)))


@converter("DequantizeLinear", since=10)
def convert_dequantize_linear(ctx: NodeContext) -> Value:
    x, scale, zero = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    axis, block = _attrs(ctx, x, scale)
    given = ctx.attr("output_dtype")
    if scale.dtype == "float32" and not given:
        requantized = _requantized(ctx, x, scale, zero)
        if requantized is not None:
            return requantized
    y = _cast(ctx, x, "float32")
    if zero is not None:
        y = ctx.add("sub", [y, _cast(ctx, _param(ctx, zero, x.shape, axis, block), "float32")])
    s = _param(ctx, scale, x.shape, axis, block)
    if s.dtype == "float64":
        y = _cast(ctx, y, "float64")
    y = ctx.add("mul", [y, _cast(ctx, s, y.dtype)])
    dtype = to_numpy_dtype(int(given), f"{ctx.where}: output_dtype") if given else scale.dtype
    return _cast(ctx, y, dtype)


@converter("DynamicQuantizeLinear", since=11)
def convert_dynamic_quantize_linear(ctx: NodeContext) -> list[Value]:
    """uint8 with a scale and zero point from the data's range (always including 0)."""
    x = ctx.input(0)
    zero = ctx.scalar(0.0, x)
    top = ctx.add("max", [ctx.add("reduce_max", [x], {"keepdims": False}), zero])
    bottom = ctx.add("min", [ctx.add("reduce_min", [x], {"keepdims": False}), zero])
    span = ctx.add("sub", [top, bottom])
    span = ctx.add("where", [ctx.add("eq", [top, bottom]), ctx.scalar(1.0, x), span])
    scale = ctx.add("div", [span, ctx.scalar(255.0, x)])
    initial = ctx.add("sub", [zero, ctx.add("div", [bottom, scale])])
    zp = ctx.add("round", [ctx.add("clip", [initial], {"min": 0.0, "max": 255.0})])
    y = ctx.add("add", [ctx.add("round", [ctx.add("div", [x, scale])]), zp])
    y = _cast(ctx, ctx.add("clip", [y], {"min": 0.0, "max": 255.0}), "uint8")
    return [y, scale, _cast(ctx, zp, "uint8")]


def _centered(ctx: NodeContext, v: Value, zero: Value | None, per: int | None) -> Value:
    """int32(v) - int32(zero); a 1-D zero point broadcasts along axis ``per``."""
    out = _cast(ctx, v, "int32")
    if zero is None:
        return out
    z = _cast(ctx, zero, "int32")
    if len(z.shape) == 1 and z.shape[0] > 1 and per is not None:
        z = reshape(ctx, z, [z.shape[0] if d == per else 1 for d in range(len(v.shape))])
    elif int(np.prod(z.shape)) == 1:
        z = reshape(ctx, z, ())
    return ctx.add("sub", [out, z])


@converter("MatMulInteger", since=10)
def convert_matmul_integer(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    a32 = _centered(ctx, a, ctx.optional_input(2), len(a.shape) - 2)  # per row
    b32 = _centered(ctx, b, ctx.optional_input(3), None)  # per column: broadcasts as is
    return ctx.add("matmul", [a32, b32])


def _requantize(ctx: NodeContext, acc: Value, factor: Value, zero: Value | None,
                dtype: str) -> Value:
    d = ctx.add("mul", [_cast(ctx, acc, "float64"), _cast(ctx, factor, "float64")])
    if zero is not None:
        d = ctx.add("add", [d, _cast(ctx, zero, "float64")])
    return _saturate(ctx, ctx.add("round", [d]), dtype)


@converter("QLinearMatMul", since=10)
def convert_qlinear_matmul(ctx: NodeContext) -> Value:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = (ctx.optional_input(i)
                                                               for i in range(8))
    assert a is not None and b is not None and a_scale is not None and b_scale is not None
    assert y_scale is not None
    acc = ctx.add("matmul", [_centered(ctx, a, a_zero, None), _centered(ctx, b, b_zero, None)])
    factor = ctx.add("div", [ctx.add("mul", [a_scale, _cast(ctx, b_scale, a_scale.dtype)]),
                             _cast(ctx, y_scale, a_scale.dtype)])
    return _requantize(ctx, acc, factor, y_zero, y_zero.dtype if y_zero is not None
                       else a.dtype)


def _conv_integer(ctx: NodeContext, x: Value, w: Value, x_zero: Value | None,
                  w_zero: Value | None) -> Value:
    from .conv import conv_values

    x32 = _centered(ctx, x, x_zero, None)
    w32 = _centered(ctx, w, w_zero, 0)  # per output channel
    return conv_values(ctx, x32, w32, None)


@converter("ConvInteger", since=10)
def convert_conv_integer(ctx: NodeContext) -> Value:
    return _conv_integer(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2),
                         ctx.optional_input(3))


@converter("QLinearConv", since=10)
def convert_qlinear_conv(ctx: NodeContext) -> Value:
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = (ctx.input(i) for i in range(8))
    bias = ctx.optional_input(8)
    acc = _conv_integer(ctx, x, w, x_zero, w_zero)
    if bias is not None:
        acc = ctx.add("add", [acc, reshape(ctx, _cast(ctx, bias, "int32"),
                                           (bias.shape[0],) + (1,) * (len(acc.shape) - 2))])
    ws = w_scale
    if len(ws.shape) == 1 and ws.shape[0] > 1:
        ws = reshape(ctx, ws, (ws.shape[0],) + (1,) * (len(acc.shape) - 2))
    factor = ctx.add("div", [ctx.add("mul", [x_scale, ws]), y_scale])
    return _requantize(ctx, acc, factor, y_zero, y_zero.dtype)
