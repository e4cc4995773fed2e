"""The arithmetic of quantization: scales and zero points, and the integer tensors.

Activations are asymmetric per tensor, like ONNX Runtime's default QDQ format: the range
is widened to include 0 (so zero padding and ReLU's zeros are exact), split into 255
steps, and the zero point is the level that stands for 0. Weights are symmetric per
output channel in int8 over [-127, 127] (the zero point is 0, and -128 stays unused so
that the range is symmetric). A bias is int32 on the scale ``input_scale *
weight_scale``, the scale of the integer accumulator it is added to, so an integer
kernel adds it without rescaling.
"""

from __future__ import annotations

import numpy as np

ACTIVATION_TYPES = {"uint8": (0, 255), "int8": (-128, 127)}
WEIGHT_MAX = 127
INT32_MAX = 2**31 - 1


def activation_params(lo: float, hi: float, dtype: str) -> tuple[np.float32, int]:
    """(scale, zero point) that map ``[min(lo, 0), max(hi, 0)]`` onto ``dtype``'s levels."""
    qmin, qmax = ACTIVATION_TYPES[dtype]
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / (qmax - qmin))
    if not np.isfinite(scale) or scale <= np.finfo(np.float32).tiny:  # an all-zero tensor
        return np.float32(1.0), 0 if qmin < 0 else qmin
    zero = int(np.clip(np.rint(qmin - lo / float(scale)), qmin, qmax))
    return scale, zero


def quantize_weight(weight: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale per index of ``axis``), symmetric: ``w ~ q * scale``."""
    w = np.asarray(weight, dtype=np.float32)
    others = tuple(d for d in range(w.ndim) if d != axis)
    peak = np.max(np.abs(w), axis=others) if others else np.abs(w)
    scale = (peak / WEIGHT_MAX).astype(np.float32)
    scale[scale <= np.finfo(np.float32).tiny] = 1.0  # an all-zero channel
    shape = [-1 if d == axis else 1 for d in range(w.ndim)]
    q = np.clip(np.rint(w / scale.reshape(shape)), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    return q, scale


def quantize_bias(bias: np.ndarray, input_scale: np.float32,
                  weight_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(int32 bias, its float32 scale per channel), or None if a value would overflow
    int32 (a tiny input or weight scale): the bias then stays float."""
    scale = (np.float32(input_scale) * weight_scale.astype(np.float32)).astype(np.float32)
    q = np.rint(np.asarray(bias, dtype=np.float64) / scale.astype(np.float64))
    if not np.all(np.abs(q) <= INT32_MAX):
        return None
    return q.astype(np.int32), scale
