"""Reductions. ONNX moved ``axes`` from an attribute to an input (ReduceSum at opset 13,
the others at 18) and added ``noop_with_empty_axes``; both forms end up as the canonical
``reduce_*(axes | None, keepdims)``. The L1/L2/log-sum family and LpNormalization are
compositions; ArgMax/ArgMin map to the canonical ``argmax``/``argmin``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import lift, where
from tensorsmith.ir.symbolic import Dim

from ..context import NodeContext
from ..registry import converter
from .common import ints, normalize_axes, reshape

Reducer = Callable[[NodeContext, Value, "list[int] | None", bool], Value]


def _axes(ctx: NodeContext, rank: int, axes_as_input: bool) -> list[int] | str | None:
    """Normalised axes; None for all of them; "noop" when the node is the identity."""
    if axes_as_input:
        v = ctx.optional_input(1)
        if v is not None and v.data is None and len(v.shape) == 1 and v.shape[0] == 0:
            given = []  # an empty axes input is empty whatever the run gives
        else:
            given = ctx.optional_constant(1, "axes")
        axes = None if given is None else ints(given)
        if not axes and int(ctx.attr("noop_with_empty_axes", 0)):
            return "noop"
    else:
        axes = ctx.attr("axes")
    if not axes:
        return None
    return sorted(normalize_axes(ctx, axes, rank))


def _plain(op: str) -> Reducer:
    def reduce(ctx: NodeContext, x: Value, axes: list[int] | None, keep: bool) -> Value:
        return ctx.add(op, [x], {"axes": axes, "keepdims": keep})

    return reduce


def _of(inner: Callable[[NodeContext, Value], Value], op: str,
        outer: str | None = None) -> Reducer:
    """``outer(op(inner(x)))``: L1 is sum(abs), L2 sqrt(sum(x*x)), LogSum log(sum)..."""

    def reduce(ctx: NodeContext, x: Value, axes: list[int] | None, keep: bool) -> Value:
        y = ctx.add(op, [inner(ctx, x)], {"axes": axes, "keepdims": keep})
        return ctx.add(outer, [y]) if outer else y

    return reduce


def _log_sum_exp(ctx: NodeContext, x: Value, axes: list[int] | None, keep: bool) -> Value:
    """log(sum(exp(x - max))) + max: the max keeps exp from overflowing. A max of -inf
    (every element -inf, or none) shifts by 0 instead, so the result is -inf, not the
    NaN of -inf - -inf."""
    m = ctx.add("reduce_max", [x], {"axes": axes, "keepdims": True})
    if m.dtype.startswith("float"):
        m = ctx.add("where", [ctx.add("eq", [m, ctx.scalar(-np.inf, m)]), ctx.scalar(0, m),
                              m])
    s = ctx.add("reduce_sum", [ctx.add("exp", [ctx.add("sub", [x, m])])],
                {"axes": axes, "keepdims": keep})
    return ctx.add("add", [ctx.add("log", [s]), reshape(ctx, m, s.shape)])


def _identity(ctx: NodeContext, x: Value) -> Value:
    return x


def _square(ctx: NodeContext, x: Value) -> Value:
    return ctx.add("mul", [x, x])


def _abs(ctx: NodeContext, x: Value) -> Value:
    return ctx.add("abs", [x])


REDUCERS: dict[str, tuple[Reducer, int]] = {
    # ONNX op: (how, the opset from which axes is an input)
    "ReduceSum": (_plain("reduce_sum"), 13),
    "ReduceMean": (_plain("reduce_mean"), 18),
    "ReduceMax": (_plain("reduce_max"), 18),
    "ReduceMin": (_plain("reduce_min"), 18),
    "ReduceProd": (_plain("reduce_prod"), 18),
    "ReduceL1": (_of(_abs, "reduce_sum"), 18),
    "ReduceL2": (_of(_square, "reduce_sum", "sqrt"), 18),
    "ReduceSumSquare": (_of(_square, "reduce_sum"), 18),
    "ReduceLogSum": (_of(_identity, "reduce_sum", "log"), 18),
    "ReduceLogSumExp": (_log_sum_exp, 18),
}


def _make(how: Reducer, axes_as_input: bool) -> Callable[[NodeContext], Value]:
    def convert(ctx: NodeContext) -> Value:
        x = ctx.input(0)
        if axes_as_input and _axes_at_run_time(ctx):
            return _reduce_run_time_axes(ctx, x, bool(int(ctx.attr("keepdims", 1))))
        axes = _axes(ctx, len(x.shape), axes_as_input)
        if axes == "noop":
            return x
        assert not isinstance(axes, str)
        return how(ctx, x, axes, bool(int(ctx.attr("keepdims", 1))))

    return convert


def _axes_at_run_time(ctx: NodeContext) -> bool:
    """Whether the axes input is given only when the model runs (and not empty)."""
    v = ctx.optional_input(1)
    return v is not None and v.data is None and bool(ctx.run_time_values(1, "axes").size)


#: Each reduction as (what is done to x first, the reduction, what is done at the end), so
#: that the reduction alone is repeated axis by axis; None: log-sum-exp, repeated whole.
_PARTS: dict[str, tuple[Callable[[NodeContext, Value], Value], str, str | None] | None] = {
    "ReduceSum": (_identity, "reduce_sum", None), "ReduceMean": (_identity, "reduce_mean", None),
    "ReduceMax": (_identity, "reduce_max", None), "ReduceMin": (_identity, "reduce_min", None),
    "ReduceProd": (_identity, "reduce_prod", None), "ReduceL1": (_abs, "reduce_sum", None),
    "ReduceL2": (_square, "reduce_sum", "sqrt"), "ReduceSumSquare": (_square, "reduce_sum", None),
    "ReduceLogSum": (_identity, "reduce_sum", "log"), "ReduceLogSumExp": None,
}


def _reduce_run_time_axes(ctx: NodeContext, x: Value, keep: bool) -> Value:
    """Reduce over axes the run gives. Axis i of ``x`` (size n) splits into the reduced
    extent e = n if i is reduced else 1 and the kept extent d = 1 if it is reduced else
    n: sizes computed on the host before each run. Viewing axis i as [e, d] (e * d = n,
    so the row-major view reads the same elements) and reducing the e axis reduces axis
    i exactly when the run says so; the axes are done one at a time, which every reducer
    here composes over (a max of maxes, a log-sum-exp of log-sum-exps). Without keepdims
    the result is viewed without the reduced axes, whose sizes the host computes too."""
    axes = list(ctx.run_time_values(1, "axes").reshape(-1))
    rank = len(x.shape)
    parts = _PARTS[ctx.op_type]
    reduced = []
    for i in range(rank):
        hits = sum((lift(a) == i) + (lift(a) == i - rank) for a in axes)
        reduced.append(hits >= 1)
    ctx.require(sum(reduced) == len(axes),
                f"the axes input must name {len(axes)} distinct axes in [{-rank}, {rank - 1}]")
    kept: list[Dim] = []
    y = x if parts is None else parts[0](ctx, x)
    for i, n in enumerate(x.shape):
        if n == 1:
            kept.append(1)
            continue
        e, d = (_extent(ctx, where(reduced[i], n, 1), f"reduced{i}"),
                _extent(ctx, where(reduced[i], 1, n), f"kept{i}"))
        y = reshape(ctx, y, [*y.shape[:i], e, d, *y.shape[i + 1:]])
        y = (_log_sum_exp(ctx, y, [i], False) if parts is None
             else ctx.add(parts[1], [y], {"axes": [i], "keepdims": False}))
        kept.append(d)
    if parts is not None and parts[2]:
        y = ctx.add(parts[2], [y])
    if keep:
        return reshape(ctx, y, kept)
    out: list[Dim] = []
    for j in range(rank - len(axes)):  # the j-th axis that is kept
        size: object = 0
        before: object = 0  # kept axes before axis i
        for i, n in enumerate(x.shape):
            size = size + where((reduced[i] == 0) * (lift(before) == j), n, 0)
            before = before + (reduced[i] == 0)
        out.append(_extent(ctx, size, f"out{j}"))
    return reshape(ctx, y, out)


def _extent(ctx: NodeContext, value: object, hint: str) -> Dim:
    """``value`` as a dim. A computed size is at least 1, so where the input has an
    empty axis (which ONNX reduces to the reducer's identity) the host computes
    ``value + 1`` and the dim is that less 1."""
    if 0 in ctx.input(0).shape:
        return ctx.size(lift(value) + 1, f"{hint}_plus1") - 1
    return ctx.size(value, hint)


for _name, (_how, _input_since) in REDUCERS.items():
    converter(_name, since=1)(_make(_how, axes_as_input=False))
    converter(_name, since=_input_since)(_make(_how, axes_as_input=True))


def _arg_reduce(op: str) -> Callable[[NodeContext], Value]:
    def convert(ctx: NodeContext) -> Value:
        x = ctx.input(0)
        axis = normalize_axes(ctx, [int(ctx.attr("axis", 0))], len(x.shape))[0]
        return ctx.add(op, [x], {"axis": axis, "keepdims": bool(int(ctx.attr("keepdims", 1))),
                                 "select_last_index": bool(int(ctx.attr("select_last_index",
                                                                        0)))})

    return convert


converter("ArgMax", since=1)(_arg_reduce("argmax"))
converter("ArgMin", since=1)(_arg_reduce("argmin"))


@converter("LpNormalization", since=1)
def convert_lp_normalization(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axis = normalize_axes(ctx, [int(ctx.attr("axis", -1))], len(x.shape))[0]
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.error(f"p={p}; only the L1 and L2 norms exist")
    norm = (_of(_abs, "reduce_sum") if p == 1 else _of(_square, "reduce_sum", "sqrt"))(
        ctx, x, [axis], True)
    # a zero norm means x is all zeros there: divide by 1 instead of 0 (0, not NaN)
    zero = ctx.add("eq", [norm, ctx.scalar(0, norm)])
    return ctx.add("div", [x, ctx.add("where", [zero, ctx.scalar(1, norm), norm])])
