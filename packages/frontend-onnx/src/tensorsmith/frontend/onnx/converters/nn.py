"""Dense layers and their companions: MatMul, Gemm, Softmax, Dropout, global pooling."""

from __future__ import annotations

from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.graph import Value
from tensorsmith.ir.ops.broadcast import broadcast_shapes
from tensorsmith.ir.symbolic import Dim, SymbolicDimError, math_prod, shape_text

from ..context import NodeContext
from ..registry import converter
from .common import filled, normalize_axis, reshape, transpose


@converter("MatMul", since=1)
def convert_matmul(ctx: NodeContext) -> Value:
    """NumPy matmul; 1-D operands are promoted to 2-D and the added axis removed after,
    since the canonical op takes rank >= 2 on both sides."""
    a, b = ctx.input(0), ctx.input(1)
    if not a.shape or not b.shape:
        raise ctx.error(f"MatMul does not take scalars (shapes {shape_text(a.shape)}, "
                        f"{shape_text(b.shape)})")
    a2 = reshape(ctx, a, (1, a.shape[0])) if len(a.shape) == 1 else a
    b2 = reshape(ctx, b, (b.shape[0], 1)) if len(b.shape) == 1 else b
    y = ctx.add("matmul", [a2, b2])
    shape = list(y.shape)
    if len(b.shape) == 1:
        del shape[-1]
    if len(a.shape) == 1:
        del shape[-1 if len(b.shape) == 1 else -2]
    return reshape(ctx, y, shape)


@converter("Gemm", since=7)
def convert_gemm(ctx: NodeContext) -> Value:
    """alpha * A' B' + beta * C: transposes (folded away on constant weights), matmul,
    then the scalings only where they are not 1."""
    a, b, c = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    for name, v in (("A", a), ("B", b)):
        if len(v.shape) != 2:
            raise ctx.error(f"{name} must be 2-D, got shape {shape_text(v.shape)}")
    if ctx.attr("transA", 0):
        a = transpose(ctx, a, (1, 0))
    if ctx.attr("transB", 0):
        b = transpose(ctx, b, (1, 0))
    y = ctx.add("matmul", [a, b])
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if alpha != 1.0:
        y = ctx.add("mul", [y, ctx.scalar(alpha, y)])
    if c is not None and beta != 0.0:
        if not _broadcasts_to(c.shape, y.shape):
            raise ctx.error(f"C of shape {shape_text(c.shape)} does not broadcast to the result "
                            f"{shape_text(y.shape)}")
        if beta != 1.0:
            c = ctx.add("mul", [c, ctx.scalar(beta, c)])
        y = ctx.add("add", [y, c])
    return y


def _broadcasts_to(shape: tuple[Dim, ...], target: tuple[Dim, ...]) -> bool:
    """Unidirectional broadcasting: ``shape`` stretches to ``target``, not the reverse
    (symbolic sizes only where that holds for every size, else a SymbolicDimError)."""
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except SymbolicDimError:
        raise
    except ShapeError:
        return False


def _softmax(ctx: NodeContext, log: bool, default_axis: int, flatten: bool) -> Value:
    x = ctx.input(0)
    rank = len(x.shape)
    if rank == 0:
        raise ctx.error("does not take a scalar")
    axis = normalize_axis(ctx, int(ctx.attr("axis", default_axis)), rank)
    attrs = {"axis": axis, "log": log}
    if not flatten or axis == rank - 1:
        return ctx.add("softmax", [x], attrs)
    # before opset 13 the input is viewed as 2-D [prod(shape[:axis]), prod(shape[axis:])]
    flat = reshape(ctx, x, (math_prod(x.shape[:axis]), math_prod(x.shape[axis:])))
    y = ctx.add("softmax", [flat], {"axis": 1, "log": log})
    return reshape(ctx, y, x.shape)


@converter("Softmax", since=1)
def convert_softmax_v1(ctx: NodeContext) -> Value:
    return _softmax(ctx, log=False, default_axis=1, flatten=True)


@converter("Softmax", since=13)
def convert_softmax_v13(ctx: NodeContext) -> Value:
    return _softmax(ctx, log=False, default_axis=-1, flatten=False)


@converter("LogSoftmax", since=1)
def convert_log_softmax_v1(ctx: NodeContext) -> Value:
    return _softmax(ctx, log=True, default_axis=1, flatten=True)


@converter("LogSoftmax", since=13)
def convert_log_softmax_v13(ctx: NodeContext) -> Value:
    return _softmax(ctx, log=True, default_axis=-1, flatten=False)


def _mask(ctx: NodeContext, x: Value) -> Value | None:
    if not ctx.output_wanted(1):
        return None
    dtype = "bool" if ctx.opset >= 10 else x.dtype
    return filled(ctx, x.shape, 1, dtype, hint="mask")


@converter("Dropout", since=7)
def convert_dropout_v7(ctx: NodeContext) -> list[Value | None]:
    """Inference: the identity (and an all-true mask when one is asked for)."""
    x = ctx.input(0)
    return [x, _mask(ctx, x)]


@converter("Dropout", since=12)
def convert_dropout_v12(ctx: NodeContext) -> list[Value | None]:
    x = ctx.input(0)
    training = ctx.optional_input(2)
    if training is not None:
        mode = ctx.constant(2, "training_mode")
        ratio = ctx.optional_constant(1, "ratio")
        if bool(mode.reshape(-1)[0]) and (ratio is None or float(ratio.reshape(-1)[0]) > 0):
            raise ctx.error("training_mode=True makes Dropout random; export the model "
                            "in eval mode")
    return [x, _mask(ctx, x)]


def _global_pool(ctx: NodeContext, op: str) -> Value:
    x = ctx.input(0)
    if len(x.shape) < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got "
                        f"{shape_text(x.shape)}")
    return ctx.add(op, [x], {"axes": list(range(2, len(x.shape))), "keepdims": True})


@converter("GlobalAveragePool", since=1)
def convert_global_average_pool(ctx: NodeContext) -> Value:
    return _global_pool(ctx, "reduce_mean")


@converter("GlobalMaxPool", since=1)
def convert_global_max_pool(ctx: NodeContext) -> Value:
    return _global_pool(ctx, "reduce_max")
