"""Shape arithmetic at compile time on sizes known only at run time.

Exported models compute the shapes they reshape, expand and slice to: ``Shape(x) ->
Gather -> Unsqueeze -> Concat -> Reshape``. With static shapes those values are constants
and :meth:`..context.NodeContext.add` folds them with each op's NumPy reference. With
symbolic sizes they hold symbols (``[batch, seq, 4, 16]``): the importer keeps such a
value as an object array of dims (Python ints and :class:`Sym`, bools after a comparison)
beside a Value that has no data and no producer, since it exists at compile time only,
and ``add`` folds the canonical ops on it with the functions here, the symbolic
counterparts of those references. A Reshape or an Expand then reads its target as dims.

Only what holds for every value of the symbols is computed: ``Equal(batch, 1)`` is False
since every size is at least 1, but ``Equal(seq, 5)`` is a SymbolicDimError, as is any
arithmetic a polynomial of sizes cannot express. Ops without a function here are not
folded on symbols (the caller says so, naming the node).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorsmith.ir.op_registry import TensorType
from tensorsmith.ir.symbolic import Sym, SymbolicDimError, dim_max, dim_min

Entry = Any  # int, bool, float or Sym
SymbolicOp = Callable[[Sequence[np.ndarray], dict[str, Any], Sequence[TensorType]],
                      list[np.ndarray]]


def has_symbols(values: np.ndarray) -> bool:
    """Whether an object array holds a symbolic size (else it is a plain constant)."""
    return any(isinstance(v, Sym) for v in values.reshape(-1))


def evaluate(op: str, arrays: Sequence[np.ndarray], attrs: dict[str, Any],
             types: Sequence[TensorType]) -> list[np.ndarray] | None:
    """The outputs of canonical ``op`` on object arrays, shaped as ``types`` say; None for
    an op that is not folded on symbols. Raises SymbolicDimError for what only the
    symbols' values decide."""
    fn = _OPS.get(op)
    if fn is None:
        return None
    outs = fn(arrays, attrs, types)
    return [np.asarray(o, dtype=object).reshape(_shape(t)) for o, t in zip(outs, types)]


def _shape(t: TensorType) -> tuple[int, ...]:
    """A shape value's own shape, always static (a 1-D or 0-D tensor of a few sizes)."""
    return tuple(int(d) for d in t.shape)


# -- elementwise --------------------------------------------------------------------------
def _elementwise(fn: Callable[..., Entry]) -> SymbolicOp:
    """An elementwise op with NumPy's broadcasting, entry by entry in Python."""
    ufunc = np.frompyfunc(fn, 2, 1)

    def apply(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
              types: Sequence[TensorType]) -> list[np.ndarray]:
        a, b = arrays
        out = ufunc(a, b)
        return [np.broadcast_to(np.asarray(out, dtype=object), _shape(types[0]))]

    return apply


def _sign(x: Entry, what: str) -> bool:
    """Whether ``x >= 0``; a SymbolicDimError naming ``what`` where the symbols decide."""
    try:
        return bool(x >= 0)
    except SymbolicDimError:
        raise SymbolicDimError(f"the sign of '{x}' in {what} depends on sizes known only at "
                               "run time") from None


def _div(ints: bool) -> Callable[[Entry, Entry], Entry]:
    """ONNX Div: integers truncate toward zero; symbolic floats divide only exactly."""
    def div(a: Entry, b: Entry) -> Entry:
        if not isinstance(a, Sym) and not isinstance(b, Sym):
            if not b:
                raise SymbolicDimError(f"shape arithmetic divides {a} by zero")
            if not ints:
                return a / b
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b > 0) else -q
        what = f"'{a}' / '{b}'"
        pa, pb = _sign(a, what), _sign(b, what)
        abs_a, abs_b = (a if pa else -a), (b if pb else -b)
        q = abs_a // abs_b
        if not ints and q * abs_b != abs_a:
            raise SymbolicDimError(f"{what} is not a whole number for every size")
        return q if pa == pb else -q

    return div


def _mod(fmod: bool) -> Callable[[Entry, Entry], Entry]:
    """ONNX Mod (fmod=0 takes the divisor's sign, fmod=1 the dividend's); on symbols only
    of a size by a positive divisor, where the two agree."""
    def mod(a: Entry, b: Entry) -> Entry:
        if not isinstance(a, Sym) and not isinstance(b, Sym):
            if not b:
                raise SymbolicDimError(f"shape arithmetic takes {a} modulo zero")
            return np.fmod(a, b).item() if fmod else a % b
        what = f"'{a}' mod '{b}'"
        if not _sign(a, what) or not _sign(b, what) or _eq(b, 0):
            raise SymbolicDimError(f"{what} is taken only of sizes and positive divisors")
        return a % b

    return mod


def _eq(a: Entry, b: Entry) -> bool:
    """Equality for every value of the symbols: dims equal as polynomials, or apart."""
    if a == b:
        return True
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return False
    try:
        return not (a < b or a > b)
    except SymbolicDimError:
        raise SymbolicDimError(f"whether {a} == {b} depends on sizes known only at run "
                               "time") from None


def size_max(a: Entry, b: Entry) -> Entry:
    """max(a, b), decided where every value of the symbols agrees, else ``max(a, b)``."""
    try:
        return a if a >= b else b
    except SymbolicDimError:
        if 1 in (a, b):  # dim_max reads a 1 as a broadcast, not as a number
            raise
        return dim_max(a, b)


def size_min(a: Entry, b: Entry) -> Entry:
    """min(a, b), decided where every value of the symbols agrees, else ``min(a, b)``."""
    try:
        return a if a <= b else b
    except SymbolicDimError:
        return dim_min(a, b)


def _arith(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
           types: Sequence[TensorType], op: str) -> list[np.ndarray]:
    ints = not types[0].dtype.startswith("float")
    fns: dict[str, Callable[[Entry, Entry], Entry]] = {
        "div": _div(ints), "mod": _mod(bool(attrs.get("fmod")))}
    return _elementwise(fns[op])(arrays, attrs, types)


def _cast(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
          types: Sequence[TensorType]) -> list[np.ndarray]:
    """A size stays a size in any numeric type; to bool it is its (decided) nonzeroness."""
    kind = np.dtype(attrs["dtype"]).kind

    def cast(x: Entry) -> Entry:
        if kind == "b":
            return bool(x)
        if isinstance(x, Sym):
            return x
        if kind == "f":
            return float(x)
        return int(x)

    return [np.frompyfunc(cast, 1, 1)(arrays[0])]


def _unary(fn: Callable[[Entry], Entry]) -> SymbolicOp:
    def apply(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
              types: Sequence[TensorType]) -> list[np.ndarray]:
        return [np.frompyfunc(fn, 1, 1)(arrays[0])]

    return apply


def _abs(x: Entry) -> Entry:
    return x if _sign(x, f"abs('{x}')") else -x


def _where(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
           types: Sequence[TensorType]) -> list[np.ndarray]:
    cond, a, b = arrays
    pick = np.frompyfunc(lambda c, x, y: x if bool(c) else y, 3, 1)
    return [np.broadcast_to(np.asarray(pick(cond, a, b), dtype=object), _shape(types[0]))]


# -- data movement --------------------------------------------------------------------------
def _gather(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
            types: Sequence[TensorType]) -> list[np.ndarray]:
    data, indices = arrays
    if has_symbols(indices):
        raise SymbolicDimError("indices computed from sizes known only at run time are "
                               "not taken in shape arithmetic")
    return [np.take(data, indices.astype(np.int64), axis=int(attrs["axis"]))]


def _slice(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
           types: Sequence[TensorType]) -> list[np.ndarray]:
    """The canonical slice's bounds are already clamped: a backward end of -1 means
    "through index 0", which ``np.arange`` reads the same way."""
    x = arrays[0]
    ranges = [np.arange(int(b), int(e), int(s))
              for b, e, s in zip(attrs["begin"], attrs["end"], attrs["step"])]
    return [x[np.ix_(*ranges)] if ranges else x]


def _reduce(fn: Callable[..., Any]) -> SymbolicOp:
    def apply(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
              types: Sequence[TensorType]) -> list[np.ndarray]:
        x = arrays[0]
        axes = attrs.get("axes")
        axis = tuple(range(x.ndim)) if axes is None else tuple(int(a) % x.ndim for a in axes)
        return [np.asarray(fn(x, axis=axis, keepdims=bool(attrs.get("keepdims", True))),
                           dtype=object)]

    return apply


def _same(arrays: Sequence[np.ndarray], attrs: dict[str, Any],
          types: Sequence[TensorType]) -> list[np.ndarray]:
    return [arrays[0]]


_OPS: dict[str, SymbolicOp] = {
    "add": _elementwise(lambda a, b: a + b),
    "sub": _elementwise(lambda a, b: a - b),
    "mul": _elementwise(lambda a, b: a * b),
    "div": functools.partial(_arith, op="div"),
    "mod": functools.partial(_arith, op="mod"),
    "max": _elementwise(size_max),
    "min": _elementwise(size_min),
    "eq": _elementwise(_eq),
    "lt": _elementwise(lambda a, b: bool(a < b)),
    "le": _elementwise(lambda a, b: bool(a <= b)),
    "gt": _elementwise(lambda a, b: bool(a > b)),
    "ge": _elementwise(lambda a, b: bool(a >= b)),
    "and": _elementwise(lambda a, b: bool(a) and bool(b)),
    "or": _elementwise(lambda a, b: bool(a) or bool(b)),
    "neg": _unary(lambda x: -x),
    "abs": _unary(_abs),
    "cast": _cast,
    "where": _where,
    "copy": _same,
    "reshape": _same,  # evaluate() gives every output its inferred shape
    "expand": lambda arrays, attrs, types: [np.broadcast_to(arrays[0], _shape(types[0]))],
    "transpose": lambda arrays, attrs, types: [np.transpose(arrays[0], attrs["perm"])],
    "concat": lambda arrays, attrs, types: [np.concatenate(arrays, axis=int(attrs["axis"]))],
    "gather": _gather,
    "slice": _slice,
    "reduce_sum": _reduce(np.sum),
    "reduce_prod": _reduce(np.prod),
}

FOLDED_OPS = tuple(sorted(_OPS))
"""The canonical ops folded on symbolic sizes (for error messages and documentation)."""
