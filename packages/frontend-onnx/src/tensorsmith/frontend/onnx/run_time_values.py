"""Values a run gives in small inputs, followed at compile time as host expressions.

ONNX feeds the operands that decide shapes as tensors: a Reshape's target, a ReduceSum's
axes, TopK's ``k``, Resize's scales. When such a tensor is a graph input (as in ONNX's
own node tests and in models exported with those operands left open), its values are
known only when the model runs. The importer keeps, beside the input's Value, its entries
as :class:`~tensorsmith.ir.host_sizes.HostExpr` (``value('shape', 1)``) and folds the
small shape arithmetic the model does on them (a Cast, a Concat, a Gather...) the same
way, so a converter that can work with run-time values reads them with
``NodeContext.run_time_values`` and turns what decides a shape into sizes the host
computes before each run (``NodeContext.size``). The graph nodes are kept too: a value
that also feeds a kernel is still run-time data.

A converter that cannot use such values keeps calling ``NodeContext.constant``, which
refuses them as before (and ONNX's backend then specializes on them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorsmith.ir.host_sizes import HostExpr, host_max, host_min, input_value, lift, where
from tensorsmith.ir.op_registry import TensorType
from tensorsmith.ir.symbolic import Sym, SymbolicDimError

from . import shape_values

MAX_ELEMENTS = 64
"""Inputs of at most this many elements are followed (axes, shapes, scales, a k)."""

HOST_READABLE = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32",
                 "float64")
"""The dtypes whose values every executor reads on the host (a float16 input is left to
specialization)."""


def input_entries(name: str, shape: Sequence[Any], dtype: str) -> np.ndarray | None:
    """The entries of graph input ``name`` as host expressions, or None where it is not
    a small numeric tensor of static shape."""
    if not all(isinstance(d, int) for d in shape) or len(shape) > 1:
        return None
    count = int(np.prod(shape)) if shape else 1
    if count > MAX_ELEMENTS or dtype not in HOST_READABLE:
        return None
    kind = np.dtype(dtype).kind
    entries = [input_value(name, k, kind == "f") for k in range(count)]
    return np.asarray([*entries, None], dtype=object)[:-1].reshape(tuple(shape))


def has_run_time(entries: np.ndarray) -> bool:
    return any(isinstance(e, HostExpr) for e in entries.reshape(-1))


def _elementwise(fn: Callable[[Any, Any], Any]) -> Any:
    ufunc = np.frompyfunc(fn, 2, 1)

    def apply(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
              types: Sequence[TensorType]) -> list[np.ndarray]:
        out = ufunc(arrays[0], arrays[1])
        return [np.broadcast_to(np.asarray(out, dtype=object), _shape(types[0]))]

    return apply


def _shape(t: TensorType) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _cast(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
          types: Sequence[TensorType]) -> list[np.ndarray]:
    kind = np.dtype(attrs["dtype"]).kind

    def cast(x: Any) -> Any:
        if not isinstance(x, HostExpr):
            return shape_values.evaluate("cast", [np.asarray(x, dtype=object)], attrs,
                                         [TensorType((), attrs["dtype"])])[0].item()
        if kind == "f":
            return x if x.is_float else x * 1.0
        if kind in "iu" and not x.is_float:
            return x
        raise TypeError(f"a cast of '{x}' to {attrs['dtype']}")

    return [np.frompyfunc(cast, 1, 1)(arrays[0])]


def _where(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
           types: Sequence[TensorType]) -> list[np.ndarray]:
    pick = np.frompyfunc(where, 3, 1)
    return [np.broadcast_to(np.asarray(pick(*arrays), dtype=object), _shape(types[0]))]


def _compare(fn: Callable[[Any, Any], Any]) -> Any:
    """A comparison: a HostExpr of 0 or 1 where a side is one, else decided now."""
    return _elementwise(lambda a, b: fn(lift(a), b) if isinstance(a, HostExpr)
                        or isinstance(b, HostExpr) else bool(fn(a, b)))


def _div(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
         types: Sequence[TensorType]) -> list[np.ndarray]:
    """ONNX Div: integers truncate toward zero, which ``//`` (flooring) does where the
    signs agree or the division is exact, and one more than it elsewhere."""
    ints = np.dtype(types[0].dtype).kind in "iu"
    plain = shape_values._div(ints)

    def div(a: Any, b: Any) -> Any:
        if not isinstance(a, HostExpr) and not isinstance(b, HostExpr):
            return plain(a, b)
        if not ints:
            return lift(a) / b
        q = lift(a) // b
        return where((lift(a) % b != 0) * ((lift(a) < 0) != (lift(b) < 0)), q + 1, q)

    return _elementwise(div)(arrays, attrs, types)


_OPS: dict[str, Any] = {
    "div": _div,
    "cast": _cast,
    "where": _where,
    "max": _elementwise(host_max),
    "min": _elementwise(host_min),
    "eq": _compare(lambda a, b: a == b),
    "lt": _compare(lambda a, b: a < b),
    "le": _compare(lambda a, b: a <= b),
    "gt": _compare(lambda a, b: a > b),
    "ge": _compare(lambda a, b: a >= b),
    "neg": lambda arrays, attrs, types: [np.frompyfunc(lambda x: -x, 1, 1)(arrays[0])],
}


_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "mod"})
"""Ops whose symbolic sizes become host expressions where the other side is one (a Sym
does not compute with a HostExpr): a padded shape less a size the run gives."""


def _lift_sizes(entries: np.ndarray) -> np.ndarray:
    lifted = np.frompyfunc(lambda x: lift(x) if isinstance(x, Sym) else x, 1, 1)(entries)
    return np.asarray(lifted, dtype=object).reshape(entries.shape)


def evaluate(op: str, arrays: Sequence[np.ndarray], attrs: dict[str, Any],
             types: Sequence[TensorType]) -> list[np.ndarray] | None:
    """The outputs of canonical ``op`` on entries some of which are host expressions;
    None where it cannot be followed (the node then only computes it at run time)."""
    try:
        if op in _ARITHMETIC and any(has_run_time(a) for a in arrays):
            arrays = [_lift_sizes(a) for a in arrays]
        fn = _OPS.get(op)
        if fn is None:
            return shape_values.evaluate(op, arrays, attrs, types)
        outs = fn(arrays, attrs, types)
        return [np.asarray(o, dtype=object).reshape(_shape(t)) for o, t in zip(outs, types)]
    except (SymbolicDimError, TypeError, ValueError, IndexError):
        return None
