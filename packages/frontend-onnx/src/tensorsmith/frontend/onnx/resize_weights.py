"""Resize as matrices: the weights ONNX's Resize gives each input position, per axis.

Resize is separable and linear in its input: along one axis, output position ``i`` is a
fixed weighted sum of input positions, whatever the data. With static shapes and
constant scales the weights are constants, so a Resize compiles to one small matrix
product (or, for ``nearest``, a gather) per resized axis.

The coordinate transforms, kernels (nearest, linear, cubic, their antialiased forms) and
the neighbour selection follow ONNX's reference implementation
(``onnx/reference/ops/op_resize.py``, Apache-2.0) step for step, in float64, because the
node tests' expected values are that implementation's output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Coeffs = Callable[[float, float], np.ndarray]


@dataclass(frozen=True)
class AxisWeights:
    """``matrix`` [out, in]; ``extrapolated`` marks outputs that take the extrapolation
    value instead (tf_crop_and_resize outside the ROI), None when there are none."""

    matrix: np.ndarray
    extrapolated: np.ndarray | None


def coefficient_fn(mode: str, nearest_mode: str, cubic_a: float, antialias: bool) -> Coeffs:
    """The kernel of ``mode``: coefficients for a position's fractional part ``ratio``."""
    if mode == "nearest":
        return lambda ratio, scale: _nearest(ratio, nearest_mode)
    if mode == "linear":
        return _linear_antialias if antialias else (lambda r, s: np.array([1 - r, r]))
    if mode == "cubic":
        if antialias:
            return lambda r, s: _cubic_antialias(r, s, cubic_a)
        return lambda r, s: _cubic(r, cubic_a)
    raise ValueError(f"unknown resize mode {mode!r}")


def _nearest(ratio: float, mode: str) -> np.ndarray:
    if float(ratio).is_integer():
        return np.array([0, 1])
    table = {"round_prefer_floor": [ratio <= 0.5, ratio > 0.5],
             "round_prefer_ceil": [ratio < 0.5, ratio >= 0.5],
             "floor": [1, 0], "ceil": [0, 1]}
    if mode not in table:
        raise ValueError(f"unknown nearest_mode {mode!r}")
    return np.array(table[mode], dtype=np.float64)


def _cubic(ratio: float, a: float) -> np.ndarray:
    r = ratio
    return np.array([
        ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
        ((a + 2) * r - (a + 3)) * r * r + 1,
        ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
        ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a,
    ])


def _cubic_antialias(ratio: float, scale: float, a: float) -> np.ndarray:
    scale = min(scale, 1.0)

    def coeff(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        if x < 2:
            return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
        return 0.0

    start = int(np.floor(-2 / scale) + 1)
    coeffs = np.array([coeff(scale * (i - ratio)) for i in range(start, 2 - start)])
    return coeffs / coeffs.sum()


def _linear_antialias(ratio: float, scale: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
    coeffs = np.clip(1 - np.abs(args), 0, 1)
    return coeffs / coeffs.sum()


def source_coordinates(mode: str, out_len: int, in_len: int, scale: float,
                       roi: Sequence[float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Input coordinate of each output position, and (tf_crop_and_resize) which fall
    outside the input."""
    y = np.arange(out_len, dtype=np.float64)
    width = scale * in_len
    if mode == "align_corners":
        return (np.zeros(out_len) if width == 1 else y * (in_len - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_crop_and_resize":
        if roi is None:
            raise ValueError("tf_crop_and_resize needs a roi")
        lo, hi = float(roi[0]), float(roi[1])
        if width == 1:
            x = np.full(out_len, (hi - lo) * (in_len - 1) / 2)
        else:
            x = y * (hi - lo) * (in_len - 1) / (width - 1)
        x = x + lo * (in_len - 1)
        return x, (x < 0) | (x > in_len - 1)
    if mode == "pytorch_half_pixel":
        return (np.full(out_len, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / width)
        return offset + (y + 0.5) / scale - 0.5, None
    raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")


def axis_weights(in_len: int, out_len: int, scale: float, coeffs: Coeffs, transform: str,
                 roi: Sequence[float] | None, exclude_outside: bool) -> AxisWeights:
    """The [out_len, in_len] matrix of one axis (the reference's per-axis interpolation
    applied to the identity)."""
    matrix = np.zeros((out_len, in_len), dtype=np.float64)
    if out_len == 0 or in_len == 0:
        return AxisWeights(matrix, None)
    x, extrapolated = source_coordinates(transform, out_len, in_len, scale, roi)
    floor = np.floor(x)
    ratios = np.where(x == floor, 1.0, x - floor)
    table = np.array([coeffs(float(r), scale) for r in ratios], dtype=np.float64)
    n = table.shape[1]
    pad = math.ceil(n / 2)
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        offset = np.where(frac <= 0.5, base, base + 1)
    neighbours = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        table = np.where((neighbours < 0) | (neighbours >= in_len), 0.0, table)
        total = table.sum(axis=-1, keepdims=True)
        table = table / np.where(total == 0, 1.0, total)
    clamped = np.clip(neighbours, 0, in_len - 1)
    rows = np.repeat(np.arange(out_len), n)
    np.add.at(matrix, (rows, clamped.reshape(-1)), table.reshape(-1))
    if extrapolated is not None:
        matrix[extrapolated] = 0.0
        if not extrapolated.any():
            extrapolated = None
    return AxisWeights(matrix, extrapolated)


def output_geometry(shape: Sequence[int], scales: Sequence[float] | None,
                    sizes: Sequence[int] | None, policy: str, axes: Sequence[int]
                    ) -> tuple[list[float], list[int]]:
    """Per-axis scale factors and output sizes from Resize's ``scales`` or ``sizes``
    (already expanded to every axis), honouring ``keep_aspect_ratio_policy``."""
    r = len(shape)
    if sizes is not None:
        factors = [sizes[i] / shape[i] if shape[i] else 1.0 for i in range(r)]
        if policy == "stretch":
            return factors, [int(s) for s in sizes]
        chosen = [factors[a] for a in axes]
        if policy == "not_larger":
            scale = min(chosen)
        elif policy == "not_smaller":
            scale = max(chosen)
        else:
            raise ValueError(f"unknown keep_aspect_ratio_policy {policy!r}")
        return ([scale if i in axes else 1.0 for i in range(r)],
                [int(scale * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)])
    assert scales is not None
    return [float(s) for s in scales], [int(s * n) for s, n in zip(scales, shape)]
