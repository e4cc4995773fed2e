"""``slice``: a strided window, one (begin, end, step) per axis, already normalised.

The importer resolves ONNX's clamping and negative-index rules, so every axis here has
``0 <= begin < dim`` (or an empty range), a non-zero ``step`` and an ``end`` that may be
-1 for a backwards slice that runs through index 0: element ``i`` of an output axis is
``begin + i * step``, with ``len(range(begin, end, step))`` elements. Keeping the op
normalised makes infer, reference and compute trivially agree.

On a symbolic axis (or with a symbolic bound) the importer cannot clamp, so bounds may
run past the axis there, and are clamped here as ONNX Runtime clamps them: ``[0:5]`` of
an axis ``seq`` has ``min(5, seq)`` elements, ``[2:INT_MAX]`` has ``max(0, seq - 2)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import (
    MAX_TENSOR_BYTES,
    Attrs,
    Pattern,
    TensorType,
    always,
    attr_dim,
    check,
    register,
)
from ..symbolic import Dim, Sym, dim_max, dim_min, is_static, shape_text, static_dim
from ..te.expr import Expr


def _params(attrs: Attrs, shape: Sequence[Dim], clamp: bool = False
            ) -> list[tuple[Dim, Dim, int]]:
    """(begin, end, step) per axis. Where the axis or a bound is symbolic, the importer
    cannot clamp the bounds into the axis (``[0:5]`` of ``seq``, or ``[0:INT_MAX]``), so
    they are clamped here as ONNX Runtime clamps them at run time (:func:`_clamped`);
    ``clamp`` does the same for static ones, for the reference run on arrays whose sizes
    came from symbols."""
    begin, end, step = attrs["begin"], attrs["end"], attrs["step"]
    check(len(begin) == len(end) == len(step) == len(shape),
          f"slice needs one begin/end/step per axis of rank {len(shape)}, got "
          f"{shape_text(begin)}, {shape_text(end)}, {shape_text(step)}")
    out: list[tuple[Dim, Dim, int]] = []
    for d, (b, e, s, n) in enumerate(zip(begin, end, step, shape)):
        b, e = attr_dim(b, f"slice begin of axis {d}"), attr_dim(e, f"slice end of axis {d}")
        s = static_dim(attr_dim(s, f"slice step of axis {d}"), f"the slice step of axis {d}")
        check(s != 0, f"slice step is 0 on axis {d}")
        if clamp or not is_static((b, e, n)):
            out.append(_clamped(d, b, e, s, n))
            continue
        check(-1 <= e <= n and (len(range(b, e, s)) == 0 or 0 <= b < n),
              f"slice axis {d} of size {n}: range({b}, {e}, {s}) is not normalised")
        out.append((int(b), int(e), int(s)))
    return out


#: A bound this large means "to the end" of any axis: no axis has more elements than a
#: tensor may have bytes.
PAST_ANY_END = MAX_TENSOR_BYTES


def _clamped(d: int, b: Dim, e: Dim, s: int, n: Dim) -> tuple[Dim, Dim, int]:
    """Bounds clamped into an axis of ``n`` elements as ONNX Runtime clamps them: into
    ``[0, n]`` going forward, ``[-1, n - 1]`` (the begin into ``[0, n - 1]``) backward.
    A forward begin past the end needs no clamp: the length (:func:`_length`) is then
    0. Where a bound is provably inside, it stays as it is, so ``[0:seq]`` of ``seq`` is
    ``seq`` and ``[0:5]`` of it ``min(5, seq)``."""
    check(not (isinstance(b, int) and b < 0) and not (isinstance(e, int) and e < -1),
          f"slice axis {d} of size {n}: range({b}, {e}, {s}) is not normalised")
    if is_static((b, e, n)):  # Python's slice of a range clamps exactly so
        r = range(int(n))[slice(b, e if e >= 0 else (None if s < 0 else 0), s)]
        return r.start, r.stop, s
    if s > 0:
        return _clamp(b, 0, None), _clamp(e, 0, n), s
    return _clamp(b, 0, n - 1), _clamp(e, -1, n - 1), s


def _clamp(v: Dim, lo: Dim, hi: Dim | None) -> Dim:
    if hi is not None and isinstance(v, int) and v >= PAST_ANY_END:
        return hi
    if hi is not None and not _at_most(v, hi):
        v = dim_min(v, hi)
    return v if always(v, ">=", lo) else dim_max(v, lo)


def _at_most(v: Dim, hi: Dim) -> bool:
    """Whether ``v <= hi`` for every size: as symbolic.py decides it, or because ``v`` is
    ``min(a, b)`` with ``a`` or ``b`` at most ``hi`` (a bound the importer clamped
    already, ``min(5, seq)`` on an axis ``seq``)."""
    if always(v, "<=", hi):
        return True
    if not isinstance(v, Sym) or len(v.terms) != 1:
        return False
    (monomial, coefficient), = v.terms
    if coefficient != 1 or len(monomial) != 1 or monomial[0][1] != 1:
        return False
    atom = monomial[0][0]
    return isinstance(atom, tuple) and atom[0] == "min" and any(
        _at_most(x, hi) for x in atom[1:])


def _length(b: Dim, e: Dim, s: int) -> Dim:
    """``len(range(b, e, s))``, for symbolic bounds too (0 where they cross)."""
    if is_static((b, e)):
        return len(range(int(b), int(e), s))
    first, last = (b, e) if s > 0 else (e, b)
    n = last - first if abs(s) == 1 else (last - first + abs(s) - 1) // abs(s)
    return n if _at_most(first, last) or always(n, ">=", 0) else dim_max(n, 0)


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    shape = tuple(_length(b, e, s) for b, e, s in _params(attrs, x.shape))
    return [TensorType(shape, x.dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    # range() and slice() differ on a negative end: -1 is "through index 0" here
    index = tuple(slice(b, e if e >= 0 else (None if s < 0 else 0), s)
                  for b, e, s in _params(attrs, x.shape, clamp=True))
    return [x[index].copy()]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    x = inputs[0]
    params = _params(attrs, x.shape)

    def element(*idx: Expr) -> Expr:
        return x[tuple(i * s + b for i, (b, _, s) in zip(idx, params))]

    return [te.compute(out[0].shape, element, name=tag, tag="slice")]


register("slice", Pattern.INJECTIVE, _infer, _reference, _compute)
