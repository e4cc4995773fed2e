"""tensorsmith-codegen-llvm: tensor IR -> LLVM IR -> native code, and CPU artifacts."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from tensorsmith.ir.target import CpuResources, Target
from tensorsmith.ir.targets import TargetInfo
from tensorsmith.ir.te.stmt import PrimFunc

if TYPE_CHECKING:
    from tensorsmith.runtime.plan import Plan

try:
    __version__ = version("tensorsmith-codegen-llvm")
except PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__


@dataclass
class LLVMKernels:
    """The kernels of a model, emitted as LLVM IR and compiled on first use: one LLVM
    module per kernel, one object per chunk of kernels (compile_jobs.py spreads the
    chunks, emission included, over the cores)."""

    funcs: list[PrimFunc]
    target: Target
    _objects: list[bytes] | None = field(default=None, repr=False)

    @property
    def objects(self) -> list[bytes]:
        if self._objects is None:
            from .compile_jobs import compile_objects
            from .target_options import llvm_target

            self._objects = compile_objects(self.funcs, llvm_target(self.target))
        return self._objects

    def source(self, kind: str = "llvm") -> str:
        """The kernels' LLVM IR, module after module, as compiled for the target."""
        if kind in ("llvm", "ll"):
            from .compile_jobs import module_text
            from .target_options import llvm_target

            target = llvm_target(self.target)
            return "\n".join(module_text(f, target) for f in self.funcs)
        raise ValueError(f"no {kind!r} source for the llvm target; use 'llvm' or 'tir'")

    def export(self, path: str, plan: Plan, params: bytes) -> None:
        """Link the library beside ``path`` and make it the artifact in place, the weights
        appended as section ``params`` (page-aligned, mapped by the library when loaded:
        csrc/tsm_params.c) and ``params.id`` (the random id the plan carries too, so a
        library never runs with another build's weights)."""
        from tensorsmith.runtime.artifact import (
            PARAMS_ALIGN,
            PARAMS_ID_BYTES,
            check_metadata_text,
            export_errors,
            finish_artifact,
        )

        from .cpu_features import target_cpu_features
        from .link import link_shared
        from .plan_c import plan_source
        from .target_options import llvm_target

        metadata = {**plan.to_json(), "target": str(self.target),
                    "cpu_features": target_cpu_features(self.target)}
        check_metadata_text(metadata, path)  # names plan.c writes into C strings too
        params_id = os.urandom(PARAMS_ID_BYTES)
        plan_c = plan_source(plan, metadata, len(params), params_id)
        where = Path(path).resolve().parent
        with export_errors(path), tempfile.TemporaryDirectory(prefix=".tsm-export-",
                                                              dir=where) as tmp:
            so = Path(tmp) / "model.so"
            link_shared(lambda: self.objects, plan_c, so, llvm_target(self.target))
            finish_artifact(so, path, {"params": params, "params.id": params_id}, metadata,
                            align={"params": PARAMS_ALIGN})


def codegen(funcs: list[PrimFunc], target: Target) -> LLVMKernels:
    """The ``llvm`` entry point of the ``tensorsmith.codegen`` group. The target's options
    and, for another triple, the cross toolchain are checked here, before LLVM compiles
    anything (the kernels compile on first use)."""
    from .link import compiler
    from .target_options import llvm_target

    parsed = llvm_target(target)
    if not parsed.host:
        compiler(parsed)
    return LLVMKernels(funcs, target)


def describe_cpu(target: Target) -> CpuResources:
    """The CPU ``target`` compiles for (resources.py), asked of LLVM on first use."""
    from .resources import cpu_resources

    return cpu_resources(target)


#: The ``llvm`` target: CPU code, artifacts that are shared libraries run by the CPU device.
TARGET = TargetInfo(kind="llvm", family="cpu", device="cpu", suffix=".so", tunable=True,
                    describe_cpu=describe_cpu)

__all__ = ["TARGET", "LLVMKernels", "__version__", "codegen", "describe_cpu"]
