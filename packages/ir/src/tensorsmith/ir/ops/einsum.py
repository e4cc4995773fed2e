"""``einsum``: ONNX Einsum as one reduction -- the product of the operands at the indices
their subscripts name, summed over the letters the output drops.

One compute covers every form (transposes, traces and diagonals, batched products,
broadcasting through ``...``); it is not a tuned matrix product, which is what the
importer should emit where a plain MatMul is meant. ``parse`` normalizes an equation to
explicit subscripts without ellipses, which ``infer``, ``reference`` and ``compute`` share.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np

from .. import te
from ..dtypes import accumulator
from ..op_registry import Attrs, Pattern, TensorType, check, register
from ..te.expr import Expr, const


def parse(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Input subscripts and output subscript, ``...`` expanded into fresh letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    check(len(terms) == len(ranks), f"einsum {equation!r} has {len(terms)} operands, got "
          f"{len(ranks)}")
    used = set(eq) - set(".,->")
    spare = [c for c in string.ascii_letters if c not in used]
    ell_rank = max((r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(spare[:ell_rank])
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            check(k >= 0, f"einsum term {t!r} does not fit rank {r}")
            t = t.replace("...", ell[ell_rank - k:])
        check(len(t) == r and (t.isalpha() or not t), f"einsum term {t!r} does not fit "
              f"rank {r}")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: "".join(out_terms).count(c) for c in "".join(out_terms)}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    check(out.isalpha() or out == "", f"einsum output {rhs!r} is not valid")
    return out_terms, out


def _sizes(terms: list[str], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for t, shape in zip(terms, shapes):
        for c, n in zip(t, shape):
            if n != 1 or c not in sizes:
                check(sizes.get(c, 1) in (1, n), f"einsum letter {c!r} has sizes "
                      f"{sizes.get(c)} and {n}")
                sizes[c] = n if n != 1 else sizes.get(c, 1)
    return sizes


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    check(len({t.dtype for t in inputs}) == 1, "einsum operands must share one dtype")
    terms, out = parse(attrs["equation"], [len(t.shape) for t in inputs])
    sizes = _sizes(terms, [t.shape for t in inputs])
    check(all(c in sizes for c in out), f"einsum output {out!r} names a letter no input has")
    return [TensorType(tuple(sizes[c] for c in out), inputs[0].dtype)]


def _reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    terms, out = parse(attrs["equation"], [a.ndim for a in arrays])
    r = np.einsum(",".join(terms) + "->" + out, *arrays)
    return [np.asarray(r).astype(arrays[0].dtype)]


def _compute(inputs: list[te.Tensor], attrs: Attrs, out: list[TensorType], tag: str
             ) -> list[te.Tensor]:
    terms, result = parse(attrs["equation"], [t.ndim for t in inputs])
    sizes = _sizes(terms, [t.shape for t in inputs])
    reduced = [c for c in dict.fromkeys("".join(terms)) if c not in result]
    axes = {c: te.reduce_axis(sizes[c], f"r_{c}") for c in reduced}
    dtype = inputs[0].dtype
    acc = accumulator(dtype)

    def element(*idx: Expr) -> Expr:
        var = {c: i for c, i in zip(result, idx)}
        var.update({c: a.var for c, a in axes.items()})
        product: Expr | None = None
        for t, x in zip(terms, inputs):
            value = te.cast(acc, x[tuple(const(0) if n == 1 else var[c]
                                          for c, n in zip(t, x.shape))])
            product = value if product is None else product * value
        assert product is not None
        return te.sum(product, list(axes.values())) if axes else product

    r = te.compute(out[0].shape, element, name=tag + ("_acc" if acc != dtype else ""),
                   tag="einsum")
    if acc != dtype:
        r = te.compute(r.shape, lambda *i: te.cast(dtype, r[i]), name=tag)
    return [r]


register("einsum", Pattern.OPAQUE, _infer, _reference, _compute, num_inputs=(1, 64))
