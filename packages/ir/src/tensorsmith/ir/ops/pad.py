"""``pad``: grow each axis by ``before[d]`` and ``after[d]`` elements (all >= 0).

Modes follow ONNX: ``constant`` fills with ``value``, ``edge`` repeats the border element,
``reflect`` mirrors without repeating it, ``wrap`` continues periodically. The importer
turns ONNX's negative pads (cropping) into a ``slice`` after the pad.

An amount may be a symbolic size that is never negative (``n - 1`` of a size ``n``
computed from an input's values, as ONNX's ``pads`` given at run time become): the
compute then places the input at an offset the kernel reads as a size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..dtypes import is_float
from ..op_registry import Attrs, Pattern, TensorType, always, attr_dim, check, check_dim, register
from ..symbolic import Dim, Sym, dim_max, is_static, static_dim
from ..te.expr import Expr, const, maximum, minimum, select

MODES = ("constant", "edge", "reflect", "wrap")


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    before, after, mode = attrs["before"], attrs["after"], attrs.get("mode", "constant")
    check(len(before) == len(after) == len(x.shape),
          f"pad needs one before/after per axis of rank {len(x.shape)}, got {list(before)}, "
          f"{list(after)}")
    before = [_amount(p, f"before axis {d}") for d, p in enumerate(before)]
    after = [_amount(p, f"after axis {d}") for d, p in enumerate(after)]
    check(all(isinstance(p, Sym) or p >= 0 for p in (*before, *after)),
          f"pad amounts must be >= 0, got {list(before)}, {list(after)}")
    check(mode in MODES, f"pad mode {mode!r} is not one of {', '.join(MODES)}")
    for d, (b, a, n) in enumerate(zip(before, after, x.shape)):
        if mode != "constant" and not (isinstance(b, int) and isinstance(a, int) and not b + a):
            check_dim(n, ">", 0, f"{mode} padding of the empty axis {d}")
        if mode == "reflect":
            most = max(b, a) if is_static((b, a)) else dim_max(b, a)
            check_dim(most, "<", n, f"reflect padding {most} on axis {d} needs "
                      f"the axis longer than it, it has {n}")
    shape = tuple(n + b + a for n, b, a in zip(x.shape, before, after))
    return [TensorType(shape, x.dtype)]


def _amount(p: object, where: str) -> Dim:
    """A pad amount: an int, or a symbolic size that no value of the symbols makes
    negative (the compute reads it as an offset); others must be known when the model is
    compiled."""
    p = attr_dim(p, f"pad {where}")
    if isinstance(p, Sym) and always(p, ">=", 0):
        return p
    return static_dim(p, f"pad's amount {where}")


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    mode = attrs.get("mode", "constant")
    width = [(static_dim(attr_dim(b, "pad before"), "pad's amount before"),
              static_dim(attr_dim(a, "pad after"), "pad's amount after"))
             for b, a in zip(attrs["before"], attrs["after"])]
    if mode == "constant":
        return [np.pad(x, width, mode="constant",
                       constant_values=np.asarray(attrs.get("value", 0)).astype(x.dtype))]
    return [np.pad(x, width, mode=mode)]


def _source(i: Expr, n: Dim, before: Dim, mode: str) -> tuple[Expr, Expr | None]:
    """Index into the input axis for output index ``i``, and the in-bounds condition."""
    j = i - const(before)
    last = const(n - 1)
    if mode == "constant":
        inside = (j >= const(0)) & (j <= last)
        return minimum(maximum(j, const(0)), last), inside
    if mode == "edge":
        return minimum(maximum(j, const(0)), last), None
    if mode == "reflect":
        k = select(j < const(0), -j, j)
        return select(k > last, const(2 * (n - 1)) - k, k), None
    # wrap: j may be as low as -before, so shift by a multiple of n first
    if isinstance(before, Sym) or isinstance(n, Sym):  # by enough multiples for any size
        return (j % const(n) + const(n)) % const(n), None
    return (j + const(n * (before // n + 1))) % n, None


def _fill(value: float, dtype: str) -> Expr:
    if dtype == "bool":
        return const(bool(value), dtype)
    return const(float(value) if is_float(dtype) else int(value), dtype)


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    before = [attr_dim(b, "pad before") for b in attrs["before"]]
    value = _fill(attrs.get("value", 0), x.dtype)
    if any(d == 0 for d in x.shape):  # nothing to read: all padding
        return [te.compute(out[0].shape, lambda *i: value, name=tag, tag="pad")]

    def element(*idx: Expr) -> Expr:
        src, conds = [], []
        for d, i in enumerate(idx):
            if x.shape[d] == out[0].shape[d]:
                src.append(i)
                continue
            s, c = _source(i, x.shape[d], before[d], mode)
            src.append(s)
            if c is not None:
                conds.append(c)
        load = x[tuple(src)]
        if not conds:
            return load
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        return select(cond, load, value)

    return [te.compute(out[0].shape, element, name=tag, tag="pad")]


register("pad", Pattern.INJECTIVE, _infer, _reference, _compute)
