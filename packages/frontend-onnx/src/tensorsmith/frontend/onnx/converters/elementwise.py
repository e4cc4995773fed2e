"""Elementwise math and logic: unary functions, broadcasting binaries, Pow, Clip, Cast,
Where, comparisons, and the variadic Sum/Mean/Max/Min.

ONNX's broadcasting since opset 7 is NumPy's, which is what the canonical binary ops do;
older opsets (the ``broadcast`` attribute) are below the supported range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import filled

_UNARY = {
    "Relu": "relu", "Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Tanh": "tanh",
    "Erf": "erf", "Abs": "abs", "Sigmoid": "sigmoid", "Reciprocal": "reciprocal",
    "Floor": "floor", "Ceil": "ceil",
}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
_COMPARE = {"Equal": "eq", "Less": "lt", "Greater": "gt", "And": "and", "Or": "or"}


Converter = Callable[[NodeContext], Value]


def _unary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> Value:
        return ctx.add(op, [ctx.input(0)])

    convert.__name__ = f"convert_{op}"
    return convert


def _binary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> Value:
        return ctx.add(op, [ctx.input(0), ctx.input(1)])

    convert.__name__ = f"convert_{op}"
    return convert


for _onnx, _op in _UNARY.items():
    converter(_onnx, since=1)(_unary(_op))
for _onnx, _op in {**_BINARY, **_COMPARE}.items():
    converter(_onnx, since=7)(_binary(_op))
converter("Sin", since=7)(_unary("sin"))
converter("Cos", since=7)(_unary("cos"))
converter("LessOrEqual", since=12)(_binary("le"))
converter("GreaterOrEqual", since=12)(_binary("ge"))


def logical_not(ctx: NodeContext, x: Value) -> Value:
    return ctx.add("eq", [x, ctx.const(False)])


@converter("Not", since=1)
def convert_not(ctx: NodeContext) -> Value:
    return logical_not(ctx, ctx.input(0))


@converter("Xor", since=7)
def convert_xor(ctx: NodeContext) -> Value:
    return logical_not(ctx, ctx.add("eq", [ctx.input(0), ctx.input(1)]))


@converter("IsNaN", since=9)
def convert_isnan(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return logical_not(ctx, ctx.add("eq", [x, x]))


@converter("IsInf", since=10)
def convert_isinf(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    positive, negative = int(ctx.attr("detect_positive", 1)), int(ctx.attr("detect_negative", 1))
    if positive and negative:
        return ctx.add("eq", [ctx.add("abs", [x]), ctx.scalar(np.inf, x)])
    if positive or negative:
        return ctx.add("eq", [x, ctx.scalar(np.inf if positive else -np.inf, x)])
    return filled(ctx, x.shape, False, "bool", hint="isinf")


@converter("Identity", since=1)
def convert_identity(ctx: NodeContext) -> Value:
    return ctx.input(0)


@converter("Sign", since=9)
def convert_sign(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    zero = ctx.scalar(0, x)
    negative = ctx.add("where", [ctx.add("lt", [x, zero]), ctx.scalar(-1, x), zero])
    return ctx.add("where", [ctx.add("gt", [x, zero]), ctx.scalar(1, x), negative])


@converter("Pow", since=7)
def convert_pow(ctx: NodeContext) -> Value:
    """``x ** 2`` and ``x ** 0.5`` (LayerNorm as exported below opset 17) become mul and
    sqrt: exact, and cheaper than pow on every target."""
    x, y = ctx.input(0), ctx.input(1)
    if y.data is not None and y.data.size == 1 and y.data.ndim <= len(x.shape):
        e = float(y.data.reshape(-1)[0])
        if e == 1.0:
            return x
        if e == 2.0:
            return ctx.add("mul", [x, x])
        if e == 0.5 and x.dtype.startswith("float"):
            return ctx.add("sqrt", [x])
    if y.dtype != x.dtype:  # opset 12+ allows a different exponent type
        y = ctx.add("cast", [y], {"dtype": x.dtype})
    return ctx.add("pow", [x, y])


def clip(ctx: NodeContext, x: Value, lo: Value | float | None, hi: Value | float | None
         ) -> Value:
    """min(max(x, lo), hi) with constant bounds as attributes, runtime ones as tensors."""

    def number(b: Value | float | None) -> float | int | None:
        if isinstance(b, Value):
            if b.data is None:
                return None
            if b.data.size != 1:
                raise ctx.error(f"Clip bounds must be scalars, got shape {shape_text(b.shape)}")
            value = b.data.reshape(-1)[0].item()
        elif b is None:
            return None
        else:
            value = b
        return float(value) if x.dtype.startswith("float") else int(value)

    lo_n, hi_n = number(lo), number(hi)
    if (isinstance(lo, Value) and lo_n is None) or (isinstance(hi, Value) and hi_n is None):
        out = x
        if lo is not None:
            out = ctx.add("max", [out, lo if isinstance(lo, Value) else ctx.scalar(lo, x)])
        if hi is not None:
            out = ctx.add("min", [out, hi if isinstance(hi, Value) else ctx.scalar(hi, x)])
        return out
    if lo_n is not None and hi_n is not None:
        return ctx.add("clip", [x], {"min": lo_n, "max": hi_n})
    if lo_n is not None:
        return ctx.add("max", [x, ctx.scalar(lo_n, x)])
    if hi_n is not None:
        return ctx.add("min", [x, ctx.scalar(hi_n, x)])
    return x


@converter("Clip", since=6)
def convert_clip_v6(ctx: NodeContext) -> Value:
    return clip(ctx, ctx.input(0), ctx.attr("min"), ctx.attr("max"))


@converter("Clip", since=11)
def convert_clip_v11(ctx: NodeContext) -> Value:
    return clip(ctx, ctx.input(0), ctx.optional_input(1), ctx.optional_input(2))


@converter("Cast", since=6)
def convert_cast(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dtype = to_numpy_dtype(int(ctx.required_attr("to")), f"{ctx.where}: the cast target")
    return x if dtype == x.dtype else ctx.add("cast", [x], {"dtype": dtype})


@converter("CastLike", since=15)
def convert_cast_like(ctx: NodeContext) -> Value:
    x, like = ctx.input(0), ctx.input(1)
    return x if like.dtype == x.dtype else ctx.add("cast", [x], {"dtype": like.dtype})


@converter("Where", since=9)
def convert_where(ctx: NodeContext) -> Value:
    cond = ctx.input(0)
    if cond.dtype != "bool":
        raise ctx.error(f"the condition must be bool, got {cond.dtype}")
    return ctx.add("where", [cond, ctx.input(1), ctx.input(2)])


def _variadic(op: str, mean: bool = False) -> Converter:
    def convert(ctx: NodeContext) -> Value:
        values = [v for v in ctx.inputs if v is not None]
        if not values:
            raise ctx.error("takes at least one input")
        out = values[0]
        for v in values[1:]:
            out = ctx.add(op, [out, v])
        if mean and len(values) > 1:
            out = ctx.add("div", [out, ctx.scalar(len(values), out)])
        return out

    return convert


converter("Sum", since=6)(_variadic("add"))
converter("Mean", since=6)(_variadic("add", mean=True))
converter("Max", since=6)(_variadic("max"))
converter("Min", since=6)(_variadic("min"))


@converter("Mod", since=10)
def convert_mod(ctx: NodeContext) -> Value:
    """``fmod=0`` takes the divisor's sign (Python's %), ``fmod=1`` the dividend's (C's
    fmod); floats need fmod=1 before opset 28."""
    a, fmod = ctx.input(0), int(ctx.attr("fmod", 0))
    if not fmod and a.dtype.startswith("float") and ctx.opset < 28:
        raise ctx.error("Mod of floating-point tensors needs fmod=1 before opset 28")
    return ctx.add("mod", [a, ctx.input(1)], {"fmod": fmod})


@converter("BitShift", since=11)
def convert_bit_shift(ctx: NodeContext) -> Value:
    direction = ctx.required_attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    return ctx.add("shl" if direction == "LEFT" else "shr", [ctx.input(0), ctx.input(1)])


for _onnx, _op in {"BitwiseAnd": "bitand", "BitwiseOr": "bitor", "BitwiseXor": "bitxor"}.items():
    converter(_onnx, since=18)(_binary(_op))
converter("BitwiseNot", since=18)(_unary("bitnot"))
converter("Round", since=11)(_unary("round"))
for _onnx in ("Tan", "Asin", "Acos", "Atan"):
    converter(_onnx, since=7)(_unary(_onnx.lower()))
for _onnx in ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh"):
    converter(_onnx, since=9)(_unary(_onnx.lower()))


@converter("BitCast", since=26)
def convert_bitcast(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dtype = to_numpy_dtype(int(ctx.required_attr("to")), f"{ctx.where}: the target type")
    if np.dtype(dtype).itemsize != np.dtype(x.dtype).itemsize:
        raise ctx.error(f"{x.dtype} and {dtype} differ in width")
    return x if dtype == x.dtype else ctx.add("bitcast", [x], {"dtype": dtype})
