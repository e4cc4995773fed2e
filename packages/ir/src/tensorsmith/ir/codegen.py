"""The codegen plug-in interface.

A codegen distribution registers ``codegen(functions, target) -> Kernels`` under the
entry-point group ``tensorsmith.codegen``, named by target kind. This package imports
none of them: installing ``tensorsmith-codegen-spirv`` is what makes ``vulkan`` exist.
A CPU codegen also registers, under ``tensorsmith.resources``, a function that
describes the CPU a target compiles for (vector width, registers, caches): the default
schedules size their register tiles by it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol

from .errors import TargetError
from .target import BASELINE_CPU, PROVIDERS, CpuResources, Target
from .te.stmt import PrimFunc


class Kernels(Protocol):
    """What a codegen returns: compiled kernels that can be written into an artifact."""

    def export(self, path: str, plan: dict[str, Any], params: bytes) -> None:
        """Write the artifact at ``path``; ``plan`` is the metadata (execution plan)."""


CodegenFn = Callable[[list[PrimFunc], Target], Kernels]


def get_codegen(target: Target) -> CodegenFn:
    for ep in entry_points(group="tensorsmith.codegen"):
        if ep.name == target.kind:
            fn: CodegenFn = ep.load()
            return fn
    provider = PROVIDERS.get(target.kind, "a tensorsmith codegen distribution")
    raise TargetError(f"target {target.kind!r} is not available: install {provider} "
                      f"(pip install {provider})")


def target_resources(target: Target) -> CpuResources:
    """The CPU a ``cpu``-family target compiles for, as its codegen plug-in describes it
    (entry-point group ``tensorsmith.resources``, named by target kind: a function of the
    target); :data:`BASELINE_CPU` when no installed plug-in does. Asked once per target
    string: the tuner's builders lower every candidate with the default rules at hand."""
    return _resources(str(target))


@functools.cache
def _resources(target: str) -> CpuResources:
    tgt = Target.parse(target)
    for ep in entry_points(group="tensorsmith.resources"):
        if ep.name == tgt.kind:
            describe: Callable[[Target], CpuResources] = ep.load()
            return describe(tgt)
    return BASELINE_CPU
