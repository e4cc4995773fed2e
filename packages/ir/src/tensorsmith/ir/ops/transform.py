"""Injective ops that move data without arithmetic: reshape, transpose, copy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..errors import ShapeError
from ..op_registry import Attrs, Pattern, TensorType, attr_dims, check, check_dim, register
from ..symbolic import Dim, SymbolicDimError, is_static, math_prod, shape_text
from ..te.expr import Expr, const


def unravel(flat: Expr, shape: Sequence[int]) -> tuple[Expr, ...]:
    """Indices of element ``flat`` (row-major) in a tensor of ``shape``."""
    out: list[Expr] = []
    for n in reversed(shape):
        out.append(flat % n if n != 1 else const(0))
        flat = flat // n
    return tuple(reversed(out))


def ravel(idx: Sequence[Expr], shape: Sequence[int]) -> Expr:
    flat: Expr = const(0)
    for i, n in zip(idx, shape):
        flat = flat * n + i
    return flat


def reshape_target(shape: Sequence[Dim], target: Sequence[Dim], copy_zeros: bool = False
                   ) -> tuple[Dim, ...]:
    """``target`` with ONNX Reshape's placeholders resolved for an input of ``shape``: a
    -1 (one at most) takes the elements the other dims leave, and with ``copy_zeros``
    (ONNX's ``allowzero=0``) a 0 repeats the input's dim at its position; without it a 0
    is an empty axis, as the graph's reshape has always read it. Symbolic dims take
    part: [batch, seq, 64] to [0, 0, 4, -1] is [batch, seq, 4, 16]. A -1 that is a
    whole number only for some run-time sizes (``seq*64`` elements into rows of 128) is
    a SymbolicDimError: the compiled shape would be wrong for the others."""
    dims = list(target)
    if copy_zeros:
        for i, d in enumerate(dims):
            if isinstance(d, int) and d == 0:
                check(i < len(shape), f"reshape target {shape_text(target)} copies dim {i} "
                      f"(0) of an input of rank {len(shape)}")
                dims[i] = shape[i]
    holes = [i for i, d in enumerate(dims) if isinstance(d, int) and d == -1]
    check(len(holes) <= 1, f"reshape target {shape_text(target)} has more than one -1")
    if holes:
        known = math_prod(d for i, d in enumerate(dims) if i != holes[0])
        total = math_prod(shape)
        message = (f"cannot reshape {shape_text(shape)} ({total} elements) to "
                   f"{shape_text(target)}: the -1 would be {total} / {known}")
        check(not (isinstance(known, int) and known == 0), message)
        quotient = total // known
        if quotient * known != total:
            if is_static((total, known)):
                raise ShapeError(message)
            raise SymbolicDimError(f"{message}, a whole number only for some sizes known at "
                                   "run time")
        dims[holes[0]] = quotient
    return tuple(dims)


def _reshape_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    """``attrs["shape"]`` may hold symbolic dims and a -1; with ``allowzero`` false, 0s
    copy the input's dims (see :func:`reshape_target`). The element counts must be the
    same expression: ``batch*seq*64`` in, ``batch*seq*4*16`` out."""
    x = inputs[0]
    target = attr_dims(attrs["shape"], "reshape's target shape")
    shape = reshape_target(x.shape, target, copy_zeros=not attrs.get("allowzero", True))
    check_dim(math_prod(shape), "==", math_prod(x.shape),
              f"cannot reshape {shape_text(x.shape)} ({math_prod(x.shape)} elements) to "
              f"{shape_text(target)} ({math_prod(shape)} elements)")
    return [TensorType(shape, x.dtype)]


def _reshape_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = arrays[0]
    target = attr_dims(attrs["shape"], "reshape's target shape")
    return [x.reshape(reshape_target(x.shape, target, not attrs.get("allowzero", True)))]


def _reshape_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                     ) -> list[te.Tensor]:
    """Leading and trailing axes the two shapes share are read as they are; only the
    axes between are flattened and split again. Splitting a channel axis into blocks
    then reads ``x[n, cb * b + ci, h, w]``, not a division of the flat index per axis."""
    x = inputs[0]
    shape = out[0].shape
    head = 0
    while head < min(len(shape), x.ndim) and shape[head] == x.shape[head]:
        head += 1
    tail = 0
    while (tail < min(len(shape), x.ndim) - head
           and shape[len(shape) - 1 - tail] == x.shape[x.ndim - 1 - tail]):
        tail += 1

    def element(*i: Expr) -> Expr:
        flat = ravel(i[head:len(i) - tail], shape[head:len(shape) - tail])
        into = x.shape[head:x.ndim - tail]
        middle = (flat,) if len(into) == 1 else unravel(flat, into)
        return x[(*i[:head], *middle, *i[len(i) - tail:])]

    return [te.compute(shape, element, name=tag, tag="reshape")]


register("reshape", Pattern.INJECTIVE, _reshape_infer, _reshape_reference, _reshape_compute)


def _transpose_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    perm = attrs["perm"]
    check(sorted(perm) == list(range(len(x.shape))),
          f"perm {list(perm)} is not a permutation of the {len(x.shape)} axes")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


def _transpose_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                       ) -> list[te.Tensor]:
    x = inputs[0]
    perm = attrs["perm"]
    inverse = [perm.index(d) for d in range(len(perm))]
    return [te.compute(out[0].shape, lambda *i: x[tuple(i[inverse[d]] for d in range(x.ndim))],
                       name=tag, tag="transpose")]


register("transpose", Pattern.INJECTIVE, _transpose_infer,
         lambda arrays, attrs: [np.transpose(arrays[0], attrs["perm"])], _transpose_compute)


def _copy_compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
                  ) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(x.shape, lambda *i: x[i], name=tag, tag="copy")]


register("copy", Pattern.INJECTIVE, lambda inputs, attrs: [inputs[0]],
         lambda arrays, attrs: [arrays[0].copy()], _copy_compute)
