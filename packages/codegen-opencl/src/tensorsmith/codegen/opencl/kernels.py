"""The opencl target's compiled module: OpenCL C source plus its dispatch table.

Nothing here needs an OpenCL device: the source is compiled by the runtime on the
machine that runs it (the driver's compiler is the only one that knows the device), so
building for ``opencl`` works anywhere and the artifact carries source, not binaries.
The artifact layout is documented in docs/artifact.md ("OpenCL artifacts").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorsmith.ir.target import Target
from tensorsmith.runtime.plan import PARAMS_SECTION, Plan

from .emit import Program

#: name of the section holding the program's OpenCL C source (UTF-8)
SOURCE_SECTION = "opencl.source"
#: version of the "opencl" metadata entry, bumped when its meaning changes
OPENCL_METADATA_VERSION = 1


@dataclass
class OpenCLKernels:
    """Every kernel of a model as one OpenCL C program, and how the runtime runs it."""

    program: Program
    target: Target

    def source(self, kind: str = "opencl") -> str:
        if kind in ("opencl", "cl"):
            return self.program.source
        raise ValueError(f"no {kind!r} source for the opencl target; use 'opencl' or 'tir'")

    def metadata(self) -> dict[str, Any]:
        """The artifact's "opencl" entry: dispatches per kernel, extensions, build options."""
        return {
            "version": OPENCL_METADATA_VERSION,
            "source_section": SOURCE_SECTION,
            "params_section": PARAMS_SECTION,
            "build_options": self.target.options.get("build-options", ""),
            "extensions": list(self.program.extensions),
            "kernels": self.program.dispatches,
        }

    def export(self, path: str, plan: Plan, params: bytes) -> None:
        from tensorsmith.runtime.artifact import write_artifact

        metadata = {**plan.to_json(), "target": str(self.target), "opencl": self.metadata()}
        sections = {SOURCE_SECTION: self.program.source.encode("utf-8"), PARAMS_SECTION: params}
        write_artifact(path, b"", sections, metadata)
