"""The check every GPU plan passes before its first dispatch (OpenCL and Vulkan alike).

A GPU runtime executes the plan stored in the artifact's metadata: buffer offsets and
sizes, each step's arguments, each dispatch's grid and workgroup. A wrong number there
does not fail cleanly: the kernels index their buffers without bounds checks, so a
param range past the weights, a workgroup other than the one compiled in, or an
argument list that does not fit the kernel reads or writes outside its buffers (wrong
output, or a crash inside the driver). Both runtimes describe their plan in the shape
below and call :func:`check_plan` once, at load; what each kernel declares
(``Declared``) comes from the kernel code itself, not from the metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tensorsmith.runtime.errors import ArtifactError, InputError
from tensorsmith.runtime.plan import Buffer, Check, Plan

__all__ = [
    "Declared",
    "GpuDispatch",
    "GpuStep",
    "check_plan",
    "raise_failed_check",
    "run_checks",
]

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class Declared:
    """What a dispatch's compiled code declares: its workgroup size (None where the code
    leaves it to the launch) and the parameter numbers it binds."""

    workgroup: Triple | None
    params: frozenset[int]


@dataclass(frozen=True)
class GpuDispatch:
    name: str
    grid: tuple[int | str, int | str, int | str]  # a size's text: counted per run
    workgroup: Triple
    #: (parameter number, index into the step's args) of each binding; None: the kernel
    #: takes every step argument, in order (OpenCL).
    bindings: tuple[tuple[int, int], ...] | None
    declared: Declared


@dataclass(frozen=True)
class GpuStep:
    name: str
    args: tuple[int, ...]
    dispatches: tuple[GpuDispatch, ...]


def check_plan(path: Path, buffers: Sequence[Buffer], steps: Sequence[GpuStep], *,
               params_bytes: int, workspace_bytes: int, max_grid: int | None = None) -> None:
    """Refuse, with an ArtifactError naming the field, a plan whose buffers leave their
    region (``params_bytes``: the params section's length) or whose dispatches do not fit
    their kernels or the grid limit the compiler keeps to (``max_grid`` per axis)."""
    for i, b in enumerate(buffers):
        _check_buffer(path, i, b, params_bytes, workspace_bytes)
    for step in steps:
        for a in step.args:
            if not (type(a) is int and 0 <= a < len(buffers)):
                raise _bad(path, f"step {step.name!r} passes buffer {a!r} and the plan has "
                                 f"{len(buffers)} buffers")
        for d in step.dispatches:
            _check_dispatch(path, step, d, max_grid)


def _check_buffer(path: Path, index: int, b: Buffer, params_bytes: int,
                  workspace_bytes: int) -> None:
    kind, offset, nbytes = b.kind, b.offset, b.nbytes
    if kind not in ("param", "workspace"):
        raise _bad(path, f"buffer {index} is {b.to_json()!r}")
    limit, region = ((params_bytes, "params section") if kind == "param"
                     else (workspace_bytes, "workspace"))
    if offset + nbytes > limit:
        raise _bad(path, f"{kind} buffer {index} lies at bytes {offset}..{offset + nbytes} "
                         f"of a {limit}-byte {region}")


def _check_dispatch(path: Path, step: GpuStep, d: GpuDispatch, max_grid: int | None) -> None:
    where = f"dispatch {d.name} of step {step.name!r}"
    if max_grid is not None and any(isinstance(g, int) and g > max_grid for g in d.grid):
        raise _bad(path, f"{where} has grid {list(d.grid)}, beyond the {max_grid} workgroups "
                         "per axis the compiler emits")
    if d.declared.workgroup is not None and d.workgroup != d.declared.workgroup:
        raise _bad(path, f"{where} has workgroup {list(d.workgroup)} and its kernel is "
                         f"compiled for {list(d.declared.workgroup)}")
    bindings = d.bindings
    if bindings is None:
        bindings = tuple((i, i) for i in range(len(step.args)))
    if {n for n, _ in bindings} != d.declared.params or len(bindings) != len(d.declared.params):
        raise _bad(path, f"{where} binds parameters {sorted(n for n, _ in bindings)} and its "
                         f"kernel takes {sorted(d.declared.params)}")
    for _, arg in bindings:
        if not 0 <= arg < len(step.args):
            raise _bad(path, f"{where} binds argument {arg} of a step with "
                             f"{len(step.args)} arguments")


def _bad(path: Path, what: str) -> ArtifactError:
    return ArtifactError(f"artifact '{path}' is inconsistent: {what}; re-export it")


def run_checks(path: Path, plan: Plan) -> tuple[Check, ...]:
    """The plan's checks of every run, each naming a buffer of at least 4 bytes (older
    artifacts have none). A GPU runtime reads each flag back after its last dispatch."""
    for i, c in enumerate(plan.checks):
        if not (c.buffer < len(plan.buffers) and plan.buffers[c.buffer].nbytes >= 4):
            raise _bad(path, f"check {i} is {c.to_json()!r}")
    return plan.checks


def raise_failed_check(path: Path, checks: Sequence[Check],
                       read_flag: Callable[[int, Check], int]) -> None:
    """After a run: ``read_flag(k, check)`` reads check ``k``'s int32 flag back from the
    device; the first one set fails the run with its message (the CPU library does the
    same in tsm_model_run)."""
    for k, check in enumerate(checks):
        if read_flag(k, check) != 0:
            raise InputError(f"artifact '{path}': {check.message}")
