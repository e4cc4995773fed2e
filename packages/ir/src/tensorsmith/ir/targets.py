"""The installed targets: each codegen plug-in's record of the target it provides.

A codegen distribution registers ``codegen(functions, target) -> Kernels`` under the
entry-point group ``tensorsmith.codegen``, named by the target's kind, and defines
``TARGET``, a :class:`TargetInfo`, in the module that entry point names. Everything the
compiler and its tools need to know about a target is read from that record: which
default rules schedule it, which runtime device runs its artifacts and what their files
are called, whether the tuner can measure it, the CPU it compiles for. So installing a
plug-in is all it takes to add a target, and nothing else keeps a list of them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from .errors import TargetError

if TYPE_CHECKING:
    from .target import CpuResources, GpuResources, Target

__all__ = ["FAMILIES", "GROUP", "INSTALL_HINTS", "TargetInfo", "codegen_entry_point",
           "installed_kinds", "target_info"]

#: The entry-point group codegen plug-ins register in, one entry point per target kind.
GROUP = "tensorsmith.codegen"
#: What a target's family decides: the default rules that schedule its kernels
#: (schedules/), and for ``cpu`` the passes that assume one workspace in host memory
#: (channel-blocked convolutions, Concats done in place).
FAMILIES = ("cpu", "gpu")

#: The distributions of this project that provide targets, named in the error when one of
#: these kinds is asked for and is not installed. A hint only: a target is available when
#: its plug-in is installed, whoever wrote it, and nothing reads a target's facts here.
INSTALL_HINTS = {"llvm": "tensorsmith-codegen-llvm", "vulkan": "tensorsmith-codegen-spirv",
                 "opencl": "tensorsmith-codegen-opencl"}


@dataclass(frozen=True)
class TargetInfo:
    """A codegen plug-in's description of its target (``TARGET`` beside its entry point).

    ``device`` is the runtime device kind whose executor runs the artifacts ("cpu",
    "vulkan", "opencl": ``tensorsmith.runtime.load(path, device=...)``); ``build`` writes
    it into the plan, so the runtime needs no list of targets. ``suffix`` ends the
    artifact's file name where the user names none (``tensorsmith compile``): one per
    target, so artifacts of one model for several targets do not overwrite each other.
    ``tunable``: the auto-tuner may search its schedules (its default rules ask for
    knobs and its device can time a kernel). ``describe_cpu`` describes the CPU a
    ``cpu``-family target compiles for (vector width, registers, caches), which the
    default rules size their tiles by; without one the rules assume
    :data:`~tensorsmith.ir.target.BASELINE_CPU`. It may raise TargetError for a bad
    target option, before anything is lowered. ``describe_gpu`` does the same for a
    ``gpu``-family target (cooperative matrices, workgroup memory); without one the rules
    assume :data:`~tensorsmith.ir.target.BASELINE_GPU`. ``refused_dtypes`` are the dtypes
    its kernels cannot hold: ``build`` refuses a graph with a tensor of one, naming the
    tensor, the dtype and the target, before lowering. ``distribution`` is filled in from
    the entry point's distribution when the record is loaded.
    """

    kind: str
    family: str
    device: str
    suffix: str
    tunable: bool = False
    describe_cpu: Callable[[Target], CpuResources] | None = None
    describe_gpu: Callable[[Target], GpuResources] | None = None
    refused_dtypes: frozenset[str] = frozenset()
    distribution: str = ""


def installed_kinds() -> list[str]:
    """The kinds of the targets installed plug-ins provide, sorted."""
    return sorted(_entry_points(tuple(sys.path)))


def target_info(kind: str) -> TargetInfo:
    """The record of the installed target ``kind``, or a TargetError saying what to
    install (for this project's own targets) or which targets there are."""
    return _info(tuple(sys.path), kind)


def codegen_entry_point(kind: str) -> EntryPoint:
    """The ``tensorsmith.codegen`` entry point of the installed target ``kind``."""
    found = _entry_points(tuple(sys.path)).get(kind)
    if found is None:
        raise _not_installed(kind)
    return found


# Both caches are keyed by sys.path, where installed distributions are found: a plug-in
# made visible by adding its folder to sys.path is found at once, and a process that never
# changes sys.path reads the entry points once.
@functools.cache
def _entry_points(path: tuple[str, ...]) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)  # the first on sys.path wins, as imports do
    return found


@functools.cache
def _info(path: tuple[str, ...], kind: str) -> TargetInfo:
    ep = _entry_points(path).get(kind)
    if ep is None:
        raise _not_installed(kind)
    record = getattr(import_module(ep.module), "TARGET", None)
    dist = ep.dist.name if ep.dist is not None else ""
    plugin = f"the {kind!r} plug-in ({ep.value}{f', from {dist}' if dist else ''})"
    if not isinstance(record, TargetInfo):
        raise TargetError(f"{plugin} defines no TARGET record (a tensorsmith.ir.targets."
                          f"TargetInfo) in {ep.module}; it cannot be used")
    problems = [f"its kind is {record.kind!r}"] if record.kind != kind else []
    if record.family not in FAMILIES:
        problems.append(f"its family {record.family!r} is not one of {', '.join(FAMILIES)}")
    if not record.device:
        problems.append("it names no runtime device")
    if not record.suffix.startswith(".") or "/" in record.suffix:
        problems.append(f"its artifact suffix {record.suffix!r} is not a file suffix")
    if problems:
        raise TargetError(f"{plugin} has a bad TARGET record: {'; '.join(problems)}")
    return replace(record, distribution=record.distribution or dist)


def _not_installed(kind: str) -> TargetError:
    have = ", ".join(installed_kinds()) or "none"
    provider = INSTALL_HINTS.get(kind)
    if provider is not None:
        return TargetError(f"target {kind!r} is not available: install {provider} "
                           f"(pip install {provider}); installed targets: {have}")
    return TargetError(f"unknown target {kind!r}; installed targets: {have} (a codegen "
                       f"plug-in adds its target when it is installed)")
