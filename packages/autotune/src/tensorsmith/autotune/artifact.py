"""One candidate -> a one-kernel artifact the runtime loads like any model.

The plan has a single step: the kernel, its inputs (the group's inputs, weights
included, all plain artifact inputs so the runner can feed them), outputs and scratch
as workspace buffers. For llvm the C runtime linked into every artifact is compiled
once per builder process and reused, so a candidate costs one LLVM compile and one
small link instead of a full C build; other targets go through their codegen's own
``export``.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tensorsmith.ir.codegen import get_codegen
from tensorsmith.ir.lowering import lower_group
from tensorsmith.ir.passes.memory_plan import ALIGN
from tensorsmith.ir.schedules import default_schedule
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Step
from tensorsmith.ir.te.stmt import PrimFunc

from .records import versions
from .task import Task

KERNEL = "tsm_kernel_0"


def lower_candidate(task: Task, steps: list[Step] | None) -> PrimFunc:
    """The task's kernel with ``steps`` replayed; for None, the default schedule of the
    task's target (what ``build`` uses without records, so it is the baseline every
    candidate is compared with and timed against)."""
    return lower_group(task.group, KERNEL, default_schedule(task.target), steps,
                       task.constant_inputs)


def kernel_plan(func: PrimFunc, step_name: str, target: Target) -> dict[str, Any]:
    """An execution plan running ``func`` once on workspace buffers for all its params."""
    buffers, offset = [], 0
    for p in func.params:
        buffers.append({"kind": "workspace", "offset": offset, "nbytes": p.nbytes})
        offset += (p.nbytes + ALIGN - 1) // ALIGN * ALIGN

    layouts = func.attrs.get("layouts", {})

    def io(i: int, name: str) -> dict[str, Any]:
        p = func.params[i]
        info = {"name": name, "shape": list(p.shape), "dtype": p.dtype, "buffer": i}
        if i in layouts:  # the runner transposes what it feeds here (see runner_main)
            info["layout"] = layouts[i]
        return info

    n_in, n_out = func.num_inputs, func.num_outputs
    return {
        "target": str(target),
        "inputs": [io(i, f"in{i}") for i in range(n_in)],
        "outputs": [io(n_in + j, f"out{j}") for j in range(n_out)],
        "kernels": [{"name": func.name, "ops": func.attrs.get("ops", []),
                     "nodes": func.attrs.get("nodes", [])}],
        "steps": [{"kernel": func.name, "name": step_name,
                   "args": list(range(len(func.params)))}],
        "buffers": buffers,
        "workspace_bytes": offset,
        "params_bytes": 0,
        "memory": {"planned_bytes": offset, "unplanned_bytes": offset},
        "producer": versions(),
    }


def export_candidate(task: Task, steps: list[Step] | None, path: str | Path) -> float:
    """Lower, compile and link one candidate to ``path``; returns the seconds it took."""
    start = time.perf_counter()
    tgt = Target.parse(task.target)
    func = lower_candidate(task, steps)
    plan = kernel_plan(func, task.name, tgt)
    if tgt.kind == "llvm" and _fast_llvm_available():
        _export_llvm(func, plan, tgt, Path(path))
    else:
        get_codegen(tgt)([func], tgt).export(str(path), plan, b"")
    return time.perf_counter() - start


def _fast_llvm_available() -> bool:
    try:
        import tensorsmith.codegen.llvm.link  # noqa: F401
        import tensorsmith.codegen.llvm.plan_c  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _runtime_objects() -> tuple[str, ...]:
    """The artifact's C runtime, compiled once per process into a temporary folder."""
    from tensorsmith.codegen.llvm.link import CFLAGS, csrc_dir, find_cc
    from tensorsmith.runtime import get_include

    cc, csrc = find_cc(), csrc_dir()
    folder = Path(tempfile.mkdtemp(prefix="tsm-tune-rt-"))
    atexit.register(shutil.rmtree, folder, True)
    objects = []
    for src in sorted(csrc.glob("*.c")):
        obj = folder / (src.stem + ".o")
        cmd = [cc, *CFLAGS, "-I", str(csrc), "-I", get_include(), "-c", str(src), "-o", str(obj)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"compiling {src.name} failed: {result.stderr[-2000:]}")
        objects.append(str(obj))
    return tuple(objects)


def _export_llvm(func: PrimFunc, plan: dict[str, Any], tgt: Target, path: Path) -> None:
    from tensorsmith.codegen.llvm import codegen
    from tensorsmith.codegen.llvm.link import CFLAGS, csrc_dir, find_cc
    from tensorsmith.codegen.llvm.plan_c import PARAMS_ASM, plan_source
    from tensorsmith.runtime import get_include
    from tensorsmith.runtime.artifact import write_artifact

    objects = _runtime_objects()
    metadata = {**plan, "target": str(tgt)}
    kernels = codegen([func], tgt)
    with tempfile.TemporaryDirectory(prefix="tsm-tune-link-") as tmp:
        d = Path(tmp)
        names = [f"kernels{i}.o" for i in range(len(kernels.objects))]
        for name, data in zip(names, kernels.objects, strict=True):
            (d / name).write_bytes(data)
        (d / "plan.c").write_text(plan_source(plan, metadata))
        (d / "params.bin").write_bytes(b"")
        (d / "params.S").write_text(PARAMS_ASM)
        cmd = [find_cc(), *CFLAGS, "-shared", "-I", str(csrc_dir()), "-I", get_include(),
               "plan.c", *objects, *names, "params.S", "-o", "model.so", "-lpthread",
               "-lm"]
        result = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"linking the candidate failed: {result.stderr[-2000:]}")
        write_artifact(path, (d / "model.so").read_bytes(), {}, metadata)
