"""Linear algebra: Einsum (the ``einsum`` op; a two-operand contraction that is a plain
matrix product is still worth emitting as MatMul by exporters) and Det (closed forms for
2x2 and 3x3 matrices, the sizes models use it for: there is no factorization op)."""

from __future__ import annotations

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..registry import converter
from .common import reshape


@converter("Einsum", since=12)
def convert_einsum(ctx: NodeContext) -> Value:
    values = [v for v in ctx.inputs if v is not None]
    return ctx.add("einsum", values, {"equation": str(ctx.required_attr("equation"))})


@converter("Det", since=11)
def convert_det(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] not in (1, 2, 3):
        raise ctx.error(f"determinants of 1x1, 2x2 and 3x3 matrices are supported, got "
                        f"{shape_text(x.shape)}")
    n = x.shape[-1]
    batch = x.shape[:-2]

    def at(i: int, j: int) -> Value:
        rank = len(x.shape)
        v = ctx.add("slice", [x], {"begin": [0] * (rank - 2) + [i, j],
                                   "end": [*batch, i + 1, j + 1], "step": [1] * rank})
        return reshape(ctx, v, batch)

    def mul(*vs: Value) -> Value:
        out = vs[0]
        for v in vs[1:]:
            out = ctx.add("mul", [out, v])
        return out

    if n == 1:
        return at(0, 0)
    if n == 2:
        return ctx.add("sub", [mul(at(0, 0), at(1, 1)), mul(at(0, 1), at(1, 0))])
    plus = [mul(at(0, 0), at(1, 1), at(2, 2)), mul(at(0, 1), at(1, 2), at(2, 0)),
            mul(at(0, 2), at(1, 0), at(2, 1))]
    minus = [mul(at(0, 2), at(1, 1), at(2, 0)), mul(at(0, 0), at(1, 2), at(2, 1)),
             mul(at(0, 1), at(1, 0), at(2, 2))]
    total = ctx.add("add", [ctx.add("add", [plus[0], plus[1]]), plus[2]])
    for m in minus:
        total = ctx.add("sub", [total, m])
    return total
