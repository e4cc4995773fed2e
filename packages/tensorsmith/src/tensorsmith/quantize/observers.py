"""Observers: what calibration remembers about one tensor, and the range it picks.

Three methods choose the range ``[lo, hi]`` that an activation's 256 levels cover:

* ``minmax`` takes the extremes seen. Nothing is clipped, but one outlier stretches the
  step of every level.
* ``percentile`` drops the rarest ``100 - p`` percent at each end (``p`` = 99.99 by
  default), read off a histogram of the values.
* ``entropy`` picks the clipping threshold whose 128-level quantized histogram of ``|x|``
  is closest to the original in KL divergence (TensorRT's method, which ONNX Runtime's
  ``Entropy`` calibrator follows): clipping costs a little at the tail, coarse levels cost
  everywhere, and the divergence weighs the two.

The histogram methods need the extremes before the bins can be laid out, so they observe
in two passes over the calibration set: :class:`MinMaxObserver` first, then
:class:`HistogramObserver` over the range it found. Two passes of a compiled model are
cheap; keeping every sample's tensors in memory is not.
"""

from __future__ import annotations

import numpy as np

from .errors import QuantizeError

METHODS = ("minmax", "percentile", "entropy")
DEFAULT_BINS = 2048
QUANTIZED_BINS = 128  # levels of |x| that the entropy search quantizes to (int8's half)


class MinMaxObserver:
    """The smallest and largest value seen, over every sample."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lo = np.inf
        self.hi = -np.inf

    def update(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        lo, hi = float(np.min(values)), float(np.max(values))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise QuantizeError(f"tensor {self.name!r} holds NaN or infinity on a calibration "
                                "sample: its range cannot be calibrated")
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)

    def range(self) -> tuple[float, float]:
        if self.lo > self.hi:  # never updated (only empty tensors)
            return 0.0, 0.0
        return self.lo, self.hi


class HistogramObserver:
    """A histogram of the values (or of ``|x|``, ``absolute=True``) over a fixed range
    found by a first, min-max pass."""

    def __init__(self, name: str, lo: float, hi: float, *, absolute: bool,
                 bins: int = DEFAULT_BINS) -> None:
        self.name = name
        self.absolute = absolute
        self.lo, self.hi = lo, hi
        top = max(abs(lo), abs(hi))
        low, high = (0.0, top) if absolute else (lo, hi)
        if high <= low:  # a constant tensor: one bin around it
            high = low + max(abs(low), 1.0) * 1e-6
        self.edges = np.linspace(low, high, bins + 1)
        self.counts = np.zeros(bins, dtype=np.int64)

    def update(self, values: np.ndarray) -> None:
        data = np.abs(values) if self.absolute else values
        counts, _ = np.histogram(data, bins=self.edges)
        self.counts += counts

    def percentile_range(self, percentile: float) -> tuple[float, float]:
        """The values at ``100 - p`` and ``p`` percent, within the min-max range."""
        total = self.counts.sum()
        if total == 0:
            return self.lo, self.hi
        cdf = np.cumsum(self.counts) / total
        fraction = percentile / 100.0
        top = int(np.searchsorted(cdf, fraction, side="left"))
        bottom = int(np.searchsorted(cdf, 1.0 - fraction, side="right"))
        hi = float(self.edges[min(top + 1, len(self.edges) - 1)])
        lo = float(self.edges[min(bottom, len(self.edges) - 1)])
        return max(lo, self.lo), min(hi, self.hi)

    def entropy_range(self, quantized_bins: int = QUANTIZED_BINS) -> tuple[float, float]:
        """``[-t, t]`` within the min-max range, ``t`` the KL-optimal threshold of ``|x|``."""
        threshold = kl_threshold(self.counts, self.edges, quantized_bins)
        return max(-threshold, self.lo), min(threshold, self.hi)


def kl_threshold(counts: np.ndarray, edges: np.ndarray, quantized_bins: int) -> float:
    """The clipping threshold of a histogram of ``|x|`` that minimizes KL(P || Q).

    For each candidate number of bins ``i``: P is the first ``i`` bins with everything
    beyond folded into the last one (what clipping does), Q is the same bins merged into
    ``quantized_bins`` levels and spread back evenly over the bins that were not empty.
    """
    counts = counts.astype(np.float64)
    bins = len(counts)
    if counts.sum() == 0 or bins <= quantized_bins:
        return float(edges[-1])
    suffix = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])  # suffix[i] = sum(c[i:])
    best_i, best_kl = bins, np.inf
    for i in range(quantized_bins, bins + 1):
        p = counts[:i].copy()
        p[i - 1] += suffix[i]
        if p.sum() == 0:
            continue
        source = counts[:i]
        group = np.minimum(np.arange(i) * quantized_bins // i, quantized_bins - 1)
        nonzero = source > 0
        sums = np.bincount(group, weights=source, minlength=quantized_bins)
        filled = np.bincount(group, weights=nonzero, minlength=quantized_bins)
        q = np.where(nonzero, sums[group] / np.maximum(filled[group], 1), 0.0)
        kl = _kl(p / p.sum(), q / max(q.sum(), 1e-300))
        if kl < best_kl:
            best_i, best_kl = i, kl
    return float(edges[best_i])


def _kl(p: np.ndarray, q: np.ndarray, eps: float = 1e-10) -> float:
    """KL(P || Q) over P's support; a bin that P has and Q lacks counts as Q = eps."""
    support = p > 0
    return float(np.sum(p[support] * np.log(p[support] / np.maximum(q[support], eps))))
