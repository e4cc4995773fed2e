"""Neural-network ops: matmul and softmax."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..dtypes import accumulator
from ..op_registry import Attrs, Pattern, TensorType, check, check_dim, register
from ..symbolic import shape_text
from ..te.expr import Expr, const
from .broadcast import broadcast_index, broadcast_shapes


def _matmul_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    a, b = inputs
    check(a.dtype == b.dtype, f"inputs have different dtypes {a.dtype} and {b.dtype}")
    check(len(a.shape) >= 2 and len(b.shape) >= 2,
          f"matmul takes inputs of rank >= 2 (the importer expands 1-D ones), got "
          f"{shape_text(a.shape)} and {shape_text(b.shape)}")
    check_dim(a.shape[-1], "==", b.shape[-2],
              f"matmul inner dimensions differ: {shape_text(a.shape)} x {shape_text(b.shape)} "
              f"(A's last dim {a.shape[-1]} != B's second-to-last {b.shape[-2]})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return [TensorType((*batch, a.shape[-2], b.shape[-1]), a.dtype)]


def _matmul_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                    ) -> list[te.Tensor]:
    a, b = inputs
    k = te.reduce_axis(a.shape[-1], "k")
    acc = accumulator(a.dtype)
    out_dtype = a.dtype
    if acc != a.dtype and attrs.get("widen_input"):
        # 16-bit A widened by a stage of its own, once per element, on CPUs
        # (passes/precision.py: widen_inputs_first): converted in the register tile, at
        # every broadcast, it cost a quarter of a BERT layer's products
        a = widened(a, acc, tag)

    def element(*idx: Expr) -> Expr:
        batch, i, j = idx[:-2], idx[-2], idx[-1]
        ai = (*broadcast_index(a.shape[:-2], batch), i, k.var)
        bi = (*broadcast_index(b.shape[:-2], batch), k.var, j)
        return te.sum(te.cast(acc, a[ai]) * te.cast(acc, b[bi]), k)

    c = te.compute(out[0].shape, element, name=tag, tag="matmul")
    if acc != out_dtype:
        c = te.compute(c.shape, lambda *i: te.cast(out_dtype, c[i]), name=tag + "_cast")
    return [c]


def widened(x: te.Tensor, dtype: str, tag: str) -> te.Tensor:
    """``x`` converted to ``dtype`` by a stage that schedules materialize (tag
    ``widen``: scheduled like a padding stage, a vector loop per row)."""
    return te.compute(x.shape, lambda *i: te.cast(dtype, x[i]), name=tag + "_widen",
                      tag="widen")


def _matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """In the accumulator's dtype, as the kernels sum (NumPy multiplies bfloat16 into
    float32, float16 in float16)."""
    acc = accumulator(str(a.dtype))
    return np.matmul(a.astype(acc), b.astype(acc)).astype(a.dtype)


register("matmul", Pattern.OUT_ELEMWISE_FUSABLE, _matmul_infer,
         lambda arrays, attrs: [_matmul_reference(*arrays)], _matmul_compute,
         num_inputs=(2, 2))


def _softmax_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    axis = attrs["axis"]
    check(-len(x.shape) <= axis < len(x.shape), f"axis {axis} out of range for rank "
          f"{len(x.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _softmax_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    axis = attrs["axis"]
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    out = e / e.sum(axis=axis, keepdims=True)
    if attrs.get("log"):
        out = (x - x.max(axis=axis, keepdims=True)) - np.log(e.sum(axis=axis, keepdims=True))
    return [out.astype(x.dtype)]


def _softmax_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                     ) -> list[te.Tensor]:
    """max, exp, sum, normalise. The exponentials are a stage of their own, which a
    schedule may inline (recomputed for the sum and the division: what GPUs do) or keep
    (the CPU rules compute it a row at a time, in cache: one exp per element)."""
    x = inputs[0]
    axis = attrs["axis"] % x.ndim
    reduced_shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape))

    def with_k(idx: Sequence[Expr], k: Expr) -> tuple[Expr, ...]:
        return tuple(k if d == axis else i for d, i in enumerate(idx))

    k1 = te.reduce_axis(x.shape[axis], "k")
    mx = te.compute(reduced_shape, lambda *i: te.max(x[with_k(i, k1.var)], k1), name=tag + "_max")
    k2 = te.reduce_axis(x.shape[axis], "k")
    zero = const(0)
    if attrs.get("log"):
        sm = te.compute(reduced_shape, lambda *i: te.sum(te.exp(
            x[with_k(i, k2.var)] - mx[with_k(i, zero)]), k2), name=tag + "_sum")
        return [te.compute(x.shape, lambda *i: x[i] - mx[with_k(i, zero)] - te.log(
            sm[with_k(i, zero)]), name=tag, tag="log_softmax")]
    e = te.compute(x.shape, lambda *i: te.exp(x[i] - mx[with_k(i, zero)]), name=tag + "_exp")
    sm = te.compute(reduced_shape, lambda *i: te.sum(e[with_k(i, k2.var)], k2),
                    name=tag + "_sum")
    return [te.compute(x.shape, lambda *i: e[i] / sm[with_k(i, zero)], name=tag,
                       tag="softmax")]


register("softmax", Pattern.OPAQUE, _softmax_infer, _softmax_reference, _softmax_compute)
