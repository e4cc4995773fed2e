"""Elementwise unary and broadcasting binary ops."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import te
from ..dtypes import is_float
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..te.expr import Expr, binary, call, cast, const, maximum, minimum, select
from .broadcast import broadcast_index, broadcast_shapes


def _same(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    return [TensorType(inputs[0].shape, inputs[0].dtype)]


def unary(name: str, scalar: Callable[[Expr, Attrs], Expr],
          numpy_fn: Callable[[np.ndarray, Attrs], np.ndarray]) -> None:
    """Register ``name`` as out[i] = scalar(x[i]) with a NumPy reference."""

    def compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
        x = inputs[0]
        return [te.compute(x.shape, lambda *i: scalar(x[i], attrs), name=tag, tag=name)]

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x = arrays[0]
        return [np.asarray(numpy_fn(x, attrs)).astype(x.dtype, copy=False)]

    register(name, Pattern.ELEMWISE, _same, reference, compute)


def _f(e: Expr, v: float) -> Expr:
    return const(v, e.dtype)


def _sigmoid(x: Expr) -> Expr:
    return _f(x, 1.0) / (_f(x, 1.0) + call("exp", -x))


unary("relu", lambda x, a: maximum(x, _f(x, 0)), lambda x, a: np.maximum(x, 0))
unary("neg", lambda x, a: -x, lambda x, a: -x)
unary("exp", lambda x, a: call("exp", x), lambda x, a: np.exp(x))
unary("log", lambda x, a: call("log", x), lambda x, a: np.log(x))
unary("sqrt", lambda x, a: call("sqrt", x), lambda x, a: np.sqrt(x))
unary("tanh", lambda x, a: call("tanh", x), lambda x, a: np.tanh(x))
unary("erf", lambda x, a: call("erf", x), lambda x, a: _np_erf(x))
unary("abs", lambda x, a: call("abs", x) if is_float(x.dtype) else call("iabs", x),
      lambda x, a: np.abs(x))
unary("sigmoid", lambda x, a: _sigmoid(x), lambda x, a: 1.0 / (1.0 + np.exp(-x)))
unary("reciprocal", lambda x, a: _f(x, 1.0) / x, lambda x, a: 1.0 / x)
unary("floor", lambda x, a: call("floor", x), lambda x, a: np.floor(x))
unary("ceil", lambda x, a: call("ceil", x), lambda x, a: np.ceil(x))
unary("clip", lambda x, a: minimum(maximum(x, _f(x, a["min"])), _f(x, a["max"])),
      lambda x, a: np.clip(x, a["min"], a["max"]))
unary("leaky_relu", lambda x, a: select(x < _f(x, 0), x * a["alpha"], x),
      lambda x, a: np.where(x < 0, x * a["alpha"], x))
unary("round", lambda x, a: call("round", x), lambda x, a: np.round(x))  # half to even
unary("bitnot", lambda x, a: binary("bitxor", x, const(-1 if x.dtype.startswith("int") else
                                                        np.iinfo(x.dtype).max, x.dtype)),
      lambda x, a: np.invert(x))


def _np_erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


_NUMPY_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
    "min": np.minimum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "and": np.logical_and, "or": np.logical_or,
    "pow": np.power, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
    "bitxor": np.bitwise_xor, "shl": np.left_shift, "shr": np.right_shift,
}


def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(a / b).astype(a.dtype) if b.all() else np.zeros_like(a + b)
    return np.divide(a, b)


def binary_op(name: str, comparison: bool = False) -> None:
    """Register ``name`` as a broadcasting binary op over same-dtype inputs."""

    def infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
        a, b = inputs
        check(a.dtype == b.dtype, f"inputs have different dtypes {a.dtype} and {b.dtype}")
        return [TensorType(broadcast_shapes(a.shape, b.shape),
                           "bool" if comparison else a.dtype)]

    def compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                ) -> list[te.Tensor]:
        a, b = inputs

        def element(*i: Expr) -> Expr:
            x, y = a[broadcast_index(a.shape, i)], b[broadcast_index(b.shape, i)]
            integer = not is_float(a.dtype)
            if name == "div" and integer:
                return _trunc_div(x, y)
            if name == "pow" and integer:  # exact for the integer results int pow can hold
                return cast(a.dtype, binary("pow", cast("float64", x), cast("float64", y)))
            if name == "mod":
                if attrs.get("fmod"):
                    return binary("fmod", x, y)
                return binary("floormod", x, y) if integer else _float_mod(x, y)
            if name in ("shl", "shr"):
                return _shift(name, x, y)
            return binary(name, x, y)

        return [te.compute(out[0].shape, element, name=tag, tag=name)]

    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        if name in ("shl", "shr"):
            return [_np_shift(name, arrays[0], arrays[1])]
        fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
        if name == "mod":
            fn = np.fmod if attrs.get("fmod") else np.mod
        else:
            fn = _np_div if name == "div" else _NUMPY_BINARY[name]
        r = np.asarray(fn(arrays[0], arrays[1]))
        return [r if comparison else r.astype(arrays[0].dtype, copy=False)]

    register(name, Pattern.BROADCAST, infer, reference, compute, num_inputs=(2, 2))


def _float_mod(x: Expr, y: Expr) -> Expr:
    """NumPy's float mod (the divisor's sign) from C's fmod, so that infinite divisors and
    signed zeros come out as NumPy has them (x - floor(x / y) * y gives NaN for y = inf)."""
    zero = const(0.0, x.dtype)
    r = binary("fmod", x, y)
    fix = r.ne(zero) & (r < zero).ne(y < zero)
    r = select(fix, r + y, r)
    return select(r.eq(zero), select(y < zero, const(-0.0, x.dtype), zero), r)


def _shift(name: str, x: Expr, y: Expr) -> Expr:
    """Shifts by amounts outside [0, bits) saturate (ONNX BitShift): a left shift gives 0,
    a right shift the sign fill (0 for unsigned types); LLVM leaves them undefined."""
    bits = np.dtype(x.dtype).itemsize * 8
    inside = (y >= const(0, y.dtype)) & (y < const(bits, y.dtype))
    shifted = binary(name, x, select(inside, y, const(0, y.dtype)))
    if name == "shl" or not x.dtype.startswith("int"):
        return select(inside, shifted, const(0, x.dtype))
    return select(inside, shifted, binary("shr", x, const(bits - 1, x.dtype)))


def _np_shift(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    safe = np.where(inside, y, 0).astype(x.dtype)
    if name == "shl":
        return np.where(inside, np.left_shift(x, safe), 0).astype(x.dtype)
    fill = np.right_shift(x, bits - 1) if x.dtype.kind == "i" else np.zeros_like(x)
    return np.where(inside, np.right_shift(x, safe), fill).astype(x.dtype)


def _trunc_div(x: Expr, y: Expr) -> Expr:
    """ONNX integer Div truncates toward zero; floordiv corrects when signs differ."""
    q = binary("floordiv", x, y)
    r = binary("floormod", x, y)
    zero = const(0, x.dtype)
    fix = binary("and", r.ne(zero), binary("lt", x, zero).ne(binary("lt", y, zero)))
    return select(fix, q + const(1, x.dtype), q)


for _name in ("add", "sub", "mul", "div", "max", "min", "pow", "mod", "bitand", "bitor",
              "bitxor", "shl", "shr"):
    binary_op(_name)
for _name in ("lt", "le", "gt", "ge", "eq", "and", "or"):
    binary_op(_name, comparison=True)


def _cast_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    return [TensorType(inputs[0].shape, attrs["dtype"])]


def _cast_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                  ) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(x.shape, lambda *i: cast(attrs["dtype"], x[i]), name=tag, tag="cast")]


register("cast", Pattern.ELEMWISE, _cast_infer,
         lambda arrays, attrs: [arrays[0].astype(attrs["dtype"])], _cast_compute)


def _where_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    c, a, b = inputs
    check(a.dtype == b.dtype, f"Where branches have different dtypes {a.dtype}, {b.dtype}")
    return [TensorType(broadcast_shapes(c.shape, a.shape, b.shape), a.dtype)]


def _where_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                   ) -> list[te.Tensor]:
    c, a, b = inputs
    return [te.compute(out[0].shape, lambda *i: select(
        c[broadcast_index(c.shape, i)], a[broadcast_index(a.shape, i)],
        b[broadcast_index(b.shape, i)]), name=tag, tag="where")]


register("where", Pattern.BROADCAST, _where_infer,
         lambda arrays, attrs: [np.where(*arrays)], _where_compute, num_inputs=(3, 3))


def _bitcast_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(np.dtype(x.dtype).itemsize == np.dtype(attrs["dtype"]).itemsize,
          f"bitcast needs types of one width, got {x.dtype} and {attrs['dtype']}")
    return [TensorType(x.shape, attrs["dtype"])]


def _bitcast_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                     ) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(x.shape, lambda *i: call("bitcast", x[i], dtype=attrs["dtype"]),
                       name=tag, tag="bitcast")]


register("bitcast", Pattern.ELEMWISE, _bitcast_infer,
         lambda arrays, attrs: [arrays[0].copy(order="C").view(attrs["dtype"])],  # keeps 0-d
         _bitcast_compute)
