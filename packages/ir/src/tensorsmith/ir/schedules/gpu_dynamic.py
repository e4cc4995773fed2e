"""Default GPU schedules of kernels with run-time sizes: the static rules, replayed.

The GPU rules (gpu.py, gpu_gemm.py, gpu_conv.py) size tiles and workgroups from fixed
extents. For a kernel whose extents are symbolic they run on the stand-in graph of
proxy.py (every symbol at :data:`~.proxy.SIZE_HINT`), and the steps they take -- splits
by fixed factors, fusions, reorders, bindings to ``blockIdx``/``threadIdx``, shared and
register caches -- replay on the symbolic kernel unchanged. Only fixed factors ever
reach a ``threadIdx`` loop or a cache, so workgroup sizes and shared memory stay static;
the ``blockIdx`` loops take the run-time extents (ceil-divided by the factors), which is
what the dispatch computes per run. A split of a symbolic axis has a guarded tail (the
lowering cannot prove that the factor divides it), so every size is correct, the
typical one merely the one the tiles are sized for.
"""

from __future__ import annotations

from ..te.schedule import Schedule, replay
from .gpu import GpuRules
from .proxy import bind


def schedule_gpu_dynamic(rules: GpuRules, apply: object) -> Schedule:
    """Apply the GPU rules (``apply``: rules.apply_rules) to the stand-in of ``rules.s``
    and replay their steps on ``rules.s``."""
    s = rules.s
    proxy = replay(bind(s.outputs), list(s.steps))
    before = len(proxy.steps)
    apply("gpu", GpuRules(proxy, rules.choose, rules.workgroup_size))  # type: ignore[operator]
    for step in proxy.steps[before:]:
        s.apply(step)
    return s


__all__ = ["schedule_gpu_dynamic"]
