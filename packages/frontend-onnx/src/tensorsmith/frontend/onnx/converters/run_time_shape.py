"""The shape ops whose operands the run gives (a Reshape's target, Slice's bounds, Pad's
amounts, Squeeze's axes... fed as graph inputs): every size they decide becomes a size
the host computes before each run (``NodeContext.size``, ir/host_sizes.py), so the model
compiles once for every value. shape.py's converters call these where
:func:`run_time_operand` finds such an operand, and keep their compile-time paths
otherwise.

The choices ONNX makes from the values (which entry is -1, which axes are named, how a
bound clamps) are where-chains on the host; a value the model cannot take gives a size
below 1 or breaks an element-count assumption, and the run refuses it naming the node.
"""

from __future__ import annotations

from tensorsmith.ir.graph import Value
from tensorsmith.ir.host_sizes import HostExpr, host_max, host_min, is_run_time, lift, where
from tensorsmith.ir.symbolic import Dim, Sym, SymbolicDimError, is_static, math_prod, shape_text

from ..context import NodeContext
from .common import (
    fill_value,
    normalize_axes,
    normalize_axis,
    pad_node,
    parts,
    reshape,
    slice_axis,
)


def run_time_operand(ctx: NodeContext, i: int, what: str) -> list[object] | None:
    """The entries of input ``i`` (a reshape's target, axes, repeats) where the run gives
    some of them (host expressions, see tensorsmith.ir.host_sizes); None where they are
    all known now (a constant, a shape value) or cannot be sizes, which the compile-time
    path handles (refusing, so the backend specializes, what it cannot). An empty input
    ``x`` is left to that path too: the sizes the host computes are at least 1."""
    v = ctx.optional_input(i)
    if v is None or v.data is not None or 0 in ctx.input(0).shape:
        return None
    try:
        entries = list(ctx.run_time_values(i, what).reshape(-1))
    except SymbolicDimError:  # (a ConstantRequiredError: computed by kernels)
        return None
    if not any(is_run_time(e) for e in entries):
        return None
    if any(isinstance(e, float) or (is_run_time(e) and e.is_float) for e in entries):
        return None
    return entries


def host_sum(terms: list[object]) -> object:
    """The sum of ``terms`` (host expressions or ints), without a 0 term in its text."""
    total: object = 0
    for t in terms:
        total = t if isinstance(total, int) and total == 0 else total + t
    return total


def named_axes(ctx: NodeContext, axes: list[object], rank: int) -> list[object]:
    """For each of ``rank`` axes, 1 where some of ``axes`` (which may count from the end)
    names it, else 0, as the host computes it. One more than the count is a size of its
    own (sizes are at least 1), so that the expressions built on it name it."""
    flags = []
    for d in range(rank):
        count = host_sum([hit for a in axes for hit in (lift(a) == d, lift(a) == d - rank)])
        flags.append(lift(ctx.size(1 + count, f"axis{d}_named")) >= 2)
    return flags


def nth_dim(shape: tuple[Dim, ...] | list[Dim], index: object) -> object:
    """``shape[index]`` for an index known at run time; 0 (a size the run refuses) where
    it is out of range."""
    picked: object = 0
    for k, n in enumerate(shape):
        picked = where(index == k, n, picked)
    return picked


def reshape_run_time(ctx: NodeContext, x: Value, target: list[object], allowzero: bool
                      ) -> Value:
    """Reshape to a target the run gives. Which entry is -1 and which are 0 is known only
    then, so every output size is a choice the host computes: entry j is the input's dim
    j where it is 0 (without allowzero), the element count over the product of the other
    entries where it is -1, else itself. A target that does not fit (a count that does
    not divide, two -1s, a negative size) gives sizes below 1 or an element count the
    reshape's run-time assumption refuses."""
    rank = len(x.shape)
    sizes: list[object] = []
    for j, s in enumerate(target):
        sizes.append(s if allowzero else where(s == 0, x.shape[j] if j < rank else 0, s))
    unknown = [s == -1 for s in target]
    known: object = 1
    for u, n in zip(unknown, sizes):
        factor = where(u, 1, n)
        known = lift(factor) if isinstance(known, int) and known == 1 else known * factor
    quotient = lift(math_prod(x.shape)) // host_max(known, 1)
    shape = [ctx.size(where(u, quotient, n), f"shape{j}")
             for j, (u, n) in enumerate(zip(unknown, sizes))]
    return reshape(ctx, x, shape)


def squeeze_run_time(ctx: NodeContext, x: Value, axes: list[object]) -> Value:
    """Squeeze axes the run gives: the output has ``rank - len(axes)`` axes, output axis
    j being the j-th input axis no axis names. Its size is that axis's, chosen on the
    host; 0 (refused by the run) where the axes name an axis twice or out of range, or
    name an axis that is not 1."""
    rank = len(x.shape)
    if len(axes) > rank:
        raise ctx.error(f"{len(axes)} axes to squeeze from an input of rank {rank}")
    dropped = named_axes(ctx, axes, rank)
    valid = lift(host_sum(dropped)) == len(axes)
    for i, n in enumerate(x.shape):
        if not (isinstance(n, int) and n == 1):
            valid = valid * (dropped[i] == 0)
    shape: list[Dim] = []
    for j in range(rank - len(axes)):
        picks: list[object] = []
        before: object = 0  # kept axes before axis i
        for i, n in enumerate(x.shape):
            picks.append(where(before == j, where(dropped[i], 0, n), 0))
            before = host_sum([before, dropped[i] == 0])
        shape.append(ctx.size(where(valid, host_sum(picks), 0), f"dim{j}"))
    if not shape and any(not (isinstance(n, int) and n == 1) for n in x.shape):
        raise ctx.error(f"cannot squeeze every axis of {shape_text(x.shape)}: not all are 1")
    return reshape(ctx, x, shape)


def unsqueeze_run_time(ctx: NodeContext, x: Value, axes: list[object]) -> Value:
    """Insert axes the run gives: the output has ``rank + len(axes)`` axes, axis d being
    1 where an axis names it (counted against the output's rank), else the next input
    axis; the host chooses each size, 0 (refused by the run) where the axes name an axis
    twice or out of range."""
    rank = len(x.shape) + len(axes)
    inserted = named_axes(ctx, axes, rank)
    valid = lift(host_sum(inserted)) == len(axes)
    shape: list[Dim] = []
    before: object = 0  # input axes placed before axis d
    for d in range(rank):
        size = where(inserted[d], 1, nth_dim(x.shape, before))
        shape.append(ctx.size(where(valid, size, 0), f"dim{d}"))
        before = host_sum([before, inserted[d] == 0])
    return reshape(ctx, x, shape)


def split_run_time(ctx: NodeContext, split: list[object]) -> list[Value]:
    """Split sizes the run gives: each part's size is computed before the run (so a part
    of 0 elements is refused then), and the axis is viewed as their sum, which every run
    checks against the axis (ONNX requires the parts to cover it)."""
    x = ctx.input(0)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(x.shape))
    if len(split) != ctx.num_outputs:
        raise ctx.error(f"split has {len(split)} sizes for {ctx.num_outputs} outputs")
    sizes = [ctx.size(s, f"part{i}") for i, s in enumerate(split)]
    total: Dim = sum(sizes)
    view = reshape(ctx, x, [total if d == axis else n for d, n in enumerate(x.shape)])
    return parts(ctx, view, axis, sizes)


def operand_entries(ctx: NodeContext, i: int, what: str) -> list[object] | None:
    """Input ``i``'s entries as ints, sizes or host expressions; None where absent."""
    if ctx.optional_input(i) is None:
        return None
    return list(ctx.run_time_values(i, what).reshape(-1))


def slice_run_time(ctx: NodeContext) -> Value:
    """Slice bounds (and axes, steps) the run gives. ONNX's clamping becomes host
    arithmetic per axis of ``x``: the number of elements taken (a size computed before
    the run, so an empty slice is refused then) and the lowest index read. The axis is
    then windowed to the elements from the lowest to the highest read (:func:`windowed`)
    and stepped through: by a step known now with the slice op, by one the run gives
    with :func:`run_time_step`."""
    x = ctx.input(0)
    rank = len(x.shape)
    starts, ends = operand_entries(ctx, 1, "starts"), operand_entries(ctx, 2, "ends")
    axes, steps = operand_entries(ctx, 3, "axes"), operand_entries(ctx, 4, "steps")
    assert starts is not None and ends is not None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts, ends, axes and steps differ in length ({len(starts)}, "
                        f"{len(ends)}, {len(axes)}, {len(steps)})")
    if not any(isinstance(a, HostExpr) for a in axes):
        normalize_axes(ctx, [int(a) for a in axes], rank)  # refuses repeats, out of range
    if any(isinstance(k, int) and k == 0 for k in steps):
        raise ctx.error(f"a step is 0 (steps {steps})")
    valid = axes_valid(axes, rank)
    ctx.require(valid, f"the axes input must name distinct axes in [{-rank}, {rank - 1}]")
    windows: dict[int, tuple[object, Dim]] = {}
    strides: dict[int, tuple[object, Dim, Dim]] = {}
    for a, n in enumerate(x.shape):
        start, end, step, picked = axis_bounds(axes, starts, ends, steps, a, rank, n)
        if not picked:
            continue
        low, count, stride = slice_extent(start, end, step, n)
        length = ctx.size(where(valid, count, 0), f"len{a}")
        if isinstance(stride, int):
            k: Dim = stride
            span: Dim = (length - 1) * k + 1
        else:  # a size of its own: (length - 1) * k is not provably >= 0 as a polynomial
            k = ctx.size(stride, f"step{a}")
            span = ctx.size((lift(length) - 1) * k + 1, f"span{a}")
        windows[a] = (low, span)
        strides[a] = (step, length, k)
    y = windowed(ctx, x, windows, "slice")
    for a, (step, length, k) in strides.items():
        y = stepped(ctx, y, a, step, length, k)
    return y


def axes_valid(axes: list[object], rank: int) -> object:
    """1 where every axis the run gives is in range and none is named twice (ONNX
    refuses both), else 0."""
    if not any(isinstance(a, HostExpr) for a in axes):
        return True
    ok: object = True
    for a in axes:
        if isinstance(a, HostExpr):
            ok = where(ok, (lift(a) >= -rank) * (lift(a) < rank), 0)
    for d in range(rank):
        named = host_sum([hit for a in axes for hit in (lift(a) == d, lift(a) == d - rank)])
        ok = where(ok, lift(named) <= 1, 0)
    return ok


def axis_bounds(axes: list[object], starts: list[object], ends: list[object],
                 steps: list[object], a: int, rank: int, n: Dim
                 ) -> tuple[object, object, object, bool]:
    """(start, end, step) of axis ``a``: those of the entry whose axis is ``a`` (or
    ``a - rank``), else the whole axis; and whether some entry may name it."""
    start: object = 0
    end: object = n
    step: object = 1
    picked = False
    for axis, s, e, k in zip(axes, starts, ends, steps):
        hit = (lift(axis) == a) + (lift(axis) == a - rank) if isinstance(axis, HostExpr) \
            else int(axis) in (a, a - rank)
        if hit is False:
            continue
        picked = True
        start, end = where(hit, s, start), where(hit, e, end)
        if not (isinstance(k, int) and isinstance(step, int) and k == step):
            step = where(hit, k, step)
    return start, end, step, picked


def slice_extent(start: object, end: object, step: object, n: Dim
                  ) -> tuple[object, object, object]:
    """ONNX Slice on an axis of ``n``: (the lowest index read, how many elements, the
    step's magnitude). Negative bounds count from the end; a forward slice clamps both
    into [0, n], a backward one the start into [0, n - 1] and the end into [-1, n - 1]."""
    s = where(lift(start) < 0, lift(start) + n, start)
    e = where(lift(end) < 0, lift(end) + n, end)
    s_fore = host_min(host_max(s, 0), n)
    s_back = host_min(host_max(s, 0), lift(n) - 1)
    e_back = host_min(host_max(e, -1), lift(n) - 1)
    if isinstance(step, int) and step > 0:
        return s_fore, element_count(s_fore, host_min(host_max(e, 0), n), step), step
    if isinstance(step, int):
        backward = element_count(e_back, s_back, -step)
        return s_back - (lift(backward) - 1) * -step, backward, -step
    positive = lift(step) > 0
    forward = element_count(s_fore, host_min(host_max(e, 0), n), step)
    backward = element_count(e_back, s_back, -lift(step))
    count = where(positive, forward, backward)
    low = where(positive, s_fore, s_back - (lift(backward) - 1) * -lift(step))
    return low, count, where(positive, step, -lift(step))


def element_count(first: object, stop: object, step: object) -> object:
    """``len(range(first, stop, step))`` for a step > 0 (0 where the bounds cross)."""
    return host_max((lift(stop) - first + step - 1) // step, 0)


def windowed(ctx: NodeContext, x: Value, windows: dict[int, tuple[object, Dim]],
             hint: str) -> Value:
    """``x`` cut to ``length`` elements from ``offset`` on each axis of ``windows``, where
    the offset may be known only at run time. The offset becomes a size computed before
    the run (``offset + 1``, a size being at least 1) and so does what is left after the
    window (``rest``); the axis is viewed as ``offset + length + rest - 1``, which every
    run checks, so that the slice's bounds are inside the axis for every size and its
    result has exactly ``length`` elements."""
    view: list[Dim] = list(x.shape)
    begin: list[Dim] = [0] * len(x.shape)
    end: list[Dim] = list(x.shape)
    for a, (offset, length) in windows.items():
        n = x.shape[a]
        if not isinstance(offset, HostExpr) and is_static((offset, length, n)):
            begin[a], end[a] = int(offset), int(offset) + int(length)  # type: ignore[arg-type]
            continue
        first = (offset if not isinstance(offset, HostExpr)
                 else ctx.size(offset + 1, f"{hint}_from{a}") - 1)
        rest = ctx.size(lift(n) - offset - length + 1, f"{hint}_rest{a}")
        view[a] = first + length + rest - 1
        begin[a], end[a] = first, first + length
    y = reshape(ctx, x, view)
    if begin == [0] * len(x.shape) and end == list(y.shape):
        return y
    return ctx.add("slice", [y], {"begin": begin, "end": end, "step": [1] * len(x.shape)})


def stepped(ctx: NodeContext, y: Value, a: int, step: object, length: Dim, k: Dim) -> Value:
    """Axis ``a`` of ``y``, the window from the lowest to the highest index a slice reads,
    stepped through to its ``length`` elements: from the end where ``step`` is negative."""
    if isinstance(step, int):
        if step == 1:
            return y
        n = y.shape[a]
        rank = len(y.shape)
        begin = [(n - 1 if step < 0 else 0) if d == a else 0 for d in range(rank)]
        end = [(-1 if step < 0 else n) if d == a else y.shape[d] for d in range(rank)]
        return ctx.add("slice", [y], {"begin": begin, "end": end,
                                      "step": [step if d == a else 1 for d in range(rank)]})
    return run_time_step(ctx, y, a, step, length, k)


def run_time_step(ctx: NodeContext, y: Value, a: int, step: object, length: Dim, k: Dim
                   ) -> Value:
    """A step the run gives, on an axis of ``(length - 1) * k + 1`` elements where ``k``
    is its magnitude: padded by ``k - 1`` and viewed as [length, k] (which every run
    checks, the span being a size of its own), column 0 holds the
    elements a forward slice takes; a backward one takes them reversed, so both are
    computed and the run picks one by the step's sign (a window of the two, end to end)."""
    rank = len(y.shape)
    shape = list(y.shape)
    padded = ctx.add("pad", [y], {"before": [0] * rank,
                                  "after": [k - 1 if d == a else 0 for d in range(rank)],
                                  "mode": "constant", "value": 0})
    grid = reshape(ctx, padded, [*shape[:a], length, k, *shape[a + 1:]])
    column = slice_axis(ctx, grid, a + 1, 0, 1)
    forward = reshape(ctx, column, [*shape[:a], length, *shape[a + 1:]])
    backward = ctx.add("slice", [forward], {
        "begin": [length - 1 if d == a else 0 for d in range(rank)],
        "end": [-1 if d == a else n for d, n in enumerate(forward.shape)],
        "step": [-1 if d == a else 1 for d in range(rank)]})
    both = ctx.add("concat", [forward, backward], {"axis": a})
    return windowed(ctx, both, {a: ((lift(step) < 0) * lift(length), length)}, f"sign{a}")


def expand_run_time(ctx: NodeContext, x: Value, target: list[object]) -> Value:
    """Expand to a target the run gives. Where the input's dim is 1 (or missing) the
    output's is the target's, a size the host computes; elsewhere it is the input's,
    and the target's must be 1 or the same. That condition is folded into the computed
    sizes (0, which the run refuses, where it fails); with none computed, one axis of
    the input is viewed as a computed size equal to it where the condition holds."""
    rank = max(len(x.shape), len(target))
    dims: list[Dim] = [1] * (rank - len(x.shape)) + list(x.shape)
    wanted = [1] * (rank - len(target)) + target
    valid: object = True  # decided now where no dim constrains the target
    for n, s in zip(dims, wanted):
        if (isinstance(n, int) and n == 1) or (not is_run_time(s) and s in (1, n)):
            continue
        if isinstance(s, int) and isinstance(n, int):
            raise ctx.error(f"cannot expand {shape_text(x.shape)}: a target size of {s} "
                            f"for a dim of {n}")
        fits = ((lift(s) == 1) + (lift(s) == n)) >= 1
        valid = fits if valid is True else valid * fits
    free = [i for i, n in enumerate(dims) if isinstance(n, int) and n == 1]
    shape = list(dims)
    for i in free:
        shape[i] = ctx.size(where(valid, wanted[i], 0), f"dim{i}")
    if not free and rank:
        i = rank - 1
        shape[i] = ctx.size(where(valid, dims[i], 0), f"dim{i}")
        lead = rank - len(x.shape)
        x = reshape(ctx, x, [*x.shape[:i - lead], shape[i], *x.shape[i - lead + 1:]])
    return x if tuple(shape) == x.shape else ctx.add("expand", [x], {"shape": shape})


def run_time_fill(ctx: NodeContext) -> Value | None:
    """The constant mode's fill value where the run gives it (it is then data), else
    None."""
    fill = ctx.optional_input(2)
    if (ctx.attr("mode", "constant") != "constant" or fill is None or fill.data is not None
            or fill.uid in ctx.state.shape_values or 0 in fill.shape
            or 0 in ctx.input(0).shape):
        return None
    return fill


def pad_at_run_time(ctx: NodeContext) -> bool:
    """Whether the pads or the axes are given only when the model runs. Reflect padding
    stays specialized on them: the pad op must know each amount below its axis, which an
    amount the run gives proves only through views whose checks grow with every axis."""
    if ctx.attr("mode", "constant") == "reflect":
        return False
    return any(run_time_operand(ctx, i, w) is not None
               for i, w in ((1, "pads"), (3, "axes")) if i < 3 or ctx.opset >= 18)


def pad_run_time(ctx: NodeContext, fill: Value | None) -> Value:
    """Pad by amounts (over axes) the run gives: each amount ``p`` becomes the size
    ``p + 1`` computed before the run (a negative amount, ONNX's cropping, is refused
    then) and the pad op places the input at offset ``p``. A fill value the run gives is
    data: the input is padded with 0 and the padding replaced by the value."""
    x = ctx.input(0)
    rank = len(x.shape)
    mode = ctx.attr("mode", "constant")
    pads = operand_entries(ctx, 1, "pads")
    assert pads is not None
    axes = operand_entries(ctx, 3, "axes") if ctx.opset >= 18 else None
    axes = list(range(rank)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads has {len(pads)} values for {len(axes)} axes; it needs 2 "
                        "per padded axis")
    if not any(isinstance(a, HostExpr) for a in axes):
        normalize_axes(ctx, [int(a) for a in axes], rank)
    valid = axes_valid(axes, rank)
    ctx.require(valid, f"the axes input must name distinct axes in [{-rank}, {rank - 1}]")
    before: list[Dim] = [0] * rank
    after: list[Dim] = [0] * rank
    for a in range(rank):
        b, e, _, picked = axis_bounds(axes, pads[:len(axes)], pads[len(axes):],
                                       [1] * len(axes), a, rank, 0)
        if picked:
            before[a] = pad_amount(ctx, where(valid, b, -1), f"before{a}")
            after[a] = pad_amount(ctx, where(valid, e, -1), f"after{a}")
    value = fill_value(ctx) if mode == "constant" and fill is None else 0.0
    return pad_node(ctx, x, before, after, mode, value, fill)


def pad_amount(ctx: NodeContext, p: object, hint: str) -> Dim:
    """A pad amount as a dim: itself where known now, else ``p + 1`` as a size computed
    before the run, less 1 (so the run refuses a negative amount, naming the node)."""
    if isinstance(p, HostExpr | Sym):
        return ctx.size(lift(p) + 1, hint) - 1
    return int(p)  # type: ignore[call-overload]


def center_crop_pad_run_time(ctx: NodeContext) -> Value:
    """Sizes the run gives: each axis is zero-padded by ``max(size - n, 0)`` (amounts
    computed before the run, the extra element after) and then windowed to ``size``
    elements from ``max(n - size, 0) // 2`` (:func:`windowed`), which crops it."""
    x = ctx.input(0)
    wanted = list(ctx.run_time_values(1, "shape").reshape(-1))
    rank = len(x.shape)
    axes = ctx.attr("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, list(axes), rank)
    if len(wanted) != len(axes):
        raise ctx.error(f"shape has {len(wanted)} sizes for the axes {axes}")
    before: list[Dim] = [0] * rank
    after: list[Dim] = [0] * rank
    crops: dict[int, tuple[object, Dim]] = {}
    for a, size in zip(axes, wanted):
        n = x.shape[a]
        grow = host_max(lift(size) - n, 0)
        before[a] = pad_amount(ctx, grow // 2, f"before{a}")
        after[a] = pad_amount(ctx, grow - grow // 2, f"after{a}")
        crops[a] = (host_max(lift(n) - size, 0) // 2, ctx.size(size, f"size{a}"))
    padded = pad_node(ctx, x, before, after, "constant", 0)
    return windowed(ctx, padded, crops, "crop")
