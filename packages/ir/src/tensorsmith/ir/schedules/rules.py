"""Which rule schedules a stage: one table, keyed by target family and stage kind.

A stage's kind says what its loop nest is (:func:`stage_kind`); the table says which
rule of each family schedules that kind. The rules ask every free parameter of
``choose`` (knobs.py), so the table is also the whole of the auto-tuner's search space:
the tuner runs these same functions with other answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..target import BASELINE_CPU, BASELINE_GPU, CpuResources, GpuResources
from ..te.schedule import Schedule, Stage
from ..te.tensor import Tensor
from .cpu import CpuRules
from .cpu_dynamic import schedule_dynamic
from .cpu_shapes import last_axis_contiguous
from .gpu import WORKGROUP_SIZE, GpuRules
from .gpu_dynamic import schedule_gpu_dynamic
from .knobs import Choose, default_choice
from .proxy import has_symbols

#: The stage kinds named by their compute's tag: stages of fast algorithms.
TAGGED = ("winograd_input", "winograd_input_blocked", "winograd_columns",
          "winograd_output")

#: The tags of convolutions (float and integer, plain and channel-blocked).
WINDOWS = ("conv2d", "conv2d_blocked", "qconv2d", "qconv2d_blocked")


def stage_kind(st: Stage, out_ids: set[int]) -> str:
    """``inline`` (an elementwise stage read by others), ``elementwise`` (an
    elementwise output), ``pad`` (also a 16-bit operand's widening), ``window``
    (convolution, pooling), ``product`` (a reduction whose output's last axis is an
    input's contiguous axis: matmul), other ``reduction``s, or a tag of
    :data:`TAGGED`."""
    op = st.tensor.op
    assert op is not None
    if op.tag in TAGGED:
        return op.tag
    if not op.reduce_axes:
        if st.name.endswith("_pad") or op.tag == "widen":  # (ops/nn.py: widened)
            return "pad"
        return "elementwise" if st.tensor.uid in out_ids else "inline"
    if op.tag in WINDOWS or op.tag.startswith("pool_"):
        return "window"
    # (an integer product reads its weight [K / 4, N, 4]: ``j`` is not B's last index)
    return "product" if op.tag == "qmatmul" or last_axis_contiguous(st) else "reduction"


RULES: dict[str, dict[str, Callable[[Any, Stage], None]]] = {
    "cpu": {
        "inline": CpuRules.inline,
        "elementwise": CpuRules.elementwise,
        "pad": CpuRules.padding,
        "window": CpuRules.window,
        "product": CpuRules.matmul,
        "reduction": CpuRules.reduction,
        "winograd_input": CpuRules.winograd_input,
        "winograd_input_blocked": CpuRules.winograd_input_blocked,
        "winograd_columns": CpuRules.winograd_columns,
        "winograd_output": CpuRules.winograd_output,
    },
    # GPU rules tell products and convolutions from other reductions by structure
    # (gpu_gemm.is_gemm, gpu_conv.is_conv), and have no schedule of their own for
    # Winograd's stages (the GPU search has no fast algorithms).
    "gpu": {
        "inline": GpuRules.inline,
        "elementwise": GpuRules.elementwise,
        "pad": GpuRules.elementwise,
        "window": GpuRules.window,
        "product": GpuRules.product,
        "reduction": GpuRules.product,
        "winograd_input": GpuRules.elementwise,
        "winograd_input_blocked": GpuRules.elementwise,
        "winograd_columns": GpuRules.product,
        "winograd_output": GpuRules.product,
    },
}


def apply_rules(family: str, rules: CpuRules | GpuRules) -> Schedule:
    """Schedule every stage of ``rules.s`` by its kind's rule. A stage merged into a
    tile's write-back has no loops of its own, so no rule and no knobs."""
    table = RULES[family]
    for st in rules.s.stages:
        if not st.merged:
            table[stage_kind(st, rules.out_ids)](rules, st)
    return rules.s


def schedule_cpu(outputs: list[Tensor], resources: CpuResources = BASELINE_CPU,
                 choose: Choose = default_choice, constants: frozenset[str] = frozenset(),
                 start: Schedule | None = None) -> Schedule:
    """The default schedule of a fused kernel for a CPU of ``resources``; ``constants``
    names the input placeholders that are weights (a rule may store those in another
    layout), ``start`` a schedule of ``outputs`` with steps already taken (a weight
    stored transformed). A kernel with run-time sizes gets the rules of
    cpu_dynamic.py."""
    s = start if start is not None else Schedule(outputs)
    rules = CpuRules(s, resources, choose, constants)
    if has_symbols(s):
        return schedule_dynamic(rules, RULES["cpu"], stage_kind)
    return apply_rules("cpu", rules)


def schedule_gpu(outputs: list[Tensor], workgroup_size: int = WORKGROUP_SIZE,
                 choose: Choose = default_choice, start: Schedule | None = None,
                 resources: GpuResources = BASELINE_GPU) -> Schedule:
    """The default GPU schedule of a fused kernel (gpu.py) for a GPU of ``resources``; a
    kernel with run-time sizes gets the same rules sized on a stand-in
    (gpu_dynamic.py)."""
    s = start if start is not None else Schedule(outputs)
    rules = GpuRules(s, choose, workgroup_size, resources)
    if has_symbols(s):
        return schedule_gpu_dynamic(rules, apply_rules)
    return apply_rules("gpu", rules)
