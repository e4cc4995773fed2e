"""Default GPU schedules, shared by the Vulkan and OpenCL targets.

Contract with the GPU codegens: every materialized stage of a kernel is one top-level
statement of the lowered body and becomes one dispatch; its outermost loops are bound
to ``blockIdx.*`` (workgroups) and the next to ``threadIdx.*`` (invocations of a
workgroup, the workgroup size). Loops inside run serially in each invocation, with
shared-memory tiles filled between workgroup barriers. The dispatches of a kernel run in
order with a memory barrier between them.

Matrix products get the tiled schedule of ``gpu_gemm.py`` and ungrouped convolutions
that of ``gpu_conv.py``, with the elementwise ops after them (bias, activation,
residual add) applied as the tile is written back. A reduction of 32 or more
inputs per output runs one output per workgroup, its invocations combining partial
results in shared memory (te/allreduce.py). Every other stage fuses its spatial axes
into one loop split over ``blockIdx.x`` and ``threadIdx.x``; its short reductions run
serially per invocation.

The sizes these rules pick (tiles, invocations per workgroup) go through a ``choose``
hook, so the auto-tuner searches the same schedules with other sizes; by default every
rule keeps its own choice.
"""

from __future__ import annotations

from ..te.schedule import Schedule, Stage
from ..te.tensor import Tensor
from .epilogue import fuse_epilogue_chain, stage_readers
from .gpu_conv import choose_tiles as choose_conv_tiles
from .gpu_conv import is_conv, schedule_conv
from .gpu_gemm import choose_tiles as choose_gemm_tiles
from .gpu_gemm import gemm_extents, is_gemm, schedule_gemm
from .knobs import Choose, default_choice

WORKGROUP_SIZE = 64
#: Reductions at least this long are shared by a workgroup, of at most this many.
WORKGROUP_REDUCE_MIN = 32
WORKGROUP_REDUCE_MAX = 256

#: The free parameters these rules ask ``choose`` for (see knobs.py), once per stage
#: where the rules reach them. The auto-tuner's GPU search space answers with other
#: values; without it every stage gets the default. Knobs: ``"gemm_tiles"`` (a
#: :class:`GemmTiles`), ``"conv_tiles"`` (a :class:`ConvTiles`), ``"reduce_threads"``
#: (invocations sharing a long reduction; 0 leaves it to one invocation per output) and
#: ``"workgroup"`` (invocations per workgroup of a stage whose outputs are spread one per
#: invocation).
__all__ = ["Choose", "default_choice", "schedule_gpu"]


def schedule_gpu(outputs: list[Tensor], workgroup_size: int = WORKGROUP_SIZE,
                 choose: Choose = default_choice) -> Schedule:
    s = Schedule(outputs)
    out_ids = {t.uid for t in outputs}
    for st in s.stages:
        op = st.tensor.op
        assert op is not None
        if st.merged:
            continue
        if st.tensor.uid not in out_ids and not op.reduce_axes:
            s.compute_inline(st.name)
            continue
        if is_gemm(st):
            schedule_gemm(s, st, choose(st, "gemm_tiles", choose_gemm_tiles(*gemm_extents(st))))
            _fuse_elementwise_consumer(s, st, out_ids)
            continue
        if is_conv(st):
            tiles = choose_conv_tiles(st)
            if tiles is not None:
                schedule_conv(s, st, choose(st, "conv_tiles", tiles))
                _fuse_elementwise_consumer(s, st, out_ids)
                continue
        if op.reduce_axes and _schedule_workgroup_reduction(s, st, choose):
            continue
        spatial = [a.var.name for a in op.axes]
        fused = spatial[0] if spatial else None
        for name in spatial[1:]:
            fused = s.fuse(st.name, fused, name)  # type: ignore[arg-type]
        if fused is None:
            continue
        extent = st.leaf(fused).extent
        size = min(choose(st, "workgroup", min(workgroup_size, extent)), extent)
        block, thread = s.split(st.name, fused, size)
        s.annotate(st.name, block, "blockIdx.x")
        s.annotate(st.name, thread, "threadIdx.x")
    return s


def reduction_length(st: Stage) -> int:
    """Inputs each output of ``st`` combines (1 for a stage without reduction)."""
    op = st.tensor.op
    assert op is not None
    length = 1
    for a in op.reduce_axes:
        length *= a.extent
    return length


def _schedule_workgroup_reduction(s: Schedule, st: Stage, choose: Choose = default_choice
                                  ) -> bool:
    """One workgroup per output when each output reduces ``WORKGROUP_REDUCE_MIN`` or more
    inputs (softmax and normalization rows, global pooling, a classifier's sums): the
    invocations read neighbouring inputs and combine their partial results in shared
    memory. Returns False, scheduling nothing, for shorter reductions (and where
    ``choose`` asks for 0 invocations)."""
    op = st.tensor.op
    assert op is not None
    length = reduction_length(st)
    if length < WORKGROUP_REDUCE_MIN:
        return False
    threads = WORKGROUP_REDUCE_MAX
    while threads > length:
        threads //= 2
    threads = choose(st, "reduce_threads", threads)
    if threads <= 0:
        return False
    name = st.name
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
    return True


def _fuse_elementwise_consumer(s: Schedule, st: Stage, out_ids: set[int]) -> None:
    """Apply the output computed elementwise from ``st`` (through stages that are
    inlined) at ``st``'s write-back, when ``st`` has no other reader."""
    fuse_epilogue_chain(s, st, out_ids, stage_readers(s))
