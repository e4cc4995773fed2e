"""Default GPU schedules, shared by the Vulkan and OpenCL targets.

Contract with the GPU codegens: every materialized stage of a kernel is one top-level
statement of the lowered body and becomes one dispatch; its outermost loop is bound to
``blockIdx.x`` (workgroups) and the next to ``threadIdx.x`` (invocations of a
workgroup, the workgroup size). Loops inside run serially in each invocation. The
dispatches of a kernel run in order with a memory barrier between them.
"""

from __future__ import annotations

from ..te.schedule import Schedule
from ..te.tensor import Tensor

WORKGROUP_SIZE = 64


def schedule_gpu(outputs: list[Tensor], workgroup_size: int = WORKGROUP_SIZE) -> Schedule:
    s = Schedule(outputs)
    out_ids = {t.uid for t in outputs}
    for st in s.stages:
        op = st.tensor.op
        assert op is not None
        if st.tensor.uid not in out_ids and not op.reduce_axes:
            s.compute_inline(st.name)
            continue
        spatial = [a.var.name for a in op.axes]
        fused = spatial[0] if spatial else None
        for name in spatial[1:]:
            fused = s.fuse(st.name, fused, name)  # type: ignore[arg-type]
        if fused is None:
            continue
        block, thread = s.split(st.name, fused, min(workgroup_size, st.leaf(fused).extent))
        s.annotate(st.name, block, "blockIdx.x")
        s.annotate(st.name, thread, "threadIdx.x")
    return s
