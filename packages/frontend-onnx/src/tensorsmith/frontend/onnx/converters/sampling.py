"""Spatial sampling: GridSample (run-time coordinates, the ``grid_sample`` op) and
AffineGrid (the coordinates an affine transform gives a regular grid: a matrix product
with a constant grid of normalized positions)."""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..registry import converter
from .common import ints, reshape, transpose

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
    size = ints(ctx.constant(1, "size"))
    spatial = size[2:]
    nd = len(spatial)
    if nd not in (2, 3) or theta.shape[1:] != (nd, nd + 1):
        raise ctx.error(f"theta {shape_text(theta.shape)} and size {size} do not describe a 2-D or "
                        "3-D affine grid")
    align = bool(ctx.attr("align_corners", 0))
    axes = [_positions(n, align) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # [z,] y, x order
    # homogeneous coordinates, innermost first: (x, y[, z], 1)
    homo = np.stack([*reversed(mesh), np.ones(tuple(spatial))], axis=-1)
    count = int(np.prod(spatial))
    base = homo.reshape(count, nd + 1).T.astype(theta.dtype)  # [nd + 1, count]
    grid = ctx.add("matmul", [theta, ctx.const(base, hint="base_grid")])  # [N, nd, count]
    grid = transpose(ctx, grid, (0, 2, 1))
    return reshape(ctx, grid, (theta.shape[0], *spatial, nd))
