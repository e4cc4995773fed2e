"""The codegen plug-in interface.

A codegen distribution registers ``codegen(functions, target) -> Kernels`` under the
entry-point group ``tensorsmith.codegen``, named by target kind, and describes its target
in a ``TARGET`` record beside it (targets.py). This package imports none of them:
installing ``tensorsmith-codegen-spirv`` is what makes ``vulkan`` exist.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .errors import TargetError
from .target import BASELINE_CPU, BASELINE_GPU, CpuResources, GpuResources, Target
from .targets import codegen_entry_point
from .te.stmt import PrimFunc

if TYPE_CHECKING:
    from tensorsmith.runtime.plan import Plan


class Kernels(Protocol):
    """What a codegen returns: compiled kernels that can be written into an artifact."""

    def export(self, path: str, plan: Plan, params: bytes) -> None:
        """Write the artifact at ``path``: the kernels, ``params`` (the weights the plan's
        ``param`` buffers index) and ``plan.to_json()`` in its metadata, which the
        runtime reads back (tensorsmith.runtime.plan)."""


CodegenFn = Callable[[list[PrimFunc], Target], Kernels]


def get_codegen(target: Target) -> CodegenFn:
    """The codegen function of ``target``'s plug-in (a TargetError if none is installed)."""
    fn: CodegenFn = codegen_entry_point(target.kind).load()
    return fn


def refuse_intrinsics(functions: list[PrimFunc], target: Target) -> None:
    """A TargetError naming the first kernel that uses an intrinsic statement
    (te/matrix.py): for codegens whose target has none, so a tensorized schedule (a
    tuning record of another target, say) fails plainly instead of deep in the emitter."""
    from .te.stmt import Intrinsic
    from .te.visit import walk_stmts

    for f in functions:
        found = next((s for s in walk_stmts(f.body) if isinstance(s, Intrinsic)), None)
        if found is not None:
            raise TargetError(
                f"kernel {f.name} uses cooperative-matrix statements ({type(found).__name__}"
                f"), which target '{target}' does not have; they come from a tensorize "
                "step, which the default rules take only for a vulkan target with "
                "-cooperative-matrix")


def target_resources(target: Target) -> CpuResources:
    """The CPU a ``cpu``-family target compiles for, as its codegen plug-in describes it
    (its record's ``describe_cpu``); :data:`BASELINE_CPU` when the record has none. Asked
    once per target string: the tuner's builders lower every candidate with the default
    rules at hand."""
    return _resources(str(target))


@functools.cache
def _resources(target: str) -> CpuResources:
    tgt = Target.parse(target)
    describe = tgt.info.describe_cpu
    return BASELINE_CPU if describe is None else describe(tgt)


def gpu_resources(target: Target) -> GpuResources:
    """The GPU a ``gpu``-family target compiles for, as its codegen plug-in describes it
    (its record's ``describe_gpu``); :data:`BASELINE_GPU` when the record has none."""
    return _gpu_resources(str(target))


@functools.cache
def _gpu_resources(target: str) -> GpuResources:
    tgt = Target.parse(target)
    describe = tgt.info.describe_gpu
    return BASELINE_GPU if describe is None else describe(tgt)
