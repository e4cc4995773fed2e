"""manifest.json of ``export_spirv``: everything a Vulkan engine needs to run the model.

The schema is documented, field by field, in docs/spirv-manifest.md; bump
``MANIFEST_VERSION`` on any change an existing reader could misread. The manifest is
derived from the same plan and dispatch list as the artifact, flattened to the level a
foreign engine works at: a list of dispatches in submission order, each with its
pipeline (module, entry point, workgroup size), its descriptor set (binding -> buffer),
its workgroup counts and the barrier that follows it; and a list of buffers with sizes,
kinds and lifetimes (first and last dispatch that binds them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kernels import EXTENSION_OF_FEATURE, grid_json

if TYPE_CHECKING:
    from tensorsmith.runtime.plan import Plan, Tensor

    from .kernels import SpirvKernels

MANIFEST_SCHEMA = "tensorsmith.spirv-manifest"
MANIFEST_VERSION = 1
#: What every dispatch is followed by (docs/spirv-manifest.md, "Barriers").
BARRIER_AFTER = {
    "src_stage": "COMPUTE_SHADER",
    "dst_stage": "COMPUTE_SHADER",
    "src_access": ["SHADER_WRITE"],
    "dst_access": ["SHADER_READ", "SHADER_WRITE"],
}
#: Bytes of a binding for a tensor with no elements (Vulkan has no empty ranges).
MIN_RANGE = 4


def build_manifest(kernels: SpirvKernels, plan: Plan) -> dict[str, Any]:
    plan_buffers = plan.buffers
    inputs = {io.buffer for io in plan.inputs}
    outputs = {io.buffer for io in plan.outputs}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    dispatches: list[dict[str, Any]] = []
    for step_index, step in enumerate(plan.steps):
        for module in kernels.kernel(step.kernel):
            index = len(dispatches)
            bindings = []
            for b in module.bindings:
                buffer = step.args[b.param]
                first.setdefault(buffer, index)
                last[buffer] = index
                bindings.append({
                    "binding": b.param,
                    "descriptor_type": "STORAGE_BUFFER",
                    "buffer": buffer,
                    "offset": 0,
                    "range": max(plan_buffers[buffer].nbytes, MIN_RANGE),
                    "access": b.access,
                })
            dispatches.append({
                "index": index,
                "step": step_index,
                "step_name": step.label,
                "kernel": step.kernel,
                "name": module.name,
                "spv": f"{module.name}.spv",
                "entry_point": module.entry_point,
                "workgroup_size": list(module.workgroup_size),
                "workgroup_count": grid_json(module.grid),
                "workgroup_memory_bytes": module.shared_bytes,
                "descriptor_sets": [{"set": 0, "bindings": bindings}],
                "push_constants": [],
                "specialization_constants": [],
                "barrier_after": BARRIER_AFTER,
            })
    buffers: list[dict[str, Any]] = []
    for i, b in enumerate(plan_buffers):
        kind = ("param" if b.kind == "param" else "input" if i in inputs
                else "output" if i in outputs else "workspace")
        entry: dict[str, Any] = {"id": i, "kind": kind, "nbytes": b.nbytes,
                                 "alloc_bytes": max(-(-b.nbytes // 4) * 4, MIN_RANGE)}
        if b.name is not None:
            entry["name"] = b.name
        if kind == "param":
            entry["params_offset"] = b.offset
        else:
            entry["workspace_offset"] = b.offset
        entry["first_dispatch"] = first.get(i)
        entry["last_dispatch"] = last.get(i)
        entry["is_output"] = i in outputs
        buffers.append(entry)
    features = kernels.features()
    spirv_version, vulkan_version = kernels.versions()
    requirements: dict[str, Any] = {
        "vulkan_version": vulkan_version,
        "spirv_version": spirv_version,
        "features": features,
        "device_extensions_vulkan_1_1": sorted({EXTENSION_OF_FEATURE[f] for f in features
                                                if f in EXTENSION_OF_FEATURE}),
        "offset_alignment": 64,
    }
    requirements.update(kernels.matrix_requirements())
    return {
        "schema": MANIFEST_SCHEMA,
        "version": MANIFEST_VERSION,
        "producer": plan.producer or {},
        "target": str(kernels.target),
        "requirements": requirements,
        "params": {"file": "params.bin", "nbytes": plan.params_bytes},
        "workspace_bytes": plan.workspace_bytes,
        "buffers": buffers,
        "inputs": [_io(io) for io in plan.inputs],
        "outputs": [_io(io) for io in plan.outputs],
        "dispatches": dispatches,
    }


def _io(io: Tensor) -> dict[str, Any]:
    return {"name": io.name, "shape": list(io.shape), "dtype": io.dtype, "buffer": io.buffer}


__all__ = ["MANIFEST_SCHEMA", "MANIFEST_VERSION", "build_manifest"]
