"""Default GPU schedules, shared by the Vulkan and OpenCL targets.

Contract with the GPU codegens: every materialized stage of a kernel is one top-level
statement of the lowered body and becomes one dispatch; its outermost loops are bound
to ``blockIdx.*`` (workgroups) and the next to ``threadIdx.*`` (invocations of a
workgroup, the workgroup size). Loops inside run serially in each invocation, with
shared-memory tiles filled between workgroup barriers. The dispatches of a kernel run in
order with a memory barrier between them.

Matrix products get the tiled schedule of ``gpu_gemm.py`` (float16 ones on a GPU with
cooperative matrices the kernel of ``gpu_coop.py``) and ungrouped convolutions
that of ``gpu_conv.py`` (integer ones their loops without the shared-memory copies:
``gpu_integer.py``), with the elementwise ops after them (bias, activation,
residual add) applied as the tile is written back. A reduction of 32 or more
inputs per output runs one output per workgroup, its invocations combining partial
results in shared memory (te/allreduce.py). Every other stage fuses its spatial axes
into one loop split over ``blockIdx.x`` and ``threadIdx.x``; its short reductions run
serially per invocation.

The sizes these rules pick (tiles, invocations per workgroup) go through a ``choose``
hook, so the auto-tuner searches the same schedules with other sizes; by default every
rule keeps its own choice. The loop structure stays the rules': every answer lowers to a
kernel of the same shape, which keeps every candidate valid for the codegens. Knobs:
a matrix product's or convolution's tile sizes (``gpu_gemm.ask_tiles``,
``gpu_conv.ask_tiles``, ``gpu_integer.ask_tiles``, ``gpu_integer.ask_conv_tiles``),
``reduce_threads`` (invocations sharing a long reduction; 0 leaves it to one invocation
per output) and ``workgroup`` (invocations per workgroup of a stage whose outputs are
spread one per invocation).
"""

from __future__ import annotations

import math

from ..target import BASELINE_GPU, GpuResources
from ..te.schedule import Schedule, Stage
from .epilogue import epilogue_consumer, fuse_epilogue_chain, stage_readers
from .gpu_conv import ask_tiles as ask_conv_tiles
from .gpu_conv import choose_tiles as choose_conv_tiles
from .gpu_conv import is_conv, schedule_conv
from .gpu_coop import schedule_coop
from .gpu_gemm import ask_tiles as ask_gemm_tiles
from .gpu_gemm import is_gemm, schedule_gemm, up_to
from .gpu_integer import ask_conv_tiles as ask_integer_conv_tiles
from .gpu_integer import ask_tiles as ask_integer_tiles
from .gpu_integer import is_integer_conv, is_integer_gemm
from .knobs import Choose

WORKGROUP_SIZE = 64
#: Reductions at least this long are shared by a workgroup, of at most this many.
WORKGROUP_REDUCE_MIN = 32
WORKGROUP_REDUCE_MAX = 256


def reduction_length(st: Stage) -> int:
    """Inputs each output of ``st`` combines (1 for a stage without reduction)."""
    op = st.tensor.op
    assert op is not None
    return math.prod(a.extent for a in op.reduce_axes)


class GpuRules:
    """The rules applied to one schedule."""

    def __init__(self, s: Schedule, choose: Choose, workgroup_size: int = WORKGROUP_SIZE,
                 resources: GpuResources = BASELINE_GPU) -> None:
        self.s = s
        self.choose = choose
        self.workgroup_size = workgroup_size
        self.resources = resources
        self.out_ids = {t.uid for t in s.outputs}

    def inline(self, st: Stage) -> None:
        self.s.compute_inline(st.name)

    def elementwise(self, st: Stage) -> None:
        if st.tensor.uid not in self.out_ids:
            self.s.compute_inline(st.name)
        else:
            self.spread(st, self.workgroup(st))

    def window(self, st: Stage) -> None:
        """An ungrouped convolution gets the tiles of gpu_conv.py (where some fit the
        shared memory); other windows are reductions."""
        if is_integer_conv(st):
            schedule_conv(self.s, st, ask_integer_conv_tiles(st, self.choose), staged=False)
            self.epilogue(st)
            return
        tiles = choose_conv_tiles(st) if is_conv(st) else None
        if tiles is None:
            self.product(st)
            return
        schedule_conv(self.s, st, ask_conv_tiles(st, self.choose, tiles))
        self.epilogue(st)

    def product(self, st: Stage) -> None:
        """A matrix product gets the tiles of gpu_gemm.py; other reductions are shared by
        a workgroup when long (:meth:`workgroup_reduction`), else spread one output per
        invocation."""
        if is_integer_gemm(st):
            schedule_gemm(self.s, st, ask_integer_tiles(st, self.choose), staged=False)
            self.epilogue(st)
            return
        if is_gemm(st):
            consumer = epilogue_consumer(st, self.out_ids, stage_readers(self.s))
            epilogue = self.s[consumer] if consumer is not None else None
            if not schedule_coop(self.s, st, self.choose, self.resources, epilogue):
                schedule_gemm(self.s, st, ask_gemm_tiles(st, self.choose))
            self.epilogue(st)
            return
        threads = 0
        length = reduction_length(st)
        if length >= WORKGROUP_REDUCE_MIN:
            threads = WORKGROUP_REDUCE_MAX
            while threads > length:
                threads //= 2
            threads = self.choose(st, "reduce_threads", threads,
                                  (0, *up_to((32, 64, 128, WORKGROUP_REDUCE_MAX), length)))
        size = self.workgroup(st)
        if threads > 0:
            self.workgroup_reduction(st, threads)
        else:
            self.spread(st, size)

    def workgroup(self, st: Stage) -> int:
        """Invocations per workgroup when ``st``'s outputs are spread one per invocation
        (the rule caps the size at the stage's outputs: larger sizes repeat that one)."""
        op = st.tensor.op
        assert op is not None
        outputs = math.prod(a.extent for a in op.axes)
        return self.choose(st, "workgroup", min(self.workgroup_size, outputs),
                           up_to((16, 32, 64, 128, 256), outputs))

    def spread(self, st: Stage, size: int) -> None:
        """The spatial axes fused into one loop split over ``blockIdx.x`` and
        ``threadIdx.x``; a short reduction runs serially per invocation."""
        op = st.tensor.op
        assert op is not None
        spatial = [a.var.name for a in op.axes]
        fused = spatial[0] if spatial else None
        for name in spatial[1:]:
            fused = self.s.fuse(st.name, fused, name)  # type: ignore[arg-type]
        if fused is None:
            return
        block, thread = self.s.split(st.name, fused, min(size, st.leaf(fused).extent))
        self.s.annotate(st.name, block, "blockIdx.x")
        self.s.annotate(st.name, thread, "threadIdx.x")

    def workgroup_reduction(self, st: Stage, threads: int) -> None:
        """One workgroup per output when each output reduces ``WORKGROUP_REDUCE_MIN`` or
        more inputs (softmax and normalization rows, global pooling, a classifier's
        sums): the invocations read neighbouring inputs and combine their partial
        results in shared memory."""
        op = st.tensor.op
        assert op is not None
        s, name = self.s, st.name
        spatial = [a.var.name for a in op.axes]
        reduce = [a.var.name for a in op.reduce_axes]
        rows = spatial[0] if spatial else None
        for leaf in spatial[1:]:
            rows = s.fuse(name, rows, leaf)  # type: ignore[arg-type]
        r = reduce[0]
        for leaf in reduce[1:]:
            r = s.fuse(name, r, leaf)
        serial, lanes = s.split(name, r, threads)
        s.reorder(name, *([rows] if rows else []), lanes, serial)
        if rows is not None:
            s.annotate(name, rows, "blockIdx.x")
        s.annotate(name, lanes, "threadIdx.x")

    def epilogue(self, st: Stage) -> None:
        """Apply the output computed elementwise from ``st`` (through stages that are
        inlined) at ``st``'s write-back, when ``st`` has no other reader."""
        fuse_epilogue_chain(self.s, st, self.out_ids, stage_readers(self.s))
