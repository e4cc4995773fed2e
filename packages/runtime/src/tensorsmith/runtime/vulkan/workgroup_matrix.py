"""NVIDIA's VK_NV_cooperative_matrix2: cooperative matrices a whole workgroup holds.

With its ``cooperativeMatrixWorkgroupScope`` and ``cooperativeMatrixFlexibleDimensions``
features, a kernel multiplies one block per workgroup (any multiple of the device's
granularities up to its largest dimension) and the driver stages the operands through
shared memory itself. The ``vulkan`` Python package predates the extension, so its
structures are laid out here as raw memory (:class:`RawStruct`): an ``sType``, a
``pNext`` and 32-bit members, which is all these structures hold.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .matrix_properties import FlexibleShape, scope_name, type_name

EXTENSION = "VK_NV_cooperative_matrix2"
#: VkStructureType values of the extension (extension number 594).
FEATURES_STYPE = 1000593000
FLEXIBLE_DIMENSIONS_STYPE = 1000593001
PROPERTIES_STYPE = 1000593002
#: Members of VkPhysicalDeviceCooperativeMatrix2FeaturesNV, in order.
FEATURES = ("cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
            "cooperativeMatrixReductions", "cooperativeMatrixConversions",
            "cooperativeMatrixPerElementOperations", "cooperativeMatrixTensorAddressing",
            "cooperativeMatrixBlockLoads")
#: The features kernels of tensorsmith use (workgroup-held blocks of flexible size).
USED_FEATURES = FEATURES[:2]
PROPERTIES = ("cooperativeMatrixWorkgroupScopeMaxWorkgroupSize",
              "cooperativeMatrixFlexibleDimensionsMaxDimension",
              "cooperativeMatrixWorkgroupScopeReservedSharedMemory")
FLEXIBLE_DIMENSIONS = ("MGranularity", "NGranularity", "KGranularity", "AType", "BType",
                       "CType", "ResultType", "saturatingAccumulation", "scope",
                       "workgroupInvocations")
#: Where the 32-bit members start: after the 4-byte sType, its padding and the pNext.
_HEADER = 16


class RawStruct:
    """A Vulkan structure of an ``sType``, a ``pNext`` and 32-bit members ``fields``,
    in memory cffi owns; members read and written as attributes."""

    def __init__(self, vk: Any, stype: int, fields: tuple[str, ...], next_: Any = None,
                 **values: int) -> None:
        object.__setattr__(self, "_fields", fields)
        size = _HEADER + 4 * len(fields)
        memory = vk.ffi.new("char[]", size + (-size) % 8)
        object.__setattr__(self, "_memory", memory)
        object.__setattr__(self, "_buffer", vk.ffi.buffer(memory))
        struct.pack_into("<I", self._buffer, 0, stype)
        if isinstance(next_, RawStruct):
            next_ = next_.pointer
        elif next_ is not None and vk.ffi.typeof(next_).kind == "struct":
            next_ = vk.ffi.addressof(next_)  # the vulkan package's structures are values
        pointer = 0 if next_ is None else int(vk.ffi.cast("uintptr_t", next_))
        struct.pack_into("<Q", self._buffer, 8, pointer)
        for name, value in values.items():
            setattr(self, name, value)
        object.__setattr__(self, "pointer", vk.ffi.cast("void *", memory))

    def __getattr__(self, name: str) -> int:
        fields = object.__getattribute__(self, "_fields")
        if name not in fields:
            raise AttributeError(name)
        return int(struct.unpack_from("<I", self._buffer, _HEADER + 4 * fields.index(name))[0])

    def __setattr__(self, name: str, value: int) -> None:
        if name not in self._fields:
            raise AttributeError(name)
        struct.pack_into("<I", self._buffer, _HEADER + 4 * self._fields.index(name),
                         int(value))


def features_struct(vk: Any, next_: Any, enable: dict[str, bool]) -> RawStruct:
    """VkPhysicalDeviceCooperativeMatrix2FeaturesNV chained before ``next_``: what is
    queried (``enable`` empty) or enabled at device creation (the used features only)."""
    return RawStruct(vk, FEATURES_STYPE, FEATURES, next_,
                     **{n: int(bool(enable.get(n))) for n in USED_FEATURES})


@dataclass(frozen=True)
class WorkgroupMatrices:
    """What a device offers of workgroup-held matrices."""

    max_dimension: int
    max_workgroup: int
    reserved_shared: int
    shapes: tuple[FlexibleShape, ...]

    def fits(self, m: int, n: int, k: int, a: str, c: str, invocations: int) -> bool:
        """Whether a block ``m x n x k`` of ``a`` inputs into ``c`` in workgroups of
        ``invocations`` is one the device computes."""
        return max(m, n, k) <= self.max_dimension and any(
            s.usable and s.a == a and s.c == c and s.invocations == invocations
            and m % s.m == 0 and n % s.n == 0 and k % s.k == 0 for s in self.shapes)


def query(vk: Any, instance_handle: Any, handle: Any) -> WorkgroupMatrices | None:
    """The device's workgroup-held matrices, or None where the query fails."""
    props = RawStruct(vk, PROPERTIES_STYPE, PROPERTIES)
    head = vk.VkPhysicalDeviceProperties2(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=props.pointer)
    vk.vkGetPhysicalDeviceProperties2(handle, head)
    address = vk.lib.vkGetInstanceProcAddr(
        instance_handle, b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
    if address == vk.ffi.NULL:
        return None
    fn = vk.ffi.cast("VkResult (*)(VkPhysicalDevice, uint32_t *, void *)", address)
    count = vk.ffi.new("uint32_t *")
    if fn(handle, count, vk.ffi.NULL) != 0:
        return None
    size = _HEADER + 4 * len(FLEXIBLE_DIMENSIONS)  # 56: a multiple of the 8-byte pNext
    array = vk.ffi.new("char[]", max(1, size * count[0]))
    memory = vk.ffi.buffer(array)
    for i in range(count[0]):
        struct.pack_into("<I", memory, i * size, FLEXIBLE_DIMENSIONS_STYPE)
    if fn(handle, count, array) != 0:
        return None
    shapes = []
    for i in range(count[0]):
        e = dict(zip(FLEXIBLE_DIMENSIONS, struct.unpack_from(
            f"<{len(FLEXIBLE_DIMENSIONS)}I", memory, i * size + _HEADER)))
        a, b, c, r = (type_name(e[t]) for t in ("AType", "BType", "CType", "ResultType"))
        shapes.append(FlexibleShape(e["MGranularity"], e["NGranularity"], e["KGranularity"],
                                    a, b, c, r, bool(e["saturatingAccumulation"]),
                                    scope_name(e["scope"]), e["workgroupInvocations"]))
    return WorkgroupMatrices(props.cooperativeMatrixFlexibleDimensionsMaxDimension,
                             props.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
                             props.cooperativeMatrixWorkgroupScopeReservedSharedMemory,
                             tuple(shapes))


__all__ = ["EXTENSION", "FEATURES", "USED_FEATURES", "RawStruct",
           "WorkgroupMatrices", "features_struct", "query"]
