"""Signal-processing generators: the Hann, Hamming and Blackman windows and the mel filter
bank (MelWeightMatrix, opset 17).

Their inputs are sizes and frequencies that decide the output's shape, so they are
constants, and so is the result: it is computed here, in float64 with ONNX's formulas,
and cast to ``output_datatype``. A window's size may also be given only when the model
runs (a graph input): the window's length is then a size the host computes before each
run, and kernels compute the same formulas from the positions and the size as data.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text, static_dim

from ..context import NodeContext
from ..dtypes import to_numpy_dtype
from ..registry import converter
from .common import normalize_axis, positions, reshape, transpose
from .constants import at_run_time, host_values


def _scalar(ctx: NodeContext, i: int, what: str) -> float:
    return np.asarray(ctx.constant(i, what)).reshape(-1)[0].item()


def _dtype(ctx: NodeContext) -> str:
    return to_numpy_dtype(int(ctx.attr("output_datatype", 1)), f"{ctx.where}: output_datatype")


def _window(ctx: NodeContext, kind: str) -> Value:
    if at_run_time(ctx, 0):
        return _run_time_window(ctx, kind)
    size = int(_scalar(ctx, 0, "size"))
    if size < 0:
        raise ctx.error(f"size {size} is negative")
    n = np.arange(size, dtype=np.float64)
    length = size if int(ctx.attr("periodic", 1)) else size - 1
    if kind == "hann":
        values = np.sin(n * np.pi / length) ** 2
    elif kind == "hamming":
        alpha = 25.0 / 46.0
        values = alpha - np.cos(n * np.pi * 2 / length) * (1 - alpha)
    else:
        values = (np.cos(n * np.pi * 2 / length) * -0.5 + np.cos(n * np.pi * 4 / length) * 0.08
                  + 0.42)
    return ctx.const(values.astype(_dtype(ctx)), hint=f"{kind}_window")


def _run_time_window(ctx: NodeContext, kind: str) -> Value:
    """A window of a size the run gives: its length is a size the host computes before
    each run (refused below 1: an empty window needs the size frozen), and the formulas
    of :func:`_window`, in float64 in the same order, are kernels over the positions and
    the size input itself (cast to float64, a scalar operand)."""
    entries = host_values(ctx, 0, "size")
    if len(entries) != 1:
        raise ctx.error(f"size must have one element, has {len(entries)}")
    count = ctx.size(entries[0], "size")
    n = ctx.add("cast", [positions(ctx, count)], {"dtype": "float64"})
    length = ctx.add("cast", [reshape(ctx, ctx.input(0), ())], {"dtype": "float64"})
    if not int(ctx.attr("periodic", 1)):
        length = ctx.add("sub", [length, ctx.const(np.float64(1), hint="one")])

    def const(value: float) -> Value:
        return ctx.const(np.float64(value), hint="coefficient")

    def cos_of(multiple: int) -> Value:  # cos(n * pi * multiple / length)
        angle = ctx.add("mul", [n, const(np.pi)])
        if multiple != 1:
            angle = ctx.add("mul", [angle, const(multiple)])
        return ctx.add("cos", [ctx.add("div", [angle, length])])

    if kind == "hann":
        sine = ctx.add("sin", [ctx.add("div", [ctx.add("mul", [n, const(np.pi)]), length])])
        values = ctx.add("mul", [sine, sine])
    elif kind == "hamming":
        alpha = 25.0 / 46.0
        values = ctx.add("sub", [const(alpha), ctx.add("mul", [cos_of(2), const(1 - alpha)])])
    else:
        values = ctx.add("add", [ctx.add("mul", [cos_of(2), const(-0.5)]),
                                 ctx.add("mul", [cos_of(4), const(0.08)])])
        values = ctx.add("add", [values, const(0.42)])
    dtype = _dtype(ctx)
    return values if dtype == "float64" else ctx.add("cast", [values], {"dtype": dtype})


converter("HannWindow", since=17)(lambda ctx: _window(ctx, "hann"))
converter("HammingWindow", since=17)(lambda ctx: _window(ctx, "hamming"))
converter("BlackmanWindow", since=17)(lambda ctx: _window(ctx, "blackman"))


@converter("MelWeightMatrix", since=17)
def convert_mel_weight_matrix(ctx: NodeContext) -> Value:
    bins = int(_scalar(ctx, 0, "num_mel_bins"))
    dft_length = int(_scalar(ctx, 1, "dft_length"))
    rate = _scalar(ctx, 2, "sample_rate")
    low, high = _scalar(ctx, 3, "lower_edge_hertz"), _scalar(ctx, 4, "upper_edge_hertz")
    spectrum = dft_length // 2 + 1
    edges = np.arange(bins + 2, dtype=np.float64)
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    edges = edges * ((high_mel - low_mel) / (bins + 2)) + low_mel
    edges = 700 * np.expm1(edges / 2595 * np.log(10))
    points = (((dft_length + 1) * edges) // rate).astype(int)
    out = np.zeros((spectrum, bins))
    for i in range(bins):
        left, center, right = points[i], points[i + 1], points[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            for j in range(left, center + 1):
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return ctx.const(out.astype(_dtype(ctx)), hint="mel")


def _dft_matrices(n_in: int, length: int, n_out: int, inverse: bool, hermitian: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the DFT angles, [n_out, n_in]; ``hermitian`` (inverse one-sided)
    doubles the bins that stand for a conjugate pair."""
    k = np.arange(n_out).reshape(-1, 1)
    j = np.arange(n_in).reshape(1, -1)
    theta = 2 * np.pi * ((k * j) % length) / length
    cos, sin = np.cos(theta), np.sin(theta)
    if hermitian:
        weight = np.full(n_in, 2.0)
        weight[0] = 1.0
        if length % 2 == 0 and n_in > length // 2:
            weight[length // 2] = 1.0
        weight[length // 2 + 1:] = 0.0
        cos, sin = cos * weight, sin * weight
    if inverse:
        cos, sin = cos / length, sin / length
    return cos, sin


def dft(ctx: NodeContext, x: Value, axis: int, length: int, inverse: bool, onesided: bool
        ) -> Value:
    """ONNX's DFT of ``x`` ([..., 1] real or [..., 2] complex) along ``axis``."""
    rank = len(x.shape)
    n = static_dim(x.shape[axis], "the length a DFT transforms")
    perm = [d for d in range(rank - 1) if d != axis] + [rank - 1, axis]
    moved = transpose(ctx, ctx.add("cast", [x], {"dtype": "float64"}), perm)  # [..., c, n]
    n_in = min(n, length) if not (inverse and onesided) else min(n, length // 2 + 1)
    if n_in < n:
        moved = ctx.add("slice", [moved], {"begin": [0] * rank,
                                           "end": [*moved.shape[:-1], n_in],
                                           "step": [1] * rank})
    real_only = x.shape[-1] == 1
    if inverse and onesided:
        n_out, hermitian = length, True
    else:
        n_out, hermitian = (length // 2 + 1 if onesided else length), False
    cos, sin = _dft_matrices(n_in, length, n_out, inverse, hermitian)
    lead = moved.shape[:-2]

    def part(i: int) -> Value:
        v = ctx.add("slice", [moved], {"begin": [0] * (rank - 2) + [i, 0],
                                       "end": [*lead, i + 1, n_in], "step": [1] * rank})
        return reshape(ctx, v, (*lead, n_in, 1))

    def times(m: np.ndarray, v: Value) -> Value:
        return ctx.add("matmul", [ctx.const(m, hint="dft"), v])  # [..., n_out, 1]

    re = part(0)
    sign = 1.0 if inverse else -1.0
    real = times(cos, re)
    imag = times(sin * sign, re)
    if not real_only:
        im = part(1)
        real = ctx.add("sub", [real, times(sin * sign, im)])
        imag = ctx.add("add", [imag, times(cos, im)])
    out = real if hermitian else ctx.add("concat", [real, imag], {"axis": len(lead) + 1})
    # [..., n_out, c] back to the input's axis order
    back = [0] * rank
    order = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    for i, d in enumerate(order):
        back[d] = i
    return ctx.add("cast", [transpose(ctx, out, back)], {"dtype": x.dtype})


@converter("DFT", since=17)
def convert_dft(ctx: NodeContext) -> Value:
    """A DFT of static length is two products with constant cos and sin matrices, done in
    float64 (the reference is NumPy's FFT in float64) and cast back."""
    x = ctx.input(0)
    rank = len(x.shape)
    if rank < 2 or x.shape[-1] not in (1, 2):
        raise ctx.error(f"needs [..., 1] (real) or [..., 2] (complex) input, got "
                        f"{shape_text(x.shape)}")
    if ctx.opset >= 20:
        given = ctx.optional_constant(2, "axis")
        axis = -2 if given is None else int(np.asarray(given).reshape(-1)[0])
    else:
        axis = int(ctx.attr("axis", 1))
    axis = normalize_axis(ctx, axis, rank)
    if axis == rank - 1:
        raise ctx.error("the axis cannot be the last (real/imaginary) one")
    length_given = ctx.optional_constant(1, "dft_length")
    n = x.shape[axis]
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if length_given is not None and length_given.size:
        length = int(np.asarray(length_given).reshape(-1)[0])
    else:  # an inverse one-sided transform of n bins has 2 (n - 1) samples (irfft)
        length = 2 * (n - 1) if inverse and onesided else n
    return dft(ctx, x, axis, length, inverse, onesided)


@converter("STFT", since=17)
def convert_stft(ctx: NodeContext) -> Value:
    """Frames of the signal (a slice each, zero-padded to the frame length), times the
    window, then a DFT over each frame: [batch, frames, bins, 2]."""
    x = ctx.input(0)
    step = int(np.asarray(ctx.constant(1, "frame_step")).reshape(-1)[0])
    window = ctx.optional_input(2)
    given = ctx.optional_constant(3, "frame_length")
    if len(x.shape) != 3 or x.shape[2] not in (1, 2):
        raise ctx.error(f"needs a signal [batch, length, 1 or 2], got {shape_text(x.shape)}")
    length = int(np.asarray(given).reshape(-1)[0]) if given is not None else \
        (window.shape[0] if window is not None else 0)
    if length <= 0 or step <= 0:
        raise ctx.error("needs frame_length (or a window) and a positive frame_step")
    b, total, c = x.shape
    frames = 1 + (total - length) // step
    parts = []
    for f in range(frames):
        begin = f * step
        part = ctx.add("slice", [x], {"begin": [0, begin, 0],
                                      "end": [b, min(begin + length, total), c],
                                      "step": [1, 1, 1]})
        if part.shape[1] < length:
            part = ctx.add("pad", [part], {"before": [0, 0, 0],
                                           "after": [0, length - part.shape[1], 0],
                                           "mode": "constant", "value": 0.0})
        parts.append(reshape(ctx, part, (b, 1, length, c)))
    framed = parts[0] if len(parts) == 1 else ctx.add("concat", parts, {"axis": 1})
    if window is not None:
        framed = ctx.add("mul", [framed, reshape(ctx, window, (1, 1, length, 1))])
    return dft(ctx, framed, 2, length, False, bool(ctx.attr("onesided", 1)))
