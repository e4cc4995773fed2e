"""``unique``: the distinct values of a tensor (flattened), ONNX's Unique without ``axis``.

How many values are distinct is known only once the kernel has run, so, as the detection
ops do (ops/detection.py), ``unique`` gives one row per distinct value, at most one per
element, and a ``count``; with a ``rows`` attribute (a counted size less one,
builder.counted_size) the executor places the rows for the bound and the later ops see
the counted rows only. Its outputs: the values, each one's first index in the flattened
input, the inverse (each element's row: as long as the input, never counted), the
counts, and the count.

Values are equal when ``==`` says so, as ONNX Runtime's ordered map has it: -0.0 and 0.0
are one value, the first one met kept. NaN is no value ``==`` finds, so each NaN is a
value of its own here, where ONNX Runtime's map merges it with whatever it meets; NaN
inputs are unspecified. ``sorted`` (1, the default) orders the values ascending, else
they stay in the order of their first occurrence.

The kernel carries the distinct values found so far from one element to the next, which
no tensor expression states: it is written directly as tensor IR, one sequential loop on
every target (no index is loaded from a buffer the kernel wrote: lavapipe got those
wrong in the NMS kernel). A first pass finds each element among the values so far
(O(n * u)); with ``sorted``, each value's row is then the number of smaller values
(O(u^2)), and each element's row the number of values below it (O(n * u)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..symbolic import math_prod
from ..te.expr import Expr, Load, Var
from ..te.handwritten import Local, load, loop, seq, store
from ..te.stmt import Buffer, For, IfThenElse, Stmt
from .detection import _counted, _rows


def _sorted(attrs: Attrs) -> bool:
    order = int(attrs.get("sorted", 1))
    check(order in (0, 1), f"unique sorted must be 0 or 1, not {order}")
    return bool(order)


def _unique_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    (x,) = inputs
    _sorted(attrs)
    size = math_prod(x.shape)
    rows = _rows(attrs, size)
    return [TensorType((rows,), x.dtype), TensorType((rows,), "int64"),
            TensorType((size,), "int64"), TensorType((rows,), "int64"), TensorType((), "int64")]


def _unique_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    flat = np.asarray(arrays[0]).reshape(-1)
    # a stable sort keeps the first of equal values (-0.0 and 0.0) first
    _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                          return_counts=True)
    inverse = inverse.reshape(-1)
    if not _sorted(attrs):  # the values in the order of their first occurrence
        order = np.argsort(first, kind="stable")
        row = np.empty_like(order)
        row[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], row[inverse]
    u = first.size

    def padded(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
        out = np.zeros(flat.size, dtype)
        out[:u] = a
        return _counted(out, u, attrs)

    return [padded(flat[first], flat.dtype), padded(first, np.dtype(np.int64)),
            inverse.astype(np.int64), padded(counts, np.dtype(np.int64)),
            np.array(u, np.int64)]


def _unique_kernel(inputs: list[Buffer], outputs: list[Buffer], attrs: Attrs, family: str
                   ) -> tuple[Stmt, list[Buffer]]:
    """One sequential invocation on every target (see the module's docstring): the
    rows past the count are zeroed, the count written last."""
    (x,), (values, first, inverse, counts, count) = inputs, outputs
    ordered = _sorted(attrs)
    size = math_prod(x.shape)
    # with ``sorted`` the first pass lists the values in scratch, the rank pass places them
    scratch = ([Buffer("seen", (size,), x.dtype), Buffer("seen_first", (size,), "int64"),
                Buffer("seen_counts", (size,), "int64")] if ordered else [])
    seen, seen_first, seen_counts = scratch or [values, first, counts]
    total, row = Local("total", "int64"), Local("row", "int64")

    def over_found(body: Callable[[Var], Stmt], name: str) -> For:
        """``body(j)`` for each value found so far."""
        j = Var(name)
        return For(j, total.value, "serial", body(j))

    def meet(i: Expr) -> Stmt:
        element = Load(x, (i,), x.dtype)
        search = over_found(lambda j: IfThenElse(
            (row.value < 0) & load(seen, j).eq(element), row.set(j)), "found")
        new = seq(row.set(total.value), store(seen, [total.value], element),
                  store(seen_first, [total.value], i), store(seen_counts, [total.value], 1),
                  total.set(total.value + 1))
        again = store(seen_counts, [row.value], load(seen_counts, row.value) + 1)
        body = [row.set(-1), search, IfThenElse(row.value < 0, new, again)]
        return seq(*body, *([] if ordered else [store(inverse, [i], row.value)]))

    def rank(value: Expr, rows: Buffer) -> Stmt:
        """``row``: how many of the values in ``rows`` are below ``value``."""
        return seq(row.set(0), over_found(lambda k: IfThenElse(
            load(rows, k) < value, row.set(row.value + 1)), "below"))

    def place(j: Expr) -> Stmt:
        return seq(rank(load(seen, j), seen), store(values, [row.value], load(seen, j)),
                   store(first, [row.value], load(seen_first, j)),
                   store(counts, [row.value], load(seen_counts, j)))

    def remap(i: Expr) -> Stmt:
        return seq(rank(Load(x, (i,), x.dtype), values), store(inverse, [i], row.value))

    def clear(r: Expr) -> Stmt:
        return IfThenElse(r >= total.value, seq(*(store(b, [r], 0)
                                                 for b in (values, first, counts))))

    passes = [total.set(0), loop(size, meet, "element")]
    if ordered:
        passes += [over_found(place, "value"), loop(size, remap, "element")]
    passes += [loop(values.shape[0], clear, "row"), store(count, [], total.value)]
    return Local.scope([total, row], seq(*passes)), scratch


register("unique", Pattern.OPAQUE, _unique_infer, _unique_reference, kernel=_unique_kernel)
