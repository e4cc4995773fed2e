"""What a stage's loop nest says about it: which operand is a product's contiguous
right-hand side, which convolution it is (depthwise, grouped, pointwise), how it reads
an input along an axis. Questions the CPU rules ask before they size anything."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..dtypes import itemsize
from ..te.expr import Binary, Const, Expr, IterVar, Load, Select, Var
from ..te.schedule import Schedule, Stage, input_tensors
from ..te.simplify import simplify
from ..te.tensor import ComputeOp, Tensor
from ..te.tiles import affine_form
from ..te.visit import collect_loads, free_vars, rewrite, substitute, walk


def fuse_all(s: Schedule, stage: str, names: Sequence[str]) -> str | None:
    """The loops ``names`` of ``stage`` fused into one, in order (None for no loops)."""
    if not names:
        return None
    fused = names[0]
    for name in names[1:]:
        fused = s.fuse(stage, fused, name)
    return fused


def axis_reads(st: Stage, tensor: Tensor, axis: int) -> tuple[int, int] | None:
    """How stage ``st`` reads axis ``axis`` of ``tensor`` (an input of its own shape's
    rank): ``(stride, reach)``, the step per output index along that axis (a
    convolution's stride) and the span the other loops add (its taps, dilated); None
    where its reads there are not one affine form."""
    op = st.tensor.op
    assert op is not None
    bounds = {id(a.var): a.extent for a in (*op.axes, *op.reduce_axes)}
    own = id(op.axes[axis].var)
    forms = set()
    for load in collect_loads(op.body):
        if load.buffer is tensor:
            form = affine_form(load.indices[axis], bounds)
            if form is None:
                return None
            coefs = form[1]
            forms.add((coefs.get(own, 0),
                       sum(c * (bounds[v] - 1) for v, c in coefs.items() if v != own)))
    return forms.pop() if len(forms) == 1 else None


def element_bytes(st: Stage) -> int:
    """Bytes per lane of the stage's arithmetic: narrower types compute in 32-bit lanes."""
    return max(4, itemsize(st.tensor.dtype))


def last_axis_contiguous(st: Stage) -> bool:
    """The output's last axis is the last index of some input read (matmul's B[k, j])."""
    op = st.tensor.op
    assert op is not None
    if not op.axes or op.axes[-1].extent == 1:
        return False
    last = op.axes[-1].var
    return any(isinstance(e, Load) and e.indices and e.indices[-1] is last
               for e in walk(op.body))


def right_hand_side(st: Stage) -> Tensor | None:
    """The input placeholder ``B[.., k, j]`` a matrix product reads (``j`` the output's
    last axis, ``k`` a reduce axis, the leading indices free of the reduction): what may
    be stored, or copied, as panels."""
    return _operand(st, row_of_output=False)


def left_hand_side(st: Stage) -> Tensor | None:
    """The input placeholder ``A[.., i, k]`` a matrix product reads (``i`` the output's
    row axis, ``k`` a reduce axis): what may be stored, or copied, as row panels."""
    return _operand(st, row_of_output=True)


def _operand(st: Stage, row_of_output: bool) -> Tensor | None:
    """A product's placeholder operand indexed ``[.., k, j]`` (or ``[.., i, k]``) by the
    output's last (row) axis and one reduce axis, its leading indices free of the
    reduction."""
    op = st.tensor.op
    assert op is not None
    if not op.reduce_axes or len(op.axes) < 2:
        return None
    own = op.axes[-2 if row_of_output else -1].var
    reduce_vars = {id(a.var) for a in op.reduce_axes}
    for load in collect_loads(op.body):
        t = load.buffer
        if not (isinstance(t, Tensor) and t.op is None and t.ndim >= 2):
            continue
        k, free = (load.indices[-1], load.indices[-2]) if row_of_output else \
            (load.indices[-2], load.indices[-1])
        if (free is own and isinstance(k, Var) and id(k) in reduce_vars
                and not any(id(v) in reduce_vars for i in load.indices[:-2]
                            for v in free_vars(i))):
            return t
    return None


def packable_weight(st: Stage, constants: frozenset[str]) -> str | None:
    """The constant 2-D right-hand side ``B[k, j]`` of a matrix product, which ``build``
    may store as panels."""
    t = right_hand_side(st)
    return t.name if t is not None and t.name in constants and t.ndim == 2 else None


def packable_input(st: Stage, constants: frozenset[str]) -> str | None:
    """The right-hand side ``B[.., k, j]`` of a matrix product when it is an input the
    kernel reads at run time, not a constant (attention's ``K^T`` and ``V``): the kernel
    may copy it into panels first (``Schedule.pack``)."""
    t = right_hand_side(st)
    return t.name if t is not None and t.name not in constants else None


def dot_weight(st: Stage, constants: frozenset[str]) -> str | None:
    """The constant weight ``B[k / 4, j, 4]`` of an integer product (ops/integer.py),
    which ``build`` may store as panels with the four dot steps last."""
    op = st.tensor.op
    assert op is not None
    if op.tag != "qmatmul":
        return None
    t = input_tensors(st.tensor)[-1]
    return t.name if t.op is None and t.name in constants and t.ndim == 3 else None


def panel_layout(ndim: int, vec: int, dots: bool = False
                 ) -> tuple[tuple[int, ...], tuple[int, int]]:
    """``(order, block)`` storing ``B[.., k, j]`` as panels ``[.., j / vec, k, vec]``; with
    ``dots``, ``B[.., k / 4, j, 4]`` as ``[.., j / vec, k / 4, vec, 4]`` (each step of
    the panel one run of ``4 x vec`` bytes)."""
    if dots:
        return (*range(ndim - 3), ndim - 2, ndim - 3, ndim - 1, ndim), (ndim - 2, vec)
    return (*range(ndim - 2), ndim - 1, ndim - 2, ndim), (ndim - 1, vec)


def row_panel_layout(ndim: int, rows: int) -> tuple[tuple[int, ...], tuple[int, int]]:
    """``(order, block)`` storing ``A[.., i, k]`` as row panels ``[.., i / rows, k, rows]``:
    a register tile's ``rows`` values of one step of the reduction side by side."""
    return (*range(ndim - 2), ndim - 2, ndim, ndim - 1), (ndim - 2, rows)


def inlined_body(st: Stage, s: Schedule) -> Expr:
    """``st``'s body with the stages inlined into it written out."""

    def expand(e: Expr, depth: int = 0) -> Expr:
        def visit(x: Expr) -> Expr | None:
            t = x.buffer if isinstance(x, Load) else None
            if (isinstance(t, Tensor) and t.op is not None and s[t.name].inline
                    and depth < 16):
                body = substitute(t.op.body, {id(a.var): i for a, i in
                                              zip(t.op.axes, x.indices)})  # type: ignore[union-attr]
                return expand(body, depth + 1)
            return None

        return rewrite(e, visit)

    assert st.tensor.op is not None
    return expand(st.tensor.op.body)


def _blocked_read(op: ComputeOp, body: Expr) -> tuple[int, int] | None:
    """``(axis, k)`` when the stage reads an input's last axis as ``c % k`` of its own
    axis ``c`` = ``axis``: a blocked layout ([N, C / k, H, W, k]) written back to NCHW
    (``axis`` 1) or channels-last (the last axis). Either way ``c`` is best split by
    ``k``: its lanes then read one contiguous block, or the ``k`` rows that read the same
    blocks run one after another while those are in cache."""
    for e in walk(body):
        if not (isinstance(e, Load) and isinstance(e.buffer, Tensor) and e.indices):
            continue
        index = e.indices[-1]
        if not (isinstance(index, Binary) and index.op in ("mod", "floormod")
                and isinstance(index.b, Const)):
            continue
        k = int(index.b.value)
        for axis, iv in enumerate(op.axes):
            form = affine_form(index.a, {id(iv.var): 1})
            if form is None or form[1] != {id(iv.var): 1} or not 1 < k < iv.extent \
                    or iv.extent % k:
                continue
            base = simplify(form[0], {})
            if isinstance(base, Const) and int(base.value) % k == 0:
                return axis, k
    return None


#: Lanes of a row at most for :func:`_gathers_short_rows`.
SHORT_ROW_LANES = 16


def _gathers_short_rows(op: ComputeOp, body: Expr) -> bool:
    """Whether the stage's last axis is short (a blocked layout's lanes) and an input
    reads it in another of its axes, not its own last one: NCHW to ``[N, C / b, H, W,
    b]`` reads ``x[n, cb * b + ci, h, w]``. By rows each row is one gather at simple
    addresses, and rows along ``w`` read adjacent elements; flattened, every lane
    divides the flat index first (NCHW to blocked 2-10x slower)."""
    if op.axes[-1].extent > SHORT_ROW_LANES:
        return False
    last = op.axes[-1].var
    for e in walk(body):
        if isinstance(e, Load) and isinstance(e.buffer, Tensor) and e.indices:
            uses = [any(v is last for v in free_vars(x)) for x in e.indices]
            if any(uses[:-1]) and not uses[-1]:
                return True
    return False


def _moves_rows(load: Load, axes: list[Expr], spatial: Sequence[IterVar]) -> bool:
    """Whether ``load`` reads its rows elsewhere than the stage writes them (a broadcast
    or a transpose), the last axis not mixed into the other indices."""
    last = axes[-1]
    if any(any(v is last for v in free_vars(x)) for x in load.indices[:-1]):
        return False
    form = affine_form(load.indices[-1], {id(last): 1})
    if form is None or form[1] != {id(last): 1}:  # not contiguous along the last axis
        return False
    if len(load.indices) != len(axes):
        return True
    return any(x is not a for x, a, ax in zip(load.indices, axes, spatial) if ax.extent > 1)


#: Lanes of a row at least for a stage to run by rows of its last axis.
MIN_ROW_LANES = 4


def elementwise_rows(st: Stage, s: Schedule) -> tuple[int, tuple[int, int] | None]:
    """How an elementwise stage runs by rows: ``(row_axes, split)``, its first
    ``row_axes`` axes fused into rows (0: one flat loop in vector chunks), and ``split``
    = ``(axis, k)`` where its rows read a blocked layout and that axis is best split by
    ``k`` (:func:`_blocked_read`). The stages inlined into it are written out once for
    the three questions."""
    op = st.tensor.op
    assert op is not None
    if len(op.axes) < 2:
        return 0, None
    body = inlined_body(st, s)
    rows = _select_rows(op, body)
    if rows:
        return rows, None
    read = _blocked_read(op, body)
    if read is not None and read[1] >= MIN_ROW_LANES:
        return len(op.axes) - 1, read
    return (len(op.axes) - 1 if _gathers_short_rows(op, body) else 0), None


def _select_rows(op: ComputeOp, body: Expr) -> int:
    """How many leading axes of an elementwise stage the conditions of its selects, or
    the reads of its broadcast operands, depend on (its own and those of the stages
    inlined into it), when that leaves trailing axes worth a vector loop; else 0.

    By rows, such a condition or read is one scalar per row. Flattened into one vector
    loop, a per-channel scale (a batch norm after a DenseNet Concat) is a division of the
    flat index per lane and a gather: slow to run, and a second per kernel for LLVM."""
    axes = [a.var for a in op.axes]

    def deepest_axis(*exprs: Expr) -> int:
        used = {id(v) for e in exprs for v in free_vars(e)}
        return max((k for k, a in enumerate(axes) if id(a) in used), default=-1)

    deepest = -1
    along_last = False  # a broadcast operand that varies along the last axis
    for e in walk(body):
        if isinstance(e, Select) and not any(isinstance(x, Load) for x in walk(e.cond)):
            deepest = max(deepest, deepest_axis(e.cond))
        elif isinstance(e, Load) and isinstance(e.buffer, Tensor):
            reads = deepest_axis(*e.indices)
            if reads < len(axes) - 1:  # constant along the last axis: a broadcast
                deepest = max(deepest, reads)
            elif _moves_rows(e, axes, op.axes):
                along_last = True
    if along_last and op.axes[-1].extent >= MIN_ROW_LANES:
        # a per-channel operand of a blocked layout ([1, C/b, 1, 1, b]), or a transpose
        # that keeps the last axis (blocks of channels moved whole): by rows each is one
        # contiguous vector per row; flattened, a division and a gather per lane
        return len(axes) - 1
    if deepest < 0 or deepest >= len(axes) - 1:
        return 0
    tail = math.prod(a.extent for a in op.axes[deepest + 1:])
    return deepest + 1 if tail >= 16 else 0


def channel_vector_weight(st: Stage, constants: frozenset[str]) -> str | None:
    """The weight a dense or grouped (not depthwise) convolution reads, when it is a
    constant the build can store transposed: only then may the vector loop run over
    output channels."""
    op = st.tensor.op
    assert op is not None
    if op.tag != "conv2d" or not op.reduce_axes or group_outputs(st) == 1:
        return None
    rest = input_tensors(st.tensor)[1:]
    weights = [t for t in rest if t.op is None and t.ndim == 4 and t.name in constants]
    return weights[0].name if weights else None


def group_outputs(st: Stage) -> int:
    """Output channels per group of a grouped convolution (its input channel is
    ``(o // og) * cg + rc``); 0 for a dense one, 1 where that is not known."""
    op = st.tensor.op
    assert op is not None
    data = input_tensors(st.tensor)[0]
    rc, o = op.reduce_axes[0].var, op.axes[1].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            if load.indices[1] is rc:
                return 0
            for e in walk(load.indices[1]):
                if (isinstance(e, Binary) and e.op == "floordiv" and e.a is o
                        and isinstance(e.b, Const)):
                    return int(e.b.value)
            return 1
    return 1


def depthwise_conv(st: Stage) -> bool:
    """A grouped convolution with one input channel per group: each output channel reads
    the input channel of its group (``x[n, o // m, ...]``), not a reduce axis."""
    op = st.tensor.op
    assert op is not None
    if op.tag != "conv2d" or not op.reduce_axes or op.reduce_axes[0].extent != 1:
        return False
    return group_outputs(st) != 0


def pointwise_conv(st: Stage) -> bool:
    """A 1x1 convolution reading a placeholder (no pad stage) at unit stride along x: a
    matrix product over the flattened image."""
    op = st.tensor.op
    assert op is not None
    if any(a.extent != 1 for a in op.reduce_axes[1:]):
        return False
    data = input_tensors(st.tensor)[0]
    if data.op is not None:  # a pad stage
        return False
    x = op.axes[3].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            index = load.indices[3]
            return index is x or (isinstance(index, Binary) and index.a is x)
    return False


def input_pitch(st: Stage) -> int | None:
    """Elements between the input rows consecutive output rows read (stride x width),
    or None when that is not a plain multiple of the output row."""
    op = st.tensor.op
    assert op is not None
    data = input_tensors(st.tensor)[0]
    y = op.axes[2].var
    for load in collect_loads(op.body):
        if load.buffer is data:
            rows = load.indices[2]  # y * stride + ry * dilation
            if isinstance(rows, Binary) and rows.op == "add":
                rows = rows.a
            if rows is y:
                return int(data.shape[3])
            if (isinstance(rows, Binary) and rows.op == "mul" and rows.a is y
                    and isinstance(rows.b, Const)):
                return int(rows.b.value) * int(data.shape[3])
            return None
    return None
