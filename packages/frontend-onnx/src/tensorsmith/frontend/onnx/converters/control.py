"""Control flow the static graph can take: an If whose condition is known at import.

The graph IR has no control flow; an If on a constant condition (a flag folded from
attributes, as in function bodies, or a frozen input) is its chosen branch, converted in
place. A condition only known at run time is an error that says so.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value

from ..context import NodeContext
from ..registry import converter


@converter("If", since=1)
def convert_if(ctx: NodeContext) -> list[Value]:
    cond = np.asarray(ctx.constant(0, "cond"))
    if cond.size != 1:
        raise ctx.error(f"the condition must have one element, has {cond.size}")
    branch = ctx.required_attr("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    assert ctx.state.inline is not None
    outputs = ctx.state.inline(branch, ctx.where)
    if len(outputs) != ctx.num_outputs:
        raise ctx.error(f"the branch has {len(outputs)} outputs, the node {ctx.num_outputs}")
    return outputs
