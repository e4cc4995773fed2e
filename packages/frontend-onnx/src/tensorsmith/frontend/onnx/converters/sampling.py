"""Spatial sampling: GridSample (run-time coordinates, the ``grid_sample`` op) and
AffineGrid (the coordinates an affine transform gives a regular grid: a matrix product
with a constant grid of normalized positions, or, where the grid's size is given only
when the model runs, the same sums broadcast over positions computed at run time)."""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import is_run_time
from tensorsmith.ir.symbolic import Dim, shape_text

from ..context import NodeContext
from ..registry import converter
from .common import ints, positions, reshape, slice_axis, transpose

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
          "nearest": "nearest"}


@converter("GridSample", since=16)
def convert_grid_sample(ctx: NodeContext) -> Value:
    x, grid = ctx.input(0), ctx.input(1)
    mode = str(ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear"))
    if mode not in _MODES:
        raise ctx.error(f"unknown mode {mode!r}")
    if grid.dtype != x.dtype:
        grid = ctx.add("cast", [grid], {"dtype": x.dtype})
    return ctx.add("grid_sample", [x, grid], {
        "mode": _MODES[mode], "padding_mode": str(ctx.attr("padding_mode", "zeros")),
        "align_corners": int(ctx.attr("align_corners", 0))})


def _positions(size: int, align_corners: bool) -> np.ndarray:
    """Normalized centres of ``size`` pixels along one axis (ONNX's reference)."""
    if align_corners:
        return np.arange(-1, 1 + 0.0001, 2.0 / (size - 1)) if size > 1 else np.array([-1.0])
    step = 2.0 / size
    return np.arange(-1 + step / 2, 1, step)


@converter("AffineGrid", since=20)
def convert_affine_grid(ctx: NodeContext) -> Value:
    theta = ctx.input(0)
    align = bool(ctx.attr("align_corners", 0))
    given = ctx.run_time_values(1, "size").reshape(-1) if ctx.input(1).data is None else None
    if given is not None and any(is_run_time(e) for e in given):
        return _affine_grid_run_time(ctx, theta, list(given), align)
    size = ints(ctx.constant(1, "size"))
    spatial = size[2:]
    nd = len(spatial)
    if nd not in (2, 3) or theta.shape[1:] != (nd, nd + 1):
        raise ctx.error(f"theta {shape_text(theta.shape)} and size {size} do not describe a 2-D or "
                        "3-D affine grid")
    axes = [_positions(n, align) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # [z,] y, x order
    # homogeneous coordinates, innermost first: (x, y[, z], 1)
    homo = np.stack([*reversed(mesh), np.ones(tuple(spatial))], axis=-1)
    count = int(np.prod(spatial))
    base = homo.reshape(count, nd + 1).T.astype(theta.dtype)  # [nd + 1, count]
    grid = ctx.add("matmul", [theta, ctx.const(base, hint="base_grid")])  # [N, nd, count]
    grid = transpose(ctx, grid, (0, 2, 1))
    return reshape(ctx, grid, (theta.shape[0], *spatial, nd))


_SPATIAL = ("depth", "height", "width")


def _affine_grid_run_time(ctx: NodeContext, theta: Value, size: list[object], align: bool
                          ) -> Value:
    """AffineGrid for a ``size`` (N, C[, D], H, W) the run gives. Its entries become sizes
    the host computes before each run; theta is viewed with the run's N, so the run
    checks that it has that many matrices. Output coordinate i is theta[:, i, 0] * x +
    theta[:, i, 1] * y [+ theta[:, i, 2] * z] + theta[:, i, nd], the positions x, y, z
    computed along the output's spatial axes (broadcast), summed in the order of the
    static path's matrix product."""
    nd = len(size) - 2
    if nd not in (2, 3) or len(theta.shape) != 3 or theta.shape[1:] != (nd, nd + 1):
        raise ctx.error(f"theta {shape_text(theta.shape)} and a size of {len(size)} entries do "
                        "not describe a 2-D or 3-D affine grid")
    batch = ctx.size(size[0], "batch")
    spatial = [ctx.size(e, name) for e, name in zip(size[2:], _SPATIAL[3 - nd:])]
    theta = reshape(ctx, theta, [batch, nd, nd + 1])
    rank = nd + 2  # [N, [D,] H, W, nd]

    def column(j: int) -> Value:  # theta[:, :, j] as [N, 1, ..., 1, nd]
        part = slice_axis(ctx, theta, 2, j, j + 1)
        return reshape(ctx, part, [batch, *[1] * nd, nd])

    grid = column(nd)
    terms = []
    for j in range(nd):  # x (the last spatial axis) first, as the homogeneous coordinates
        axis = nd - 1 - j
        coords = _normalized(ctx, spatial[axis], 2 + axis, theta.dtype, align)
        shape: list[Dim] = [1] * rank
        shape[1 + axis] = spatial[axis]
        terms.append(ctx.add("mul", [column(j), reshape(ctx, coords, shape)]))
    total = terms[0]
    for t in terms[1:]:
        total = ctx.add("add", [total, t])
    return ctx.add("add", [total, grid])


def _normalized(ctx: NodeContext, count: Dim, entry: int, dtype: str, align: bool) -> Value:
    """The normalized centres (corners with ``align``) of ``count`` pixels along one axis,
    [count], as ONNX's reference places them: -1 + j * step, plus step / 2 without
    ``align``. The step comes from the size's value read from the ``size`` input itself
    (entry ``entry``), since a size computed at run time is no constant."""
    j = positions(ctx, count, dtype=dtype)
    n = ctx.add("cast", [ctx.add("gather", [ctx.input(1), ctx.const(np.int64(entry))],
                                 {"axis": 0})], {"dtype": dtype})
    one, two = ctx.const(np.asarray(1, dtype)), ctx.const(np.asarray(2, dtype))
    if align:  # 2 / (n - 1), and -1 alone where n is 1 (j is then 0)
        step = ctx.add("div", [two, ctx.add("max", [ctx.add("sub", [n, one]), one])])
        start = ctx.const(np.asarray(-1, dtype))
    else:
        step = ctx.add("div", [two, n])
        start = ctx.add("sub", [ctx.add("div", [step, two]), one])
    return ctx.add("add", [start, ctx.add("mul", [j, step])])
