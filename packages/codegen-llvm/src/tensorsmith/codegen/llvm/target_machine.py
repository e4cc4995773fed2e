"""LLVM initialisation, the target machine of an ``llvm`` target, and the -O3 pipeline."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import llvmlite.binding as llvm

if TYPE_CHECKING:
    from .target_options import LlvmTarget


@functools.cache
def init_llvm(foreign: bool = False) -> None:
    """Register the host's code generator, and every other one LLVM has when ``foreign``:
    a host build never pays for (nor depends on) the architectures it does not use."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    if foreign:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()


@functools.cache
def target_machine(target: LlvmTarget) -> llvm.TargetMachine:
    """A PIC target machine for ``target``'s triple, processor and features (checked by
    target_options.py before they get here: LLVM ignores names it does not know)."""
    init_llvm(foreign=not target.host)
    return llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.attrs, opt=3, reloc="pic", codemodel="default"
    )


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def compile_modules(modules: list[str], target: LlvmTarget) -> bytes:
    """Parse and verify each textual LLVM module, link them into one, optimise it and
    emit an ELF object for ``target``."""
    tm = target_machine(target)
    linked = None
    for text in modules:
        mod = llvm.parse_assembly(text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        if linked is None:
            linked = mod
        else:
            linked.link_in(mod)
    assert linked is not None, "no modules to compile"
    optimize(linked, tm)
    return tm.emit_object(linked)
