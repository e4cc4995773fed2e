"""What each Vulkan device offers the compiler: the facts a target string names.

Kernels are compiled on a build host that need not have the GPU, so what a device
offers beyond every Vulkan 1.1 device (cooperative matrices, subgroup size, workgroup
memory and invocations, integer dot products) must be told to the compiler in the target
string. This probe runs on the device, with the runtime alone (``python -m
tensorsmith.runtime.vulkan``, or ``tensorsmith devices`` where the compiler is installed
too), and prints each device's facts and the target string that uses them.
"""

from __future__ import annotations

from typing import Any

from .instance import ALL_FEATURES, PhysicalDevice, physical_devices

__all__ = ["describe", "describe_all", "report", "target_string"]


def target_string(dev: PhysicalDevice) -> str:
    """The ``vulkan`` target string that compiles for ``dev``'s cooperative matrices (the
    float16 ones with a float32 accumulator, which the float16 matmul rule uses, held by
    subgroups or by whole workgroups) and its integer dot products, or plain ``vulkan``
    where it has neither."""
    shapes = sorted(dev.matrix_shapes())
    usable = [s.split()[0] for s in shapes if s.endswith("float16*float16+float32")]
    parts = ["vulkan"]
    if usable:
        shared = int(dev.limits.get("maxComputeSharedMemorySize", 0))
        parts.append(f"-cooperative-matrix={','.join(usable)}")
        held = dev.workgroup_matrices
        blocks = sorted({f"{s.m}x{s.n}x{s.k}/{s.invocations}" for s in held.shapes
                         if s.usable and (s.a, s.c) == ("float16", "float32")}) if held else []
        if held and blocks:
            parts.append(f"-workgroup-matrix={','.join(blocks)}")
            if held.max_dimension != 256:  # the compiler's default
                parts.append(f"-workgroup-matrix-max={held.max_dimension}")
        if dev.subgroup_size:
            parts.append(f"-subgroup-size={dev.subgroup_size}")
        if shared:
            parts.append(f"-shared-memory={shared}")
        invocations = int(dev.limits.get("maxComputeWorkGroupInvocations", 0))
        if invocations > 256:  # 256 is every device's minimum, the compiler's default
            parts.append(f"-max-invocations={invocations}")
    if dev.features.get("shaderIntegerDotProduct"):
        parts.append("-integer-dot-product=1")
    return " ".join(parts)


def describe(dev: PhysicalDevice, index: int) -> dict[str, Any]:
    """``dev``'s facts as plain data (what ``--json`` prints)."""
    return {
        "device": f"vulkan:{index}",
        "name": dev.name,
        "type": dev.type_name,
        "vulkan": ".".join(str(v) for v in dev.api_version),
        "subgroup_size": dev.subgroup_size,
        "shared_memory_bytes": int(dev.limits.get("maxComputeSharedMemorySize", 0)),
        "max_invocations": int(dev.limits.get("maxComputeWorkGroupInvocations", 0)),
        "features": {name: bool(dev.features.get(name)) for name in ALL_FEATURES},
        "cooperative_matrix": [str(p) for p in dev.cooperative_matrix],
        "workgroup_matrix": _held(dev),
        "target": target_string(dev),
    }


def _held(dev: PhysicalDevice) -> dict[str, Any] | None:
    held = dev.workgroup_matrices
    if held is None:
        return None
    return {"max_dimension": held.max_dimension, "max_workgroup": held.max_workgroup,
            "reserved_shared_bytes": held.reserved_shared,
            "shapes": [str(s) for s in held.shapes]}


def describe_all() -> list[dict[str, Any]]:
    return [describe(d, i) for i, d in enumerate(physical_devices())]


def report() -> str:
    """Readable text of :func:`describe_all`."""
    lines = []
    for d in describe_all():
        lines.append(f"{d['device']} = '{d['name']}' ({d['type']}, Vulkan {d['vulkan']})")
        lines.append(f"  subgroup size {d['subgroup_size']}, workgroup memory "
                     f"{d['shared_memory_bytes']} bytes, workgroups of at most "
                     f"{d['max_invocations']} invocations")
        on = [n for n, v in d["features"].items() if v]
        lines.append(f"  features: {', '.join(on) or 'none'}")
        shapes = d["cooperative_matrix"]
        lines.append("  cooperative matrices: " + ("none" if not shapes else ""))
        lines += [f"    {s}" for s in shapes]
        held = d["workgroup_matrix"]
        if held is not None:
            lines.append(f"  workgroup-held matrices (VK_NV_cooperative_matrix2): dimensions "
                         f"up to {held['max_dimension']}, workgroups of at most "
                         f"{held['max_workgroup']}, {held['reserved_shared_bytes']} bytes of "
                         "workgroup memory reserved")
            lines += [f"    {s}" for s in held["shapes"]]
        lines.append(f"  target: {d['target']}")
    return "\n".join(lines)
