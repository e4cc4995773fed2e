"""Task extraction: the distinct kernels of a model, each one a tuning task.

A task is one workload key (what a fused group computes, independent of value names
and weights), how often the model runs it, and the group itself. The groups come from
the same passes and fusion as ``build`` (:func:`tensorsmith.ir.build.fused_groups`), so a
record tuned here is found by ``build(records=...)``. Each group is *detached* from its
graph: fresh input values without producers or weight data, so a task pickles in a few
kilobytes to builder processes however large the model's weights are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.direct import is_direct
from tensorsmith.ir.graph import Graph, copy_nodes
from tensorsmith.ir.lowering import (
    default_transforms,
    group_compute,
    has_symbolic_shapes,
    workload_key,
)
from tensorsmith.ir.passes.fuse import FusedGroup
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.expr import Binary, Call, Expr, Reduce, Select
from tensorsmith.ir.te.tensor import Tensor
from tensorsmith.ir.te.visit import walk
from tensorsmith.runtime.kernel_names import kernel_label

_FLOAT_OPS = frozenset({"add", "sub", "mul", "div", "max", "min", "pow"})


@dataclass(eq=False)
class Task:
    """One distinct kernel: ``weight`` = how many times the model runs it."""

    key: str
    name: str
    group: FusedGroup
    weight: int
    flops: float
    target: str = "llvm"
    # inputs that are weights in the model (a schedule may store them in another layout)
    constant_inputs: tuple[int, ...] = ()
    _computes: dict[tuple[tuple[int, str], ...], tuple[list[Tensor], list[Tensor]]] = field(
        default_factory=dict, repr=False)

    def compute(self, transforms: Mapping[int, str] | None = None
                ) -> tuple[list[Tensor], list[Tensor]]:
        """The group's tensor expressions (inputs, outputs), built once per process; with
        ``transforms``, the compute that reads those weights transformed (e.g. a Winograd
        convolution, see ``lowering.group_compute``)."""
        key = tuple(sorted((transforms or {}).items()))
        if key not in self._computes:
            self._computes[key] = group_compute(self.group, dict(key))
        return self._computes[key]

    @property
    def default_transforms(self) -> dict[int, str]:
        """The weight transforms of the task's default schedule (what ``build`` computes
        it with when no record names others)."""
        return default_transforms(self.group, Target.parse(self.target).family,
                                  self.constant_inputs)

    @property
    def label(self) -> str:
        """The kernel's name, ``fused_matmul_add#1a2b``: the same string ``build`` gives its
        steps, so ``inspect`` and ``run --profile`` show it too
        (:mod:`tensorsmith.runtime.kernel_names`)."""
        return kernel_label(self.name, self.key)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_computes"] = {}  # tensors are rebuilt in the receiving process
        return state


def extract_tasks(mod: Graph, params: Mapping[str, np.ndarray] | None = None,
                  target: str | Target = "llvm", opt_level: int = 2,
                  precision: str = "fp32") -> list[Task]:
    """One :class:`Task` per distinct workload of ``mod`` (built at ``precision``, as
    ``build`` takes it), in first-occurrence order.
    Groups with sizes known only at run time are no tasks: their kernels keep the
    default rules (schedules/cpu_dynamic.py), which no measurement at one size could
    stand for; nor are kernels written directly as tensor IR (ir/direct.py), which have
    no schedule to tune."""
    tgt = Target.parse(target)
    _, groups, _ = fused_groups(mod, params, opt_level, target=tgt, precision=precision)
    tasks: dict[str, Task] = {}
    for g in groups:
        if has_symbolic_shapes(g) or is_direct(g):
            continue
        key = workload_key(g)
        if key in tasks:
            tasks[key].weight += 1
            continue
        detached = detach_group(g)
        constant = tuple(i for i, v in enumerate(g.inputs) if v.is_constant)
        task = Task(key, g.name, detached, 1, 0.0, str(tgt), constant)
        task.flops = estimate_flops(task.compute()[1])
        tasks[key] = task
    return list(tasks.values())


def detach_group(group: FusedGroup) -> FusedGroup:
    """A copy of ``group`` that references nothing outside itself (no producers, no data)."""
    inputs, nodes, outputs = copy_nodes(group.inputs, group.nodes, group.outputs,
                                        keep_data=False)
    return FusedGroup(nodes, inputs, outputs)


def estimate_flops(outputs: list[Tensor]) -> float:
    """Floating-point operations of a compute graph as declared (before scheduling).

    Each stage counts its arithmetic once per element (a reduction once per element and
    reduction step, plus the combine). Pure data movement counts one op per output
    element, so throughput stays meaningful (and nonzero) for copies and transposes.
    """
    from tensorsmith.ir.te.schedule import input_tensors

    seen: set[int] = set()
    total = 0.0

    def visit(t: Tensor) -> None:
        nonlocal total
        if t.uid in seen or t.op is None:
            return
        seen.add(t.uid)
        for p in input_tensors(t):
            visit(p)
        n = float(math.prod(t.shape))
        body = t.op.body
        if isinstance(body, Reduce):
            steps = float(math.prod(a.extent for a in body.axes))
            total += n * steps * (_count_ops(body.body) + 1)
        else:
            total += n * _count_ops(body)

    for t in outputs:
        visit(t)
    return max(total, sum(float(math.prod(t.shape)) for t in outputs), 1.0)


def _count_ops(e: Expr) -> int:
    count = 0
    for x in walk(e):
        if not x.dtype.startswith("float"):
            continue
        if (isinstance(x, Binary) and x.op in _FLOAT_OPS) or isinstance(x, Call | Select):
            count += 1
    return count
