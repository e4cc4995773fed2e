"""One candidate -> a one-kernel artifact the runtime loads like any model.

The plan (the runtime's ``Plan``, as ``build`` writes it) has a single step: the kernel,
its inputs (the group's inputs, weights included, all plain artifact inputs so the runner
can feed them), outputs and scratch as workspace buffers. Every target goes through its
codegen plug-in's own ``export``, as ``build``'s modules do (for llvm, the C runtime
linked into every artifact is compiled once per builder process, so a candidate costs
one LLVM compile and one small link).
"""

from __future__ import annotations

import time
from pathlib import Path

from tensorsmith.ir.codegen import get_codegen
from tensorsmith.ir.lowering import lower_group
from tensorsmith.ir.passes.memory_plan import ALIGN
from tensorsmith.ir.schedules import default_schedule
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Step
from tensorsmith.ir.te.stmt import PrimFunc
from tensorsmith.runtime.plan import Buffer, Kernel, Plan, Tensor
from tensorsmith.runtime.plan import Step as PlanStep

from .records import versions
from .task import Task

KERNEL = "tsm_kernel_0"


def lower_candidate(task: Task, steps: list[Step] | None) -> PrimFunc:
    """The task's kernel with ``steps`` replayed; for None, the default schedule of the
    task's target (what ``build`` uses without records, so it is the baseline every
    candidate is compared with and timed against)."""
    return lower_group(task.group, KERNEL, default_schedule(task.target), steps,
                       task.constant_inputs, task.default_transforms,
                       Target.parse(task.target).family)


def kernel_plan(func: PrimFunc, step_name: str, target: Target) -> Plan:
    """An execution plan running ``func`` once on workspace buffers for all its params."""
    buffers, offset = [], 0
    for p in func.params:
        buffers.append(Buffer("workspace", offset, p.nbytes))
        offset += (p.nbytes + ALIGN - 1) // ALIGN * ALIGN

    layouts = func.attrs.get("layouts", {})

    def io(i: int, name: str) -> Tensor:
        p = func.params[i]
        # the runner transposes what it feeds an input with a layout (see runner_main)
        return Tensor(name, tuple(p.shape), p.dtype, i, layouts.get(i))

    n_in, n_out = func.num_inputs, func.num_outputs
    return Plan(
        target=str(target),
        device=target.info.device,
        inputs=tuple(io(i, f"in{i}") for i in range(n_in)),
        outputs=tuple(io(n_in + j, f"out{j}") for j in range(n_out)),
        kernels=(Kernel(func.name, tuple(func.attrs.get("ops", [])),
                        tuple(func.attrs.get("nodes", []))),),
        steps=(PlanStep(func.name, tuple(range(len(func.params))), step_name),),
        buffers=tuple(buffers),
        workspace_bytes=offset,
        memory={"planned_bytes": offset, "unplanned_bytes": offset},
        producer=versions(str(target)),
    )


def export_candidate(task: Task, steps: list[Step] | None, path: str | Path) -> float:
    """Lower, compile and link one candidate to ``path``; returns the seconds it took."""
    start = time.perf_counter()
    tgt = Target.parse(task.target)
    func = lower_candidate(task, steps)
    plan = kernel_plan(func, task.name, tgt)
    get_codegen(tgt)([func], tgt).export(str(path), plan, b"")
    return time.perf_counter() - start
