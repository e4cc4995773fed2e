"""``unique``: the distinct slices of a tensor along its first axis, ONNX's Unique.

(ONNX's Unique without ``axis`` is this op on the input flattened, with an axis on the
input with that axis moved first: the converter arranges both.) How many slices are
distinct is known only once the kernel has run, so, as the detection ops do
(ops/detection.py), ``unique`` gives one row per distinct slice, at most one per slice
of the input, and a ``count``; with a ``rows`` attribute (a counted size less one,
builder.counted_size) the executor places the rows for the bound and the later ops see
the counted rows only. Its outputs: the slices, each one's first index along the axis,
the inverse (each input slice's row: as long as the axis, never counted), the counts,
and the count.

Slices are equal when ``==`` says so of every element, as ONNX Runtime's ordered map
has it: -0.0 and 0.0 are one value, the first one met kept. NaN is no value ``==``
finds, so a slice holding NaN is distinct from every other here, where ONNX Runtime's
map merges it with whatever it meets; NaN inputs are unspecified. ``sorted`` (1, the
default) orders the slices ascending (lexicographically), else they stay in the order
of their first occurrence.

The kernel carries the distinct slices found so far from one slice to the next, which
no tensor expression states: it is written directly as tensor IR, one sequential loop on
every target (no index is loaded from a buffer the kernel wrote: lavapipe got those
wrong in the NMS kernel). A first pass finds each slice among the slices so far
(O(n * u * w) for slices of w elements); with ``sorted``, each found slice's row is then
the number of smaller ones (O(u^2 * w)), and each input slice's row the number of found
slices below it (O(n * u * w)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..symbolic import math_prod
from ..te.expr import Expr, Load, Var, as_expr
from ..te.handwritten import Local, load, loop, seq, store
from ..te.stmt import Buffer, For, IfThenElse, Stmt, Store
from ..te.symbols import extent_value
from .detection import counted_result, counted_rows


def _sorted(attrs: Attrs) -> bool:
    order = int(attrs.get("sorted", 1))
    check(order in (0, 1), f"unique sorted must be 0 or 1, not {order}")
    return bool(order)


def _unique_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    (x,) = inputs
    _sorted(attrs)
    check(len(x.shape) >= 1, "unique needs a tensor of rank >= 1 (its slices along axis 0)")
    n, *rest = x.shape
    rows = counted_rows(attrs, n)
    return [TensorType((rows, *rest), x.dtype), TensorType((rows,), "int64"),
            TensorType((n,), "int64"), TensorType((rows,), "int64"), TensorType((), "int64")]


def _unique_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = np.asarray(arrays[0])
    n = x.shape[0]
    # first occurrences by == (a dict: -0.0 and 0.0 are one key, each NaN a key of its own)
    rows: dict[tuple, int] = {}
    inverse = np.array([rows.setdefault(tuple(s), len(rows))
                        for s in x.reshape(n, math_prod(x.shape[1:])).tolist()], np.int64)
    first = np.full(len(rows), n, np.int64)
    np.minimum.at(first, inverse, np.arange(n))
    counts = np.bincount(inverse, minlength=len(rows)).astype(np.int64)
    if _sorted(attrs):
        keys = list(rows)
        order = np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64)
        row = np.empty_like(order)
        row[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], row[inverse]
    u = first.size

    def padded(a: np.ndarray) -> np.ndarray:
        out = np.zeros((n, *a.shape[1:]), a.dtype)
        out[:u] = a
        return counted_result(out, u, attrs)

    return [padded(x[first]), padded(first), inverse, padded(counts), np.array(u, np.int64)]


def _unique_kernel(inputs: list[Buffer], outputs: list[Buffer], attrs: Attrs, family: str
                   ) -> tuple[Stmt, list[Buffer]]:
    """One sequential invocation on every target (see the module's docstring): the
    rows past the count are zeroed, the count written last."""
    (x,), (values, first, inverse, counts, count) = inputs, outputs
    ordered = _sorted(attrs)
    n, *rest = x.shape
    width = math_prod(rest)
    # with ``sorted`` the first pass lists the slices in scratch, the rank pass places them
    scratch = ([Buffer("seen", (n * width,), x.dtype), Buffer("seen_first", (n,), "int64"),
                Buffer("seen_counts", (n,), "int64")] if ordered else [])
    seen, seen_first, seen_counts = scratch or [values, first, counts]
    total, row = Local("total", "int64"), Local("row", "int64")
    same, order = Local("same", "int64"), Local("order", "int64")

    def element(buf: Buffer, r: Expr, k: Expr) -> Expr:
        """Element ``k`` of slice ``r`` of ``buf``."""
        return Load(buf, (r * extent_value(width) + k,), buf.dtype)

    def over_found(body: Callable[[Var], Stmt], name: str) -> For:
        """``body(j)`` for each slice found so far."""
        j = Var(name)
        return For(j, total.value, "serial", body(j))

    def compare(a: Buffer, r: Expr, b: Buffer, s: Expr) -> Stmt:
        """``order``: -1, 0 or 1 as slice ``r`` of ``a`` is below, equal to or above slice
        ``s`` of ``b`` (lexicographically)."""
        def step(k: Expr) -> Stmt:
            p, q = element(a, r, k), element(b, s, k)
            return IfThenElse(order.value.eq(0), IfThenElse(
                p < q, order.set(-1), IfThenElse(p > q, order.set(1))))
        return seq(order.set(0), loop(width, step, "k"))

    def meet(i: Expr) -> Stmt:
        def match(j: Expr) -> Stmt:
            check = loop(width, lambda k: IfThenElse(
                element(seen, j, k).ne(element(x, i, k)), same.set(0)), "k")
            return IfThenElse(row.value < 0, seq(same.set(1), check,
                                                 IfThenElse(same.value.eq(1), row.set(j))))

        new = seq(row.set(total.value),
                  loop(width, lambda k: Store(seen, total.value * extent_value(width) + k,
                                              element(x, i, k)), "k"),
                  store(seen_first, [total.value], i), store(seen_counts, [total.value], 1),
                  total.set(total.value + 1))
        again = store(seen_counts, [row.value], load(seen_counts, row.value) + 1)
        body = [row.set(-1), over_found(match, "found"), IfThenElse(row.value < 0, new, again)]
        return seq(*body, *([] if ordered else [store(inverse, [i], row.value)]))

    def rank(a: Buffer, r: Expr) -> Stmt:
        """``row``: how many of the found slices in ``values`` (``seen`` before they are
        placed) are below slice ``r`` of ``a``."""
        found = seen if a is seen else values
        return seq(row.set(0), over_found(lambda k: seq(compare(found, k, a, r), IfThenElse(
            order.value < 0, row.set(row.value + 1))), "below"))

    def place(j: Expr) -> Stmt:
        copy = loop(width, lambda k: Store(values, row.value * extent_value(width) + k,
                                           element(seen, j, k)), "k")
        return seq(rank(seen, j), copy, store(first, [row.value], load(seen_first, j)),
                   store(counts, [row.value], load(seen_counts, j)))

    def remap(i: Expr) -> Stmt:
        return seq(rank(x, i), store(inverse, [i], row.value))

    def clear(r: Expr) -> Stmt:
        zero = loop(width, lambda k: Store(values, r * extent_value(width) + k,
                                           as_expr(0, values.dtype)), "k")
        return IfThenElse(r >= total.value, seq(zero, store(first, [r], 0),
                                                store(counts, [r], 0)))

    passes = [total.set(0), loop(n, meet, "slice")]
    if ordered:
        passes += [over_found(place, "found"), loop(n, remap, "slice")]
    passes += [loop(values.shape[0], clear, "row"), store(count, [], total.value)]
    return Local.scope([total, row, same, order], seq(*passes)), scratch


register("unique", Pattern.OPAQUE, _unique_infer, _unique_reference, kernel=_unique_kernel)
