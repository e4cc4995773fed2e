"""The search space of a task compiled for a GPU target (vulkan, opencl).

The default GPU schedule (``ir/schedules/gpu.py``) fixes the loop structure a GPU
codegen needs (workgroups, invocations, shared-memory tiles between barriers) and
picks the sizes with rules tuned on one large GPU. Those sizes are what matters from
one device to the next, so they are the knobs here, and the structure stays the
rules': every config lowers to a kernel of the same shape as the default one, which
keeps every candidate valid for the codegens. ``schedule_gpu`` asks a ``choose`` hook
for each size it picks; a probe run records which stage asks for what (with the rule's
value as the default), and a config answers those questions with other values:

- matrix products: the workgroup's invocations (``ty`` x ``tx``), each invocation's
  register tile (``ri`` x ``rj``), the reduction step staged in shared memory (``kt``)
  and whether the next step is prefetched;
- ungrouped convolutions: the same over output channels, rows and columns;
- long reductions: the invocations sharing each output (0: one invocation per output);
- every other stage: its invocations per workgroup.

Limits that hold on every Vulkan device (256 invocations a workgroup are always
allowed by our rules' defaults; 16 KiB of shared memory) keep candidates runnable; the
default config is the default schedule, step for step. The interface is that of
:class:`~tensorsmith.autotune.space.SearchSpace`, which is all the search uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tensorsmith.ir.schedules.gpu import (
    WORKGROUP_REDUCE_MAX,
    WORKGROUP_SIZE,
    reduction_length,
    schedule_gpu,
)
from tensorsmith.ir.schedules.gpu_conv import SHARED_FLOATS, ConvTiles, shared_floats
from tensorsmith.ir.schedules.gpu_gemm import GemmTiles, gemm_extents
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Schedule, Stage

from .sketches import Knob
from .space import Config, KnobSpace, SearchSpace
from .task import Task

Values = dict[str, Any]
#: Invocations of one workgroup at most: what the default rules use at most, and a
#: size every GPU the runtime targets accepts.
MAX_INVOCATIONS = 256
#: Accumulators of one invocation's register tile at most (more spills to memory).
MAX_REGISTER_TILE = 64


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _choices(candidates: Sequence[int], limit: int, default: Any) -> tuple[Any, ...]:
    """``candidates`` up to ``limit``, and the default; sorted."""
    return tuple(sorted({c for c in candidates if c <= limit} | {default}))


class StageKnobs:
    """The knobs of one stage, and how they answer ``schedule_gpu``'s questions."""

    kind = "base"

    def __init__(self, stage: str, knobs: tuple[Knob, ...]) -> None:
        self.stage = stage
        self.knobs = knobs

    def seeds(self) -> list[Values]:
        return []

    def is_default(self, v: Values) -> bool:
        return all(v[k.name] == k.default for k in self.knobs)

    def valid(self, v: Values) -> bool:
        """The default always is; others must fit the limits of every device."""
        return self.is_default(v) or self.fits(v)

    def fits(self, v: Values) -> bool:
        return True

    def answer(self, question: str, v: Values, default: Any) -> Any:
        return v.get(question, default)


class GemmKnobs(StageKnobs):
    """A matrix product's tiles (see ``ir/schedules/gpu_gemm.py``)."""

    kind = "gemm"

    def __init__(self, st: Stage, default: GemmTiles) -> None:
        _, m, n, k = gemm_extents(st)
        self.m, self.n = m, n
        super().__init__(st.name, (
            Knob("ty", _choices((1, 2, 4, 8, 16, 32), _pow2_at_least(m), default.ty), default.ty),
            Knob("tx", _choices((1, 2, 4, 8, 16, 32), _pow2_at_least(n), default.tx), default.tx),
            Knob("ri", _choices((1, 2, 4, 8), _pow2_at_least(m), default.ri), default.ri),
            Knob("rj", _choices((1, 2, 4, 8), _pow2_at_least(n), default.rj), default.rj),
            Knob("kt", _choices((4, 8, 16, 32), max(k, 4), default.kt), default.kt),
            Knob("prefetch", (False, True), default.prefetch)))

    def tiles(self, v: Values) -> GemmTiles:
        return GemmTiles(v["ty"], v["tx"], v["ri"], v["rj"], v["kt"], v["prefetch"])

    def fits(self, v: Values) -> bool:
        t = self.tiles(v)
        return (t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
                and (t.rows + t.cols) * t.kt <= SHARED_FLOATS
                # a tile overhanging its axis by half or more only wastes invocations
                and t.rows < 2 * _pow2_at_least(self.m) and t.cols < 2 * _pow2_at_least(self.n))

    def answer(self, question: str, v: Values, default: Any) -> Any:
        return self.tiles(v) if question == "gemm_tiles" else default


class ConvKnobs(StageKnobs):
    """An ungrouped convolution's tiles (see ``ir/schedules/gpu_conv.py``)."""

    kind = "conv"

    def __init__(self, st: Stage, default: ConvTiles) -> None:
        op = st.tensor.op
        assert op is not None
        _, o, oh, ow = (a.extent for a in op.axes)
        c = op.reduce_axes[0].extent
        self.st = st
        self.o, self.oh, self.ow = o, oh, ow
        d = default
        super().__init__(st.name, (
            Knob("to", _choices((1, 2, 4, 8, 16, 32), _pow2_at_least(o), d.to), d.to),
            Knob("ty", _choices((1, 2, 4, 8, 16), _pow2_at_least(oh), d.ty), d.ty),
            Knob("tx", _choices((1, 2, 4, 8, 16, 32, 64), _pow2_at_least(ow), d.tx), d.tx),
            Knob("ri", _choices((1, 2, 4), _pow2_at_least(o), d.ri), d.ri),
            Knob("rj", _choices((1, 2, 4), _pow2_at_least(ow), d.rj), d.rj),
            Knob("kt", _choices((1, 2, 4, 8, 16), c, d.kt), d.kt)))

    def tiles(self, v: Values) -> ConvTiles:
        return ConvTiles(v["to"], v["ty"], v["tx"], v["ri"], v["rj"], v["kt"])

    def fits(self, v: Values) -> bool:
        t = self.tiles(v)
        return (t.to * t.ty * t.tx <= MAX_INVOCATIONS and t.ri * t.rj <= MAX_REGISTER_TILE
                and t.to * t.ri < 2 * _pow2_at_least(self.o)
                and t.tx * t.rj < 2 * _pow2_at_least(self.ow)
                and shared_floats(self.st, t) <= SHARED_FLOATS)

    def answer(self, question: str, v: Values, default: Any) -> Any:
        return self.tiles(v) if question == "conv_tiles" else default


def _workgroup_knob(extent: int, default: int) -> Knob:
    """Invocations per workgroup of a stage spread one output per invocation (the rule
    caps the size at the stage's outputs, so larger choices would repeat that one)."""
    return Knob("workgroup", _choices((16, 32, 64, 128, 256), extent, default), default)


class ReductionKnobs(StageKnobs):
    """A long reduction: invocations sharing each output, or 0 for one invocation per
    output, spread over workgroups of ``workgroup`` invocations."""

    kind = "reduction"

    def __init__(self, st: Stage, default: int) -> None:
        length = reduction_length(st)
        op = st.tensor.op
        assert op is not None
        outputs = math.prod(a.extent for a in op.axes)
        threads = _choices((32, 64, 128, WORKGROUP_REDUCE_MAX), length, default)
        super().__init__(st.name, (
            Knob("reduce_threads", (0, *threads), default),
            _workgroup_knob(outputs, min(WORKGROUP_SIZE, outputs))))


class WorkgroupKnobs(StageKnobs):
    kind = "workgroup"

    def __init__(self, st: Stage, default: int) -> None:
        op = st.tensor.op
        assert op is not None
        super().__init__(st.name, (_workgroup_knob(math.prod(a.extent for a in op.axes),
                                                   default),))


def _stage_knobs(st: Stage, question: str, default: Any) -> StageKnobs:
    if question == "gemm_tiles":
        return GemmKnobs(st, default)
    if question == "conv_tiles":
        return ConvKnobs(st, default)
    if question == "reduce_threads":
        return ReductionKnobs(st, default)
    if question == "workgroup":
        return WorkgroupKnobs(st, default)
    raise ValueError(f"the GPU schedule asks for an unknown size {question!r}")


class GpuSearchSpace(KnobSpace):
    """All schedules ``schedule_gpu`` makes for ``task`` with other sizes."""

    def __init__(self, task: Task) -> None:
        self.task = task
        _, outputs = task.compute()
        self.outputs = outputs
        stages: dict[str, StageKnobs] = {}

        def probe(st: Stage, question: str, default: Any) -> Any:
            if st.name not in stages:
                stages[st.name] = _stage_knobs(st, question, default)
            return default

        schedule_gpu(outputs, choose=probe)
        self.sketches: list[StageKnobs] = list(stages.values())
        self.knobs: list[tuple[int, Knob]] = [
            (i, k) for i, sk in enumerate(self.sketches) for k in sk.knobs]

    # -- schedules ------------------------------------------------------------------
    def schedule(self, config: Config) -> Schedule:
        by_stage = {sk.stage: (sk, v) for sk, v in zip(self.sketches, self._values(config))}

        def choose(st: Stage, question: str, default: Any) -> Any:
            found = by_stage.get(st.name)
            return default if found is None else found[0].answer(question, found[1], default)

        return schedule_gpu(self.outputs, choose=choose)



def space_for(task: Task) -> SearchSpace | GpuSearchSpace:
    """The search space for ``task``'s target: CPU sketches for llvm, GPU sizes else."""
    if Target.parse(task.target).family == "cpu":
        return SearchSpace(task)
    return GpuSearchSpace(task)
