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

            self._objects = compile_objects(self.funcs, self.target.options.get("mcpu", ""))
        return self._objects

    def source(self, kind: str = "llvm") -> str:
        """The kernels' LLVM IR, module after module."""
        if kind in ("llvm", "ll"):
            from .compile_jobs import module_text

            return "\n".join(module_text(f) for f in self.funcs)
        raise ValueError(f"no {kind!r} source for the llvm target; use 'llvm' or 'tir'")

    def export(self, path: str, plan: dict[str, Any], params: bytes) -> None:
        """Link the library beside ``path`` and make it the artifact in place: with the
        weights inside it can be hundreds of megabytes, never read back or copied."""
        from tensorsmith.runtime.artifact import finish_artifact

        from .link import link_shared
        from .plan_c import plan_source

        metadata = {**plan, "target": str(self.target)}
        where = Path(path).resolve().parent
        with tempfile.TemporaryDirectory(prefix=".tsm-export-", dir=where) as tmp:
            so = Path(tmp) / "model.so"
            link_shared(lambda: self.objects, plan_source(plan, metadata), params, so)
            finish_artifact(so, path, {}, metadata)


def codegen(funcs: list[PrimFunc], target: Target) -> LLVMKernels:
    """The ``llvm`` entry point of the ``tensorsmith.codegen`` group."""
    return LLVMKernels(funcs, target)


__all__ = ["LLVMKernels", "codegen"]
