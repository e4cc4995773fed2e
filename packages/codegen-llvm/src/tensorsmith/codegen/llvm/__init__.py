"""tensorsmith-codegen-llvm: tensor IR -> LLVM IR -> native code, and CPU artifacts."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tensorsmith.ir.target import Target
from tensorsmith.ir.te.stmt import PrimFunc

try:
    __version__ = version("tensorsmith-codegen-llvm")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"


@dataclass
class LLVMKernels:
    """LLVM IR for all kernels of a model, compiled once to one object on first use."""

    llvm_ir: str
    target: Target
    _object: bytes | None = field(default=None, repr=False)

    @property
    def object_code(self) -> bytes:
        if self._object is None:
            from .target_machine import compile_to_object

            self._object = compile_to_object(self.llvm_ir, self.target.options.get("mcpu", ""))
        return self._object

    def source(self, kind: str = "llvm") -> str:
        if kind in ("llvm", "ll"):
            return self.llvm_ir
        raise ValueError(f"no {kind!r} source for the llvm target; use 'llvm' or 'tir'")

    def export(self, path: str, plan: dict[str, Any], params: bytes) -> None:
        from tensorsmith.runtime.artifact import write_artifact

        from .link import link_shared
        from .plan_c import plan_source

        metadata = {**plan, "target": str(self.target)}
        with tempfile.TemporaryDirectory(prefix="tsm-export-") as tmp:
            so = Path(tmp) / "model.so"
            link_shared(self.object_code, plan_source(plan, metadata), params, so)
            write_artifact(path, so.read_bytes(), {}, metadata)


def codegen(funcs: list[PrimFunc], target: Target) -> LLVMKernels:
    """The ``llvm`` entry point of the ``tensorsmith.codegen`` group."""
    from .emit import emit_module

    return LLVMKernels(str(emit_module(funcs)), target)


__all__ = ["LLVMKernels", "codegen"]
