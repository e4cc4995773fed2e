"""SpirvKernels: the compiled dispatches of a model, and how they are written out.

Two outputs share one description of the dispatches (``dispatch_records``):

* the one-file artifact (docs/artifact.md): sections ``spirv/<dispatch>`` and
  ``params``, and a ``vulkan`` metadata key the runtime's Vulkan executor reads;
* ``export_spirv(dir)``: plain ``.spv`` files, ``params.bin`` and ``manifest.json``
  (docs/spirv-manifest.md) for engines that do not use our runtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import Target
from tensorsmith.runtime.plan import PARAMS_SECTION, Plan

from .emit import SpirvModule
from .spec import VERSION_1_3, VULKAN_OF_VERSION
from .tools import disassemble, validate

#: Version of the ``vulkan`` metadata key; the runtime refuses newer ones.
METADATA_VERSION = 1
#: Features the kernels on workgroup-held matrices need (VK_NV_cooperative_matrix2): no
#: SPIR-V capability names them, so they are listed by hand.
WORKGROUP_MATRIX_FEATURES = ("cooperativeMatrixWorkgroupScope",
                             "cooperativeMatrixFlexibleDimensions")
#: Device extensions a Vulkan 1.1 device needs for a feature (core from Vulkan 1.2 on).
EXTENSION_OF_FEATURE = {"storageBuffer8BitAccess": "VK_KHR_8bit_storage",
                        "shaderFloat16": "VK_KHR_shader_float16_int8",
                        "shaderInt8": "VK_KHR_shader_float16_int8",
                        "vulkanMemoryModel": "VK_KHR_vulkan_memory_model",
                        "cooperativeMatrix": "VK_KHR_cooperative_matrix",
                        "cooperativeMatrixWorkgroupScope": "VK_NV_cooperative_matrix2",
                        "cooperativeMatrixFlexibleDimensions": "VK_NV_cooperative_matrix2"}


@dataclass
class SpirvKernels:
    """Every kernel of a model as its dispatches, in order, each one SPIR-V module."""

    kernels: dict[str, list[SpirvModule]]
    target: Target

    # ---- inspection --------------------------------------------------------------------

    def modules(self) -> list[SpirvModule]:
        return [m for mods in self.kernels.values() for m in mods]

    def validate(self) -> None:
        """Run spirv-val on every module (raises TargetError on the first invalid one)."""
        for m in self.modules():
            validate(m.binary, m.name, VULKAN_OF_VERSION[m.version])

    def features(self) -> list[str]:
        held = WORKGROUP_MATRIX_FEATURES if self.workgroup_matrix() else ()
        return sorted({*held, *(f for m in self.modules() for f in m.features)})

    def versions(self) -> tuple[str, str]:
        """The SPIR-V version of the kernels (the newest any needs) and the Vulkan version
        that runs it: 1.3 and 1.1, or 1.6 and 1.3 where a kernel uses matrices a workgroup
        holds (SPV_NV_cooperative_matrix2 requires SPIR-V 1.6)."""
        newest = max((m.version for m in self.modules()), default=VERSION_1_3)
        return f"{newest >> 16}.{(newest >> 8) & 0xFF}", VULKAN_OF_VERSION[newest][6:]

    def workgroup_matrix(self) -> dict[str, Any] | None:
        """What the kernels assume of matrices a workgroup holds: the block products, each
        with the workgroup size it runs in (``128x256x32/256 float16*float16+float32``);
        None if they use none."""
        shapes = sorted({s for m in self.modules() for s in m.workgroup_matrix_shapes})
        return {"shapes": shapes} if shapes else None

    def cooperative_matrix(self) -> dict[str, Any] | None:
        """What the kernels assume of the device's cooperative matrices: the shapes they
        multiply with and the subgroup size they were built for; None if they use none."""
        shapes = sorted({s for m in self.modules() for s in m.matrix_shapes})
        if not shapes:
            return None
        from .resources import describe_gpu

        return {"shapes": shapes, "subgroup_size": describe_gpu(self.target).subgroup_size}

    def matrix_requirements(self) -> dict[str, Any]:
        """``cooperative_matrix`` and ``workgroup_matrix``, those the kernels have: what
        the artifact's metadata and the manifest both require of a device."""
        found = {"cooperative_matrix": self.cooperative_matrix(),
                 "workgroup_matrix": self.workgroup_matrix()}
        return {k: v for k, v in found.items() if v is not None}

    def source(self, kind: str = "spirv") -> str:
        if kind not in ("spirv", "spv", "spirv-asm"):
            raise ValueError(f"no {kind!r} source for the vulkan target; use 'spirv' or 'tir'")
        parts = []
        for m in self.modules():
            text = disassemble(m.binary)
            if text is None:
                text = ("; spirv-dis not found (apt-get install spirv-tools): "
                        f"{len(m.binary)} bytes, capabilities {', '.join(m.capabilities)}\n")
            parts.append(f"; ---- dispatch {m.name}: grid {list(m.grid)}, workgroup "
                         f"{list(m.workgroup_size)}, entry point {m.entry_point}\n{text}")
        return "\n".join(parts)

    # ---- the artifact ------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The ``vulkan`` key of the artifact's metadata (see docs/spirv-manifest.md)."""
        features = self.features()
        extra = self.matrix_requirements()
        spirv_version, vulkan_version = self.versions()
        return {
            "version": METADATA_VERSION,
            "spirv_version": spirv_version,
            "vulkan_version": vulkan_version,
            "features": features,
            **extra,
            "kernels": [
                {"name": name, "dispatches": [_dispatch_meta(m) for m in mods]}
                for name, mods in self.kernels.items()
            ],
        }

    def export(self, path: str, plan: Plan, params: bytes) -> None:
        from tensorsmith.runtime.artifact import write_artifact

        sections = {f"spirv/{m.name}": m.binary for m in self.modules()}
        sections[PARAMS_SECTION] = params
        metadata = {**plan.to_json(), "target": str(self.target), "vulkan": self.metadata()}
        write_artifact(path, b"", sections, metadata)

    def export_spirv(self, directory: str | os.PathLike[str], plan: Plan,
                     params: bytes) -> Path:
        """Write ``<dispatch>.spv`` files, ``params.bin`` and ``manifest.json``."""
        import json

        from .manifest import build_manifest

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for m in self.modules():
            (out / f"{m.name}.spv").write_bytes(m.binary)
        (out / "params.bin").write_bytes(params)
        manifest = build_manifest(self, plan)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        return out / "manifest.json"

    def kernel(self, name: str) -> list[SpirvModule]:
        if name not in self.kernels:
            raise TargetError(f"no kernel {name!r} in this module")
        return self.kernels[name]


def grid_json(grid: tuple[Any, ...]) -> list[int | str]:
    """Workgroup counts as metadata: ints, and the text of each that depends on run-time
    sizes (``"(batch*seq + 63)//64"``), which the runtime evaluates per run."""
    return [g if isinstance(g, int) else str(g) for g in grid]


def _dispatch_meta(m: SpirvModule) -> dict[str, Any]:
    return {
        "name": m.name,
        "section": f"spirv/{m.name}",
        "entry_point": m.entry_point,
        "grid": grid_json(m.grid),
        "workgroup_size": list(m.workgroup_size),
        "bindings": [{"binding": b.param, "param": b.param, "access": b.access}
                     for b in m.bindings],
        "features": list(m.features),
        **({"matrix_shapes": list(m.matrix_shapes)} if m.matrix_shapes else {}),
        **({"workgroup_matrix_shapes": list(m.workgroup_matrix_shapes)}
           if m.workgroup_matrix_shapes else {}),
    }


__all__ = ["EXTENSION_OF_FEATURE", "METADATA_VERSION", "SpirvKernels", "grid_json"]
