"""Integer products of 8-bit tensors: ``qmatmul`` and ``qconv2d``.

Both multiply uint8 activations by int8 weights and accumulate exactly in int32; the
zero point and scales are the caller's (passes/integer_products.py writes the
correction and the float epilogue as ordinary ops after them). uint8 times int8 is
what the CPU's integer dot products take (x86's ``vpdpbusd``: four byte products
summed into each 32-bit lane).

The weights are stored *four reduction steps last*: a product's ``B[K, N]`` as
``[K / 4, N, 4]``, a convolution's OIHW weight as ``[O, C / 4, KH, KW, 4]``. The
compute states the four-way dot explicitly, ``sum_k x[4k] w[k, n, 0] + ... + x[4k + 3]
w[k, n, 3]``, so every codegen computes it as written, and a vector loop over ``n``
reads, per step of ``k``, four adjacent activation bytes (one 32-bit broadcast) and
``4 x lanes`` adjacent weight bytes (one register): the shape codegen-llvm's dot
product idiom recognizes (codegen/llvm/dot4.py).

``qconv2d`` pads with its ``zero_point`` attribute, the byte that stands for a real 0,
so that the correction ``- zero_point * sum(w)`` is the same at every output pixel.
Like ``conv2d`` it also runs on channel-blocked activations (``block``: an input
``[N, C / b, H, W, b]`` and an output ``[N, O / block, OH, OW, block]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..op_registry import Attrs, Pattern, TensorType, check, check_dim, register
from ..symbolic import shape_text, static_dim
from ..te.dot4 import DOT
from ..te.expr import Expr
from .broadcast import broadcast_index
from .conv import (
    _conv_infer,
    _conv_reference,
    _geometry,
    block_channels,
    pad_stage,
    unblock_channels,
)


def pack_matmul_weight(w: np.ndarray) -> np.ndarray:
    """``B[K, N]`` (K a multiple of :data:`DOT`) as ``[K / 4, N, 4]``."""
    k, n = w.shape
    return np.ascontiguousarray(w.reshape(k // DOT, DOT, n).transpose(0, 2, 1))


def unpack_matmul_weight(w: np.ndarray) -> np.ndarray:
    """``[K / 4, N, 4]`` back to ``B[K, N]``."""
    k4, n, d = w.shape
    return w.transpose(0, 2, 1).reshape(k4 * d, n)


def pack_conv_weight(w: np.ndarray) -> np.ndarray:
    """OIHW (C a multiple of :data:`DOT`) as ``[O, C / 4, KH, KW, 4]``."""
    o, c, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o, c // DOT, DOT, kh, kw).transpose(0, 1, 3, 4, 2))


def unpack_conv_weight(w: np.ndarray) -> np.ndarray:
    """``[O, C / 4, KH, KW, 4]`` back to OIHW."""
    o, c4, kh, kw, d = w.shape
    return w.transpose(0, 1, 4, 2, 3).reshape(o, c4 * d, kh, kw)


def _check_operands(op: str, x: TensorType, w: TensorType, w_rank: int) -> None:
    check(x.dtype == "uint8", f"{op} takes uint8 activations, got {x.dtype}")
    check(w.dtype == "int8", f"{op} takes int8 weights, got {w.dtype}")
    check(len(w.shape) == w_rank and w.shape[-1] == DOT,
          f"{op} takes its weight with {DOT} reduction steps last (rank {w_rank}), got "
          f"{shape_text(w.shape)}")


# -- qmatmul ---------------------------------------------------------------------------
def _qmatmul_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    a, w = inputs
    _check_operands("qmatmul", a, w, 3)
    check(len(a.shape) >= 2, f"qmatmul takes an input of rank >= 2, got {shape_text(a.shape)}")
    check_dim(a.shape[-1], "==", DOT * static_dim(w.shape[0], "qmatmul's K / 4"),
              f"qmatmul: A's last dim {a.shape[-1]} is not 4 x the weight's first "
              f"({shape_text(w.shape)})")
    return [TensorType((*a.shape[:-2], a.shape[-2], w.shape[1]), "int32")]


def _qmatmul_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    a, w = arrays
    out = np.matmul(a.astype(np.int64), unpack_matmul_weight(w).astype(np.int64))
    return [out.astype(np.int32)]


def _dot(x: Sequence[Expr], w: Sequence[Expr]) -> Expr:
    """``x[0] w[0] + ... + x[3] w[3]`` in int32, left to right."""
    terms = [te.cast("int32", a) * te.cast("int32", b) for a, b in zip(x, w)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _qmatmul_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                     ) -> list[te.Tensor]:
    a, w = inputs
    k = te.reduce_axis(w.shape[0], "k")

    def element(*idx: Expr) -> Expr:
        batch, i, j = idx[:-2], idx[-2], idx[-1]
        row = (*broadcast_index(a.shape[:-2], batch), i)
        return te.sum(_dot([a[(*row, k.var * DOT + d)] for d in range(DOT)],
                           [w[k.var, j, d] for d in range(DOT)]), k)

    return [te.compute(out[0].shape, element, name=tag, tag="qmatmul")]


register("qmatmul", Pattern.OUT_ELEMWISE_FUSABLE, _qmatmul_infer, _qmatmul_reference,
         _qmatmul_compute, num_inputs=(2, 2))


# -- qconv2d ---------------------------------------------------------------------------
def _plain_weight(w: TensorType) -> TensorType:
    o, c4, kh, kw, _ = w.shape
    return TensorType((o, c4 * DOT, kh, kw), "float32")


def _qconv_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x, w = inputs
    _check_operands("qconv2d", x, w, 5)
    check(attrs.get("groups", 1) == 1, "qconv2d computes dense convolutions only "
          f"(groups {attrs.get('groups')})")
    zero = attrs.get("zero_point", 0)
    check(isinstance(zero, int) and 0 <= zero <= 255,
          f"qconv2d's zero_point must be a byte, got {zero!r}")
    if attrs.get("block"):
        check(len(x.shape) == 5, "a blocked qconv2d takes a blocked [N, C/b, H, W, b] "
              f"input, got {shape_text(x.shape)}")
        check(x.shape[4] % DOT == 0, f"qconv2d's input blocks of {x.shape[4]} channels are "
              f"not whole dots of {DOT}")
    plain = _conv_infer([TensorType(x.shape, "float32"), _plain_weight(w)], attrs)[0]
    return [TensorType(plain.shape, "int32")]


def _qconv_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, w = arrays
    zero = int(attrs.get("zero_point", 0))
    if x.ndim == 5:
        x = unblock_channels(x)
    plain = unpack_conv_weight(w).astype(np.float64)
    conv_attrs = {k: v for k, v in attrs.items() if k not in ("block", "zero_point")}
    # (x - zero) is 0 where the padding is: that sum plus zero * sum(w) is the padded
    # sum; every term is a small integer, exact in float64
    out = _conv_reference([x.astype(np.float64) - zero, plain], conv_attrs)[0]
    out = out + zero * plain.sum(axis=(1, 2, 3)).reshape(1, -1, 1, 1)
    out = np.rint(out).astype(np.int32)
    if attrs.get("block"):
        out = block_channels(out, attrs["block"])
    return [out]


def _qconv_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                   ) -> list[te.Tensor]:
    x, w = inputs
    _, c4, kh, kw, _ = w.shape
    strides, pads, dil = _geometry(attrs, kh, kw)
    xp = pad_stage(x, pads, int(attrs.get("zero_point", 0)), tag)
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")

    def at(y: Expr, z: Expr) -> tuple[Expr, Expr]:
        return y * strides[0] + ry.var * dil[0], z * strides[1] + rx.var * dil[1]

    if attrs.get("block"):
        # as conv2d's blocked form: reduce over (input block, ry, dot of the block, rx)
        block, lanes = attrs["block"], x.shape[4]
        cb, ci = te.reduce_axis(x.shape[1], "rc"), te.reduce_axis(lanes // DOT, "rci")

        def blocked(n: Expr, ob: Expr, y: Expr, z: Expr, oi: Expr) -> Expr:
            c = cb.var * (lanes // DOT) + ci.var
            return te.sum(_dot([xp[(n, cb.var, *at(y, z), ci.var * DOT + d)] for d in range(DOT)],
                               [w[ob * block + oi, c, ry.var, rx.var, d] for d in range(DOT)]),
                          [cb, ry, ci, rx])

        return [te.compute(out[0].shape, blocked, name=tag, tag="qconv2d_blocked")]
    rc = te.reduce_axis(c4, "rc")

    def element(n: Expr, o: Expr, y: Expr, z: Expr) -> Expr:
        return te.sum(_dot([xp[(n, rc.var * DOT + d, *at(y, z))] for d in range(DOT)],
                           [w[o, rc.var, ry.var, rx.var, d] for d in range(DOT)]),
                      [rc, ry, rx])

    return [te.compute(out[0].shape, element, name=tag, tag="qconv2d")]


register("qconv2d", Pattern.OUT_ELEMWISE_FUSABLE, _qconv_infer, _qconv_reference,
         _qconv_compute, num_inputs=(2, 2))
