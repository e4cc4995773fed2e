"""Calibration ranges: percentile and entropy stay inside the min-max range, and clip a
heavy-tailed distribution's rare extremes, which min-max keeps and pays for with a coarse
step everywhere. Where there is no tail to cut (uniform data), both keep about the whole
range."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.quantize.observers import HistogramObserver, MinMaxObserver, kl_threshold
from tensorsmith.quantize.qparams import activation_params, quantize_bias, quantize_weight


def observe(batches: list[np.ndarray]) -> tuple[tuple[float, float], dict[str, tuple]]:
    """The min-max range and the percentile (99.9) and entropy ranges, in two passes."""
    mm = MinMaxObserver("t")
    for b in batches:
        mm.update(b)
    lo, hi = mm.range()
    signed = HistogramObserver("t", lo, hi, absolute=False)
    absolute = HistogramObserver("t", lo, hi, absolute=True)
    for b in batches:
        signed.update(b)
        absolute.update(b)
    return (lo, hi), {"percentile": signed.percentile_range(99.9),
                      "entropy": absolute.entropy_range()}


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_heavy_tails_are_clipped_within_the_min_max_range(method: str) -> None:
    rng = np.random.default_rng(0)
    batches = [rng.standard_t(df=2, size=20_000).astype(np.float32) for _ in range(5)]
    (lo, hi), ranges = observe(batches)
    low, high = ranges[method]
    assert lo <= low < 0 < high <= hi
    # Student's t with 2 degrees of freedom: extremes of 100 000 draws are in the
    # hundreds, while 99.9 % of the mass lies within about +-22
    assert high < 0.5 * hi and low > 0.5 * lo, (method, (low, high), (lo, hi))
    inside = np.mean([(b >= low) & (b <= high) for b in batches])
    assert inside > 0.99


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_without_a_tail_the_range_is_kept(method: str) -> None:
    rng = np.random.default_rng(1)
    batches = [rng.uniform(0.0, 6.0, size=50_000).astype(np.float32) for _ in range(2)]
    (lo, hi), ranges = observe(batches)
    low, high = ranges[method]
    assert lo <= low and high <= hi
    assert high >= 0.95 * hi, (method, high, hi)


def test_percentile_100_is_min_max() -> None:
    data = np.random.default_rng(2).standard_normal(10_000).astype(np.float32)
    (lo, hi), _ = observe([data])
    h = HistogramObserver("t", lo, hi, absolute=False)
    h.update(data)
    assert h.percentile_range(100.0) == (lo, hi)


def test_kl_threshold_of_an_empty_histogram_is_the_top_edge() -> None:
    edges = np.linspace(0, 4, 2049)
    assert kl_threshold(np.zeros(2048, np.int64), edges, 128) == 4.0


def test_activation_params_represent_zero_exactly() -> None:
    for dtype, (qmin, qmax) in [("uint8", (0, 255)), ("int8", (-128, 127))]:
        scale32, zero = activation_params(-1.0, 3.0, dtype)
        scale = float(scale32)
        assert qmin <= zero <= qmax
        assert scale == pytest.approx(4.0 / 255)
        assert (qmin - zero) * scale == pytest.approx(-1.0, abs=scale)
        assert (qmax - zero) * scale == pytest.approx(3.0, abs=scale)
    scale, zero = activation_params(0.5, 2.0, "uint8")  # widened to include 0
    assert zero == 0 and scale == pytest.approx(2.0 / 255)
    assert activation_params(0.0, 0.0, "uint8") == (1.0, 0)


def test_weights_and_bias() -> None:
    w = np.array([[1.0, -0.5], [0.0, 0.0], [-2.54, 0.01]], np.float32)
    q, scale = quantize_weight(w, 0)
    assert q.dtype == np.int8 and list(q[:, 0]) == [127, 0, -127]
    np.testing.assert_allclose(scale, [1 / 127, 1.0, 2.54 / 127], rtol=1e-6)
    bias = quantize_bias(np.array([0.5, 1.0, -1.0]), np.float32(0.1), scale)
    assert bias is not None and bias[0].dtype == np.int32
    np.testing.assert_allclose(bias[0] * bias[1], [0.5, 1.0, -1.0], atol=0.1 * 2.54 / 127)
    assert quantize_bias(np.array([1e6]), np.float32(1e-6), np.array([1e-6], np.float32)) is None
