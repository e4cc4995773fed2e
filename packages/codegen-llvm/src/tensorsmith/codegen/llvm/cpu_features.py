"""The instruction-set extensions an ``llvm`` target's kernels may use, for the metadata.

LLVM compiles the kernels for one processor and feature string: the build host's, unless
the target names another with ``-mcpu`` and changes it with ``-mattr``. An artifact run
on a CPU that lacks one of those extensions dies of SIGILL at its first kernel. The
artifact therefore lists them (``cpu_features``), and the runtime compares the list with
the CPU before it loads the library (``tensorsmith.runtime.cpu_features``), as does the
library's own ``tsm_model_create`` (``plan_c.cpu_check_source``).

What a processor has is asked of LLVM itself, with no table of CPU names to keep: LLVM's
inliner never inlines a function compiled for features its caller lacks (the inlined code
could use instructions the caller's CPU does not have). So a small module is optimised
whose one function, compiled for the target, calls one function per extension, each
compiled for the target's features plus that extension: a call that gets inlined names
an extension the target already has. That holds alike for the host's CPU, any ``-mcpu``
LLVM knows and the implications of ``-mattr`` (``+avx512bw`` brings ``avx512f``,
``-avx2`` takes every AVX-512 extension with it).

The list is restricted to the extensions the runtime can test (its ``CHECKED_FEATURES``),
which leaves out what no kernel uses and no loader can see (``shstk``, ``xsave``...).

The kernel emitter asks the same question (:func:`compiled_features`) before it uses an
instruction only some CPUs have; for AArch64 it is asked of the few extensions the
emitter uses (:data:`AARCH64_EMITTED`), by the same probe: the inliner's rule holds for
every architecture LLVM compiles for, and these names need no x86 host to list them.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import llvmlite.binding as llvm

from tensorsmith.ir.target import Target
from tensorsmith.runtime.cpu_features import CHECKED_FEATURES

if TYPE_CHECKING:
    from .target_options import LlvmTarget

_X86 = ("x86_64", "i386")  # LLVM's names (get_triple_parts) of the architectures answered
_AARCH64 = ("aarch64", "aarch64_be")
#: AArch64 extensions (LLVM's names) the emitter may use: the four-byte dot products,
#: ``udot``/``sdot`` (dotprod) and the mixed-sign ``usdot`` (i8mm) (dot4.py).
AARCH64_EMITTED = ("dotprod", "i8mm")


def target_cpu_features(target: Target) -> list[str]:
    """The extensions an ``llvm`` target's code may use: its processor and feature string
    as target_options.llvm_target resolves them for the compile (the host's processor
    with all of its features unless ``-mcpu`` names another, then ``-mattr``'s)."""
    from .target_options import llvm_target

    return list(_required(llvm_target(target)))


def required_features(triple: str, cpu: str, attrs: str) -> list[str]:
    """The extensions, sorted by LLVM's names, that code compiled for processor ``cpu``
    with feature string ``attrs`` may use.

    Only x86 triples are answered, and only on an x86 build host, the one whose LLVM
    names the candidates (``get_host_cpu_features`` lists every x86 feature it knows):
    for any other triple (AArch64 included) the list is empty for now, so the runtime
    checks nothing there.
    """
    from .target_options import LlvmTarget

    host = triple == llvm.get_process_triple()
    return list(_required(LlvmTarget(triple, cpu, attrs, host)))


def compiled_features(target: LlvmTarget) -> tuple[str, ...]:
    """The extensions code compiled for the resolved ``target`` may use (what the kernel
    emitter asks before it uses an instruction only some CPUs have). On AArch64, those of
    :data:`AARCH64_EMITTED` it has (the metadata lists none there: the runtime checks
    only x86 CPUs so far)."""
    if target.arch in _AARCH64:
        return _emitted_aarch64(target)
    return _required(target)


@functools.cache
def _emitted_aarch64(target: LlvmTarget) -> tuple[str, ...]:
    return tuple(_probe(target, list(AARCH64_EMITTED)))


@functools.cache
def _required(target: LlvmTarget) -> tuple[str, ...]:
    own = llvm.get_process_triple()
    arches = {str(llvm.get_triple_parts(t).Arch) for t in (target.triple, own)}
    if not arches <= set(_X86):
        return ()
    # A name this LLVM does not know would be ignored, so its probe would be inlined and
    # the feature reported present: probe only the names it lists.
    candidates = sorted(CHECKED_FEATURES & set(llvm.get_host_cpu_features()))
    return tuple(_probe(target, candidates))


def _probe(target: LlvmTarget, candidates: list[str]) -> list[str]:
    """The candidates that LLVM's inliner finds within ``target``'s processor and
    features (compiled by the same target machine as the kernels)."""
    from .target_machine import optimize, target_machine

    tm = target_machine(target)
    mod = llvm.parse_assembly(_probe_module(target.attrs, candidates))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    optimize(mod, tm)
    kept = {int(i) for i in re.findall(r"@tsm_has_(\d+)\(", str(mod.get_function("tsm_probe")))}
    return [name for i, name in enumerate(candidates) if i not in kept]


def _probe_module(attrs: str, candidates: list[str]) -> str:
    """LLVM IR: ``tsm_probe`` (the target's own features) calls ``tsm_has_<i>``, compiled
    for the same features plus candidate i. Each callee calls an external function, so a
    call that is not inlined stays in the optimised code."""
    lines = ["declare void @tsm_probe_sink(i32)"]
    calls = []
    for i, name in enumerate(candidates):
        features = ",".join(f for f in (attrs, f"+{name}") if f)
        lines += [
            f"define internal void @tsm_has_{i}() #{i} {{",
            f"  call void @tsm_probe_sink(i32 {i})",
            "  ret void",
            "}",
            f'attributes #{i} = {{ "target-features"="{features}" }}',
        ]
        calls.append(f"  call void @tsm_has_{i}()")
    lines += ["define void @tsm_probe() {", *calls, "  ret void", "}"]
    return "\n".join(lines) + "\n"
