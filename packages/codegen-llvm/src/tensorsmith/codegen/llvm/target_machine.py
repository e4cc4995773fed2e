"""LLVM initialisation, the target machine for a target string, and the -O3 pipeline."""

from __future__ import annotations

import functools

import llvmlite.binding as llvm


@functools.cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def target_machine(cpu: str = "", features: str = "") -> llvm.TargetMachine:
    """A PIC target machine for the host triple; ``cpu`` '' means the host CPU."""
    _init()
    if not cpu or cpu == "native":
        cpu = llvm.get_host_cpu_name()
        features = features or llvm.get_host_cpu_features().flatten()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic",
                                        codemodel="default")


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def compile_modules(modules: list[str], cpu: str = "", features: str = "") -> bytes:
    """Parse and verify each textual LLVM module, link them into one, optimise it and
    emit an ELF object."""
    tm = target_machine(cpu, features)
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
