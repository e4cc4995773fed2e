"""Schedules: how the loops of each compute stage run.

A schedule is a list of :class:`Step` records (plain, JSON-serializable data) applied to
the stages of a compute graph. The default schedules, the auto-tuner's candidates and the
tuning records all speak this one language, so a record replays exactly what was
measured. Every step refers to stages by tensor name and to loops by leaf name.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ..symbolic import Dim
from .expr import INDEX, Expr, IterVar, Var
from .symbols import ceil_div
from .tensor import ComputeOp, Tensor


@dataclass(eq=False)
class Leaf:
    """A loop of a stage as it will be emitted (a root axis, or a product of split/fuse)."""

    var: Var
    extent: Dim
    reduce: bool
    kind: str = "serial"

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"{self.name}<{self.extent}{', ' + self.kind if self.kind != 'serial' else ''}>"


@dataclass(frozen=True)
class Split:
    parent: Leaf
    outer: Leaf
    inner: Leaf
    factor: int


@dataclass(frozen=True)
class Fuse:
    outer: Leaf
    inner: Leaf
    fused: Leaf


@dataclass(frozen=True)
class Layout:
    """How an input is stored: its values ``transform``-ed (if named), axis ``block[0]`` in
    blocks of ``block[1]``, then the axes in ``order`` (tensorsmith.runtime.layouts)."""

    order: tuple[int, ...]
    block: tuple[int, int] | None = None
    transform: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"order": list(self.order),
                               "block": list(self.block) if self.block else None}
        if self.transform is not None:
            out["transform"] = self.transform
        return out


@dataclass(frozen=True)
class CacheRead:
    """``tensor`` (read by the stage) staged into a ``scope`` buffer at the top of loop
    ``at``'s body, covering what the loops below ``at`` read of it (see te/tiles.py)."""

    tensor: str
    scope: str
    at: str
    prefetch: bool = False  # shared only: load the next iteration's tile before computing


@dataclass(frozen=True)
class Step:
    """One schedule primitive: ``kind`` applied to ``stage`` with JSON-able ``args``."""

    kind: str
    stage: str
    args: tuple[Any, ...] = ()

    def to_json(self) -> list[Any]:
        return [self.kind, self.stage, list(self.args)]

    @staticmethod
    def from_json(data: list[Any]) -> Step:
        return Step(data[0], data[1], tuple(data[2]))


@dataclass(eq=False)
class Stage:
    """The loop structure of one compute tensor."""

    tensor: Tensor
    leaves: list[Leaf]
    roots: dict[int, Leaf]  # IterVar var id -> its root leaf
    relations: list[Split | Fuse] = field(default_factory=list)
    inline: bool = False
    cache_at: str | None = None  # accumulate in a local buffer below this loop
    rfactor: str | None = None  # a reduce loop below cache_at whose iterations accumulate apart
    epilogue: Stage | None = None  # elementwise consumer applied at write-back
    merged: bool = False  # this stage runs as another stage's epilogue
    # (consumer, loop): this stage's outermost loop runs as that loop of the consumer
    attached: tuple[str, str] | None = None
    cache_reads: list[CacheRead] = field(default_factory=list)
    # (intrinsic, its parameters): the stage is lowered to that intrinsic's statements
    tensorized: tuple[str, dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return self.tensor.name

    def leaf(self, name: str) -> Leaf:
        for leaf in self.leaves:
            if leaf.name == name:
                return leaf
        raise KeyError(f"stage {self.name} has no loop {name!r}; loops: "
                       f"{[x.name for x in self.leaves]}")


class Schedule:
    """Stages of a compute graph, in producer-before-consumer order, and the steps applied."""

    def __init__(self, outputs: list[Tensor]) -> None:
        self.outputs = outputs
        self.stages: list[Stage] = []
        self.steps: list[Step] = []
        # input tensor name -> the layout it is stored in (see ``layout``)
        self.layouts: dict[str, Layout] = {}
        # input tensor name -> the layout the kernel copies it into at run time (``pack``)
        self.packs: dict[str, Layout] = {}
        seen: set[int] = set()
        for t in outputs:
            self._visit(t, seen)

    def _visit(self, t: Tensor, seen: set[int]) -> None:
        if t.uid in seen or t.op is None:
            return
        seen.add(t.uid)
        for producer in input_tensors(t):
            self._visit(producer, seen)
        axes: list[IterVar] = [*t.op.axes, *t.op.reduce_axes]
        leaves = [Leaf(a.var, a.extent, a.reduce) for a in axes]
        self.stages.append(Stage(t, leaves, {id(a.var): lf for a, lf in zip(axes, leaves)}))

    def __getitem__(self, key: Tensor | str) -> Stage:
        name = key if isinstance(key, str) else key.name
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage named {name!r}")

    # -- primitives: each records itself as a Step, then acts --------------------------
    def apply(self, step: Step) -> Any:
        self.steps.append(step)
        stage = self[step.stage]
        return getattr(self, f"_{step.kind}")(stage, *step.args)

    def split(self, stage: Tensor | str, leaf: str, factor: int) -> tuple[str, str]:
        return self.apply(Step("split", _name(stage), (leaf, int(factor))))

    def fuse(self, stage: Tensor | str, outer: str, inner: str) -> str:
        return self.apply(Step("fuse", _name(stage), (outer, inner)))

    def reorder(self, stage: Tensor | str, *order: str) -> None:
        self.apply(Step("reorder", _name(stage), tuple(order)))

    def annotate(self, stage: Tensor | str, leaf: str, kind: str) -> None:
        """Mark a loop parallel, vectorized, unrolled or bound to a GPU index."""
        self.apply(Step("annotate", _name(stage), (leaf, kind)))

    def parallel(self, stage: Tensor | str, leaf: str) -> None:
        self.annotate(stage, leaf, "parallel")

    def vectorize(self, stage: Tensor | str, leaf: str) -> None:
        self.annotate(stage, leaf, "vectorized")

    def unroll(self, stage: Tensor | str, leaf: str) -> None:
        self.annotate(stage, leaf, "unrolled")

    def compute_inline(self, stage: Tensor | str) -> None:
        self.apply(Step("compute_inline", _name(stage)))

    def cache_write(self, stage: Tensor | str, at: str) -> None:
        """Accumulate a reduction in a local (register) buffer covering the spatial loops
        below loop ``at``, written back to memory once the reduction is done."""
        self.apply(Step("cache_write", _name(stage), (at,)))

    def rfactor(self, stage: Tensor | str, leaf: str) -> None:
        """Give each iteration of reduce loop ``leaf`` (below the stage's cache_write) its own
        accumulator in the local buffer, combined into one when the reduction is done.

        Vectorized, the loop's lanes then accumulate side by side (a sum along a row in
        full vectors, not one element at a time), and independent accumulators break the
        dependency chain of one. It reassociates the reduction, so results differ from
        the sequential order in the last bits of floating point. Apply it once the loop
        structure is final."""
        self.apply(Step("rfactor", _name(stage), (leaf,)))

    def cache_read(self, stage: Tensor | str, tensor: Tensor | str, scope: str, at: str,
                   prefetch: bool = False) -> None:
        """Stage the part of ``tensor`` that the loops below ``at`` read into a ``scope``
        buffer ("shared": filled by the workgroup's invocations together, between
        barriers; "local": by each invocation for itself), refilled on every iteration of
        ``at``; the stage then reads the copy. Apply it once the loop structure is final.
        With ``prefetch`` (shared only), each invocation loads its share of the next
        iteration's tile into registers before the current one is used, so the global
        memory latency overlaps the computation."""
        extra = (True,) if prefetch else ()
        self.apply(Step("cache_read", _name(stage), (_name(tensor), scope, at, *extra)))

    def layout(self, stage: Tensor | str, tensor: Tensor | str, order: tuple[int, ...],
               block: tuple[int, int] | None = None, transform: str | None = None) -> None:
        """Store input ``tensor`` (a placeholder ``stage`` reads) in another layout: axis
        ``block[0]`` cut into blocks of ``block[1]`` (if given), then the axes in ``order``
        (see tensorsmith.runtime.layouts). Every read is re-indexed. Meant for weights,
        which ``build`` transposes once at compile time: a convolution whose vector loop
        runs over output channels reads its weights contiguously only when a block of
        output channels is their last axis. A kernel's ``attrs["layouts"]`` names the
        inputs so stored; a caller feeding such a kernel must transpose them itself.

        A ``transform`` (a name in tensorsmith.runtime.winograd.TRANSFORMS) says the
        values are stored transformed, not just moved: the tensor the stage reads is then
        already the transformed one (``lowering.group_compute`` makes it so)."""
        args: tuple[Any, ...] = (_name(tensor), [int(a) for a in order])
        if block is not None or transform is not None:
            args += ([int(block[0]), int(block[1])] if block is not None else None,)
        if transform is not None:
            args += (transform,)
        self.apply(Step("layout", _name(stage), args))

    def pack(self, stage: Tensor | str, tensor: Tensor | str, order: tuple[int, ...],
             block: tuple[int, int] | None = None) -> None:
        """Read input ``tensor`` in another layout (as :meth:`layout` describes) that the
        kernel makes itself, at run time: it first copies the tensor into a scratch
        buffer in that layout (rows in parallel, in vectors), and ``stage`` reads the
        copy. For inputs that are not constants, which ``build`` cannot store otherwise:
        a product of two activations (attention's) reads its right-hand side as panels
        ``[N/v, K, v]``, one contiguous run per step of the reduction, where the rows of
        ``B`` it would read are ``N`` elements apart (at N = 4096 each step a new page,
        and every row in the same cache set)."""
        args: tuple[Any, ...] = (_name(tensor), [int(a) for a in order])
        if block is not None:
            args += ([int(block[0]), int(block[1])],)
        self.apply(Step("pack", _name(stage), args))

    def fuse_epilogue(self, stage: Tensor | str, consumer: Tensor | str) -> None:
        """Apply elementwise ``consumer`` to ``stage``'s cached tile as it is written back,
        so the reduction's result never goes through memory."""
        self.apply(Step("fuse_epilogue", _name(stage), (_name(consumer),)))

    def compute_at(self, stage: Tensor | str, consumer: Tensor | str, leaf: str) -> None:
        """Run ``stage`` one iteration of its outermost loop at a time, inside
        ``consumer``'s outermost loop ``leaf`` of the same extent (both walk the same rows):
        what a row of the consumer reads of ``stage`` is computed just before it, while
        the row's inputs are still in cache (a softmax reads its row three times)."""
        self.apply(Step("compute_at", _name(stage), (_name(consumer), leaf)))

    def tensorize(self, stage: Tensor | str, intrinsic: str, params: dict[str, Any]) -> None:
        """Lower ``stage`` with the statements of ``intrinsic`` (a name of
        te/matrix_lower.INTRINSICS, e.g. ``"matrix_product"``) sized by ``params``
        instead of as a loop nest of its leaves: for products that hardware computes in
        whole blocks (cooperative matrices). Its other steps are then ignored, except a
        fused epilogue, which the intrinsic applies as it writes the result."""
        self.apply(Step("tensorize", _name(stage), (intrinsic, dict(params))))

    def tile(self, stage: Tensor | str, x: str, y: str, fx: int, fy: int) -> tuple[str, ...]:
        xo, xi = self.split(stage, x, fx)
        yo, yi = self.split(stage, y, fy)
        self.reorder(stage, xo, yo, xi, yi)
        return xo, yo, xi, yi

    # -- implementations -----------------------------------------------------------
    def _split(self, st: Stage, leaf_name: str, factor: int) -> tuple[str, str]:
        parent = st.leaf(leaf_name)
        factor = max(1, factor)  # may exceed the extent: a vector tile with a masked tail
        outer = Leaf(Var(f"{parent.name}.o", INDEX), ceil_div(parent.extent, factor),
                     parent.reduce)
        inner = Leaf(Var(f"{parent.name}.i", INDEX), factor, parent.reduce)
        i = st.leaves.index(parent)
        st.leaves[i:i + 1] = [outer, inner]
        st.relations.append(Split(parent, outer, inner, factor))
        return outer.name, inner.name

    def _fuse(self, st: Stage, outer_name: str, inner_name: str) -> str:
        outer, inner = st.leaf(outer_name), st.leaf(inner_name)
        i = st.leaves.index(outer)
        if st.leaves[i + 1] is not inner:
            raise ValueError(f"fuse needs adjacent loops; {outer_name} and {inner_name} are not")
        fused = Leaf(Var(f"{outer.name}.{inner.name}", INDEX), outer.extent * inner.extent,
                     outer.reduce)
        st.leaves[i:i + 2] = [fused]
        st.relations.append(Fuse(outer, inner, fused))
        return fused.name

    def _reorder(self, st: Stage, *order: str) -> None:
        chosen = [st.leaf(n) for n in order]
        slots = sorted(st.leaves.index(c) for c in chosen)
        for slot, leaf in zip(slots, chosen):
            st.leaves[slot] = leaf

    def _annotate(self, st: Stage, leaf_name: str, kind: str) -> None:
        st.leaf(leaf_name).kind = kind

    def _cache_write(self, st: Stage, at: str) -> None:
        if st.tensor.op is None or not st.tensor.op.reduce_axes:
            raise ValueError(f"cache_write needs a reduction stage; {st.name} is not one")
        st.leaf(at)
        st.cache_at = at

    def _rfactor(self, st: Stage, leaf_name: str) -> None:
        if not st.leaf(leaf_name).reduce:
            raise ValueError(f"rfactor needs a reduce loop; {leaf_name} of {st.name} is not one")
        st.rfactor = leaf_name

    def _cache_read(self, st: Stage, tensor: str, scope: str, at: str,
                    prefetch: bool = False) -> None:
        if scope not in ("shared", "local"):
            raise ValueError(f"cache_read scope must be 'shared' or 'local', not {scope!r}")
        if prefetch and scope != "shared":
            raise ValueError("cache_read prefetches shared tiles only")
        if not any(t.name == tensor for t in input_tensors(st.tensor)):
            raise ValueError(f"stage {st.name} does not read a tensor named {tensor!r}")
        st.leaf(at)
        st.cache_reads.append(CacheRead(tensor, scope, at, bool(prefetch)))

    def _layout(self, st: Stage, tensor: str, order: list[int],
                block: list[int] | None = None, transform: str | None = None) -> None:
        self.layouts[tensor] = _checked_layout(st, tensor, order, block, transform)

    def _pack(self, st: Stage, tensor: str, order: list[int],
              block: list[int] | None = None) -> None:
        self.packs[tensor] = _checked_layout(st, tensor, order, block, None)

    def _fuse_epilogue(self, st: Stage, consumer: str) -> None:
        from .visit import collect_loads

        cons = self[consumer]
        op = cons.tensor.op
        if (st.cache_at is None and st.tensorized is None) or op is None or op.reduce_axes:
            raise ValueError("fuse_epilogue needs a cache_write (or tensorized) reduction "
                             "and an elementwise consumer")
        for load in collect_loads(op.body):
            # A size-1 axis has one index (a broadcast reads it as the constant 0).
            if load.buffer is st.tensor and (len(load.indices) != len(op.axes) or any(
                    i is not a.var and a.extent != 1 for i, a in zip(load.indices, op.axes))):
                raise ValueError(f"{consumer} reads {st.name} at other indices than its own")
        if cons.tensor.shape != st.tensor.shape:
            raise ValueError(f"{consumer} and {st.name} differ in shape")
        st.epilogue = cons
        cons.merged = True

    def _compute_at(self, st: Stage, consumer: str, leaf: str) -> None:
        cons = self[consumer]
        target = cons.leaf(leaf)
        if cons.leaves[0] is not target:
            raise ValueError(f"compute_at: {leaf} is not {consumer}'s outermost loop")
        if not st.leaves or st.leaves[0].extent != target.extent or st.leaves[0].reduce:
            raise ValueError(f"compute_at: {st.name}'s outermost loop does not walk the "
                             f"{target.extent} iterations of {consumer}.{leaf}")
        if st.inline or st.merged or st.cache_reads or st.epilogue is not None:
            raise ValueError(f"compute_at: {st.name} has no loops of its own to move")
        if self.stages.index(st) > self.stages.index(cons):
            raise ValueError(f"compute_at: {st.name} does not come before {consumer}")
        st.attached = (consumer, leaf)

    def _tensorize(self, st: Stage, intrinsic: str, params: dict[str, Any]) -> None:
        from .matrix_lower import check_tensorize

        check_tensorize(st, intrinsic, params)
        st.tensorized = (intrinsic, dict(params))

    def _compute_inline(self, st: Stage) -> None:
        if st.tensor.op is not None and st.tensor.op.reduce_axes:
            raise ValueError(f"cannot inline reduction stage {st.name}")
        if st.tensor in self.outputs:
            raise ValueError(f"cannot inline output stage {st.name}")
        st.inline = True


def _checked_layout(st: Stage, tensor: str, order: list[int], block: list[int] | None,
                    transform: str | None) -> Layout:
    """The layout ``order``/``block`` of input ``tensor`` read by ``st``, checked."""
    found = [t for t in input_tensors(st.tensor) if t.name == tensor]
    if not found or found[0].op is not None:
        raise ValueError(f"layout: stage {st.name} reads no input tensor named {tensor!r}")
    axes = found[0].ndim + (1 if block else 0)
    if sorted(order) != list(range(axes)):
        raise ValueError(f"layout: {list(order)} is not an axis order of {tensor} "
                         f"({axes} axes)")
    if block and (not 0 <= block[0] < found[0].ndim or block[1] < 1):
        raise ValueError(f"layout: cannot cut axis {block[0]} of {tensor} "
                         f"{list(found[0].shape)} into blocks of {block[1]} (a block "
                         f"size is positive; the last block may be partial)")
    return Layout(tuple(order), tuple(block) if block else None, transform)


def _name(stage: Tensor | str) -> str:
    return stage if isinstance(stage, str) else stage.name


#: ``input_tensors`` of each compute, while its body is the one it was found in: every
#: schedule of a kernel walks the same bodies again (the auto-tuner builds thousands).
_INPUTS: weakref.WeakKeyDictionary[ComputeOp, tuple[Expr, list[Tensor]]] = \
    weakref.WeakKeyDictionary()


def input_tensors(t: Tensor) -> list[Tensor]:
    """Tensors read by ``t``'s compute body, in first-read order."""
    from .visit import collect_loads

    op = t.op
    if op is None:
        return []
    known = _INPUTS.get(op)
    if known is not None and known[0] is op.body:
        return list(known[1])
    out: dict[int, Tensor] = {}
    for load in collect_loads(op.body):
        if isinstance(load.buffer, Tensor):
            out.setdefault(load.buffer.uid, load.buffer)
    _INPUTS[op] = (op.body, list(out.values()))
    return list(out.values())


def create_schedule(outputs: Tensor | list[Tensor]) -> Schedule:
    return Schedule([outputs] if isinstance(outputs, Tensor) else list(outputs))


def replay(outputs: list[Tensor], steps: list[Step]) -> Schedule:
    """Rebuild a schedule from recorded steps (how tuning records are applied)."""
    s = create_schedule(outputs)
    for step in steps:
        s.apply(step)
    return s
