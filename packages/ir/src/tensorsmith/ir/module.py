"""The result of ``build``: optimized graph, kernels, plan and weights, ready to export."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorsmith.runtime.plan import Plan

from .errors import TargetError
from .graph import Graph
from .target import Target
from .te.stmt import PrimFunc


@dataclass
class CompiledModule:
    graph: Graph
    funcs: list[PrimFunc]
    plan: Plan
    params: bytes
    kernels: Any
    target: Target
    timings: list[tuple[str, float]] = field(default_factory=list)

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the one-file artifact (see docs/artifact.md); ``self.target.info.suffix``
        is the file suffix its target's artifacts are named with by default."""
        self.kernels.export(os.fspath(path), self.plan, self.params)

    def export_spirv(self, directory: str | os.PathLike) -> Path:
        """Plain SPIR-V modules, params.bin and manifest.json (docs/spirv-manifest.md), for
        Vulkan engines that run the model without tensorsmith's runtime. Vulkan target only;
        returns the manifest's path."""
        export = getattr(self.kernels, "export_spirv", None)
        if export is None:
            raise TargetError(f"export_spirv needs a module built for target 'vulkan'; this "
                              f"one was built for '{self.target.kind}'")
        return Path(export(os.fspath(directory), self.plan, self.params))

    def get_source(self, kind: str = "tir") -> str:
        """Tensor IR text (``tir``) or the codegen's own source (``llvm``, ``spirv``...)."""
        if kind == "tir":
            return "\n".join(str(f) for f in self.funcs)
        return self.kernels.source(kind)
