"""Comparing one tensor with its reference: statistics, worst element, the tolerance rule.

The rule is ``max |actual - reference| <= atol + rtol * max |reference|``: the error is
measured against the tensor's scale, not element by element. Element-wise ``allclose``
flags every deep network, whose near-zero activations carry absolute errors that are
harmless next to the tensor's magnitude; this rule flags a node whose result is wrong.
Integer and boolean tensors must be equal. NaN matches NaN and infinities match
themselves, at the same positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Stats:
    """Shape, dtype and value range of one tensor (NaNs ignored in min/max/mean)."""

    shape: tuple[int, ...]
    dtype: str
    min: float
    max: float
    mean: float

    @classmethod
    def of(cls, array: np.ndarray) -> Stats:
        a = np.asarray(array)
        values = a.astype(np.float64, copy=False).reshape(-1)
        finite = values[~np.isnan(values)] if values.dtype.kind == "f" else values
        if finite.size == 0:
            lo = hi = mean = float("nan")
        else:
            lo, hi, mean = float(finite.min()), float(finite.max()), float(finite.mean())
        return cls(tuple(int(d) for d in a.shape), str(a.dtype), lo, hi, mean)

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "min": json_number(self.min),
                "max": json_number(self.max), "mean": json_number(self.mean)}  # fmt: skip


def json_number(x: float | None) -> float | str | None:
    """``x`` for strict JSON: NaN and infinities (which JSON lacks) as strings."""
    if x is None or np.isfinite(x):
        return x
    return str(x)


@dataclass(frozen=True)
class Diff:
    """How ``actual`` differs from ``reference``; ``ok`` says if within tolerance."""

    ok: bool
    reason: str  # "" when ok; else "values", "shape" or "nan"
    max_abs_diff: float
    tolerance: float
    worst_index: tuple[int, ...] | None
    reference_at_worst: float | None
    actual_at_worst: float | None


def diff(actual: np.ndarray, reference: np.ndarray, rtol: float, atol: float) -> Diff:
    """Compare two tensors by the module's rule."""
    a, r = np.asarray(actual), np.asarray(reference)
    if a.shape != r.shape:
        return Diff(False, "shape", float("inf"), 0.0, None, None, None)
    if a.size == 0:
        return Diff(True, "", 0.0, 0.0, None, None, None)
    exact = r.dtype.kind in "biu" and a.dtype.kind in "biu"
    a64, r64 = a.astype(np.float64), r.astype(np.float64)
    scale = float(np.max(np.abs(r64[np.isfinite(r64)]), initial=0.0))
    tolerance = 0.0 if exact else atol + rtol * scale
    same_special = (np.isnan(a64) & np.isnan(r64)) | (np.isinf(r64) & (a64 == r64))
    with np.errstate(invalid="ignore"):
        error = np.where(same_special, 0.0, np.abs(a64 - r64))
    error = np.where(np.isnan(error), np.inf, error)  # NaN on one side only
    flat = int(np.argmax(error))
    worst = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    largest = float(error.reshape(-1)[flat])
    nan_mismatch = bool(np.any(np.isnan(a64) != np.isnan(r64)))
    ok = largest <= tolerance and not nan_mismatch
    reason = "" if ok else ("nan" if nan_mismatch else "values")
    return Diff(ok, reason, largest, tolerance, worst, float(r64[worst]), float(a64[worst]))
