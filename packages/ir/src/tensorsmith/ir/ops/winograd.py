"""3x3 convolution by Winograd minimal filtering (tensorsmith.runtime.winograd).

The auto-tuner's alternative to the direct convolution for 3x3, stride-1, ungrouped
convolutions with constant weights: fewer multiplications (2.25x for F(2, 3)) in
exchange for two cheap transforms. The build stores the weights transformed
(``U[e, n, c, o]``, a ``layout`` step with a ``transform``), and the kernel computes

- ``*_pad``: the input padded to whole tiles (each ``m x m`` output tile reads an
  ``alpha x alpha`` patch);
- ``*_wino_in`` (tag ``winograd_input``): ``V[e, n, c, p] = (BT d_p B)[e, n]`` for each
  channel and tile ``p``;
- ``*_wino_mm`` (tag ``winograd_gemm``): ``alpha^2`` matrix products over channels,
  ``M[e, n, p, o] = sum_c V[e, n, c, p] U[e, n, c, o]``, output channels contiguous (a
  matrix product's vector loop runs over them: whole registers at any image size);
- the output (tag ``winograd_output``): ``Y = AT M_p A`` per tile, a reduction over
  ``(e, n)`` the elementwise epilogue (bias, activation) fuses into, like a direct
  convolution's, by default with its vector loop over output channels too.

On channel-blocked activations (``[N, C / b, H, W, b]``, passes/blocked_layout.py) the
input transform writes ``V[e, n, p, c]`` instead, channels last: its vector loop then
runs over a block's lanes, which are contiguous in the input too, and the product reads
each tile's channels as one contiguous row. A ``block`` attribute writes the output
blocked, as a direct blocked convolution does, and applies the output transform
separably: ``*_wino_cols`` (tag ``winograd_columns``) multiplies each product tile by
``A`` on the right, the output stage by ``AT`` on the left.

The transforms index their constant matrices with loop variables (``table``); unrolled
loops make those indices constants, and the code generator then emits only the
nonzero terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorsmith.runtime.winograd import TRANSFORMS

from .. import te
from ..dtypes import accumulator
from ..op_registry import Attrs
from ..te.expr import Expr, const, select
from .conv import WidenedReads, pad_stage


def eligible(attrs: Attrs, weight_shape: Sequence[int], transform: str) -> bool:
    """Whether ``transform`` computes a convolution with these attributes and weights."""
    w = TRANSFORMS[transform]
    return (len(weight_shape) == 4 and tuple(weight_shape[2:]) == (w.r, w.r)
            and list(attrs.get("strides", [1, 1])) == [1, 1]
            and list(attrs.get("dilations", [1, 1])) == [1, 1]
            and attrs.get("groups", 1) == 1)


def table(index: Expr, values: Sequence[Expr | float]) -> Expr:
    """``values[index]`` as a chain of selects (``index`` in ``range(len(values))``)."""
    exprs = [v if isinstance(v, Expr) else const(float(v)) for v in values]
    out = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        out = select(index.eq(k), exprs[k], out)
    return out


def _weighted_sum(terms: list[tuple[float, Expr]], dtype: str) -> Expr:
    """``sum(c * x)`` without the multiplications by +-1 (and zero terms dropped)."""
    total: Expr | None = None
    for c, x in terms:
        if c == 0:
            continue
        if c == 1:
            total = x if total is None else total + x
        elif c == -1:
            total = (const(0.0, dtype) - x) if total is None else total - x
        else:
            scaled = x * const(float(c), dtype)
            total = scaled if total is None else total + scaled
    return total if total is not None else const(0.0, dtype)


def winograd_conv2d(x: te.Tensor, u: te.Tensor, attrs: Attrs,
                    out_shape: tuple[int, ...], transform: str, tag: str) -> te.Tensor:
    """The convolution of ``x`` ([N, C, H, W] or blocked) with transformed weights ``u``
    ([alpha, alpha, C, O]); ``out_shape`` is the direct convolution's output shape
    (blocked where ``attrs`` has a ``block``)."""
    w = TRANSFORMS[transform]
    m, a = w.m, w.alpha
    blocked_in = x.ndim == 5
    n_batch, c, h, wd = x.shape[:4]
    lanes = x.shape[4] if blocked_in else 1
    c *= lanes
    oh, ow = out_shape[2], out_shape[3]
    block = attrs.get("block", 0)
    th, tw = -(-oh // m), -(-ow // m)
    tiles = n_batch * th * tw
    top, left, bottom, right = list(attrs.get("pads", [0, 0, 0, 0]))
    # Whole tiles: the last one may read past the convolution's own padding.
    bottom = max(bottom, (th - 1) * m + a - h - top)
    right = max(right, (tw - 1) * m + a - wd - left)
    # 16-bit inputs: the transforms and products in float32 (their sums of products
    # are where the rounding would grow), the padded input widened once
    dtype = accumulator(x.dtype)
    xp = pad_stage(x, [top, left, bottom, right], 0.0, tag, dtype)
    if u.dtype != dtype:
        u = WidenedReads(u, dtype)  # type: ignore[assignment]

    def patch(p: Expr, r1: int, r2: int, ci: Expr) -> Expr:
        b, ty, tx = p // (th * tw), (p // tw) % th, p % tw
        if blocked_in:
            return xp[b, ci // lanes, ty * m + r1, tx * m + r2, ci % lanes]
        return xp[b, ci, ty * m + r1, tx * m + r2]

    def v_element(e: Expr, nn: Expr, ci: Expr, p: Expr) -> Expr:
        rows = []
        for i in range(a):
            cols = []
            for j in range(a):
                terms = [(w.bt[i][r1] * w.bt[j][r2], patch(p, r1, r2, ci))
                         for r1 in range(a) for r2 in range(a)
                         if w.bt[i][r1] * w.bt[j][r2] != 0]
                cols.append(_weighted_sum(terms, dtype))
            rows.append(table(nn, cols))
        return table(e, rows)

    rc = te.reduce_axis(c, "rc")
    if blocked_in:
        v = te.compute((a, a, tiles, c), lambda e, nn, p, ci: v_element(e, nn, ci, p),
                       name=tag + "_wino_in", tag="winograd_input_blocked")

        def product(e: Expr, nn: Expr, p: Expr, oc: Expr) -> Expr:
            return te.sum(v[e, nn, p, rc.var] * u[e, nn, rc.var, oc], [rc])
    else:
        v = te.compute((a, a, c, tiles), v_element, name=tag + "_wino_in",
                       tag="winograd_input")

        def product(e: Expr, nn: Expr, p: Expr, oc: Expr) -> Expr:
            return te.sum(v[e, nn, rc.var, p] * u[e, nn, rc.var, oc], [rc])
    mm = te.compute((a, a, tiles, u.shape[3]), product, name=tag + "_wino_mm",
                    tag="winograd_gemm")
    re, rn = te.reduce_axis(a, "re"), te.reduce_axis(a, "rn")

    def coefficient(k: Expr, index: Expr) -> Expr:
        return table(k, [table(index, list(row)) for row in w.at])

    def tile_of(b: Expr, y: Expr, z: Expr) -> Expr:
        return b * (th * tw) + (y // m) * tw + z // m

    if block:
        # Separably, columns first: T[e, p, j, o] = sum_n M[e, n, p, o] AT[j][n], then
        # Y = sum_e AT[i][e] T[e, p, j, o]: alpha * m + m * m terms per tile and channel
        # (F(4x4): 48) instead of m^2 * alpha^2 (576), which is also what the unrolled
        # tiles cost to compile.
        cols = te.compute(
            (a, tiles, m, u.shape[3]),
            lambda e, p, j, oc: te.sum(mm[e, rn.var, p, oc] * coefficient(j, rn.var), [rn]),
            name=tag + "_wino_cols", tag="winograd_columns")

        def y_blocked(b: Expr, ob: Expr, y: Expr, z: Expr, lane: Expr) -> Expr:
            return te.sum(cols[re.var, tile_of(b, y, z), z % m, ob * block + lane]
                          * coefficient(y % m, re.var), [re])

        return _narrowed(te.compute(out_shape, y_blocked, name=tag, tag="winograd_output"),
                         x.dtype)

    def y_element(b: Expr, oc: Expr, y: Expr, z: Expr) -> Expr:
        return te.sum(mm[re.var, rn.var, tile_of(b, y, z), oc] * coefficient(y % m, re.var)
                      * coefficient(z % m, rn.var), [re, rn])

    return _narrowed(te.compute(out_shape, y_element, name=tag, tag="winograd_output"),
                     x.dtype)


def _narrowed(y: te.Tensor, dtype: str) -> te.Tensor:
    """``y`` rounded to ``dtype`` by a stage of its own (as the direct convolution)."""
    if y.dtype == dtype:
        return y
    return te.compute(y.shape, lambda *i: te.cast(dtype, y[i]), name=y.name + "_cast")
