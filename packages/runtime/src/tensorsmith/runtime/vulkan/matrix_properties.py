"""The cooperative-matrix products a Vulkan device reports: the subgroup-scope entries of
VK_KHR_cooperative_matrix (:class:`MatrixProperty`), and the flexible-dimension entries
of NVIDIA's VK_NV_cooperative_matrix2 (:class:`FlexibleShape`, queried in
workgroup_matrix.py), which name the same types and scope and add a workgroup size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: VkComponentTypeKHR -> dtype, and the scope a cooperative matrix of tensorsmith uses.
COMPONENT_TYPES = {0: "float16", 1: "float32", 2: "float64", 3: "int8", 4: "int16",
                   5: "int32", 6: "int64", 7: "uint8", 8: "uint16", 9: "uint32", 10: "uint64"}
SCOPE_NAMES = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue family"}


@dataclass(frozen=True)
class MatrixProperty:
    """One entry of vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR."""

    m: int
    n: int
    k: int
    a: str
    b: str
    c: str
    result: str
    saturating: bool
    scope: str

    @property
    def shape(self) -> str | None:
        """The text the compiler writes for a product of this shape (tensorsmith.ir
        MatrixShape: ``16x16x16 float16*float16+float32``), for the subgroup-scope,
        non-saturating entries whose result is the accumulator's type; else None."""
        if self.scope != "subgroup" or self.saturating or self.result != self.c:
            return None
        return f"{self.m}x{self.n}x{self.k} {self.a}*{self.b}+{self.c}"

    def __str__(self) -> str:
        sat = ", saturating" if self.saturating else ""
        return (f"{self.m}x{self.n}x{self.k} {self.a} x {self.b} + {self.c} -> {self.result} "
                f"({self.scope}{sat})")


@dataclass(frozen=True)
class FlexibleShape(MatrixProperty):
    """One VkCooperativeMatrixFlexibleDimensionsPropertiesNV entry: blocks of multiples
    of ``m`` x ``n`` x ``k`` (the granularities) in workgroups of ``invocations``."""

    invocations: int = 0

    @property
    def usable(self) -> bool:
        """Whether tensorsmith's kernels may use it: workgroup scope, non-saturating,
        a result of the accumulator's type, the same type for both inputs."""
        return (self.scope == "workgroup" and not self.saturating and self.result == self.c
                and self.a == self.b)

    def __str__(self) -> str:
        return (f"{self.m}x{self.n}x{self.k} granularity, {self.a} x {self.b} + {self.c} -> "
                f"{self.result} ({self.scope}, {self.invocations} invocations)")


def type_name(code: int) -> str:
    """The dtype of a VkComponentTypeKHR, or ``typeN`` for one tensorsmith has no name for."""
    return COMPONENT_TYPES.get(int(code), f"type{int(code)}")


def scope_name(code: int) -> str:
    return SCOPE_NAMES.get(int(code), f"scope{int(code)}")


def query(vk: Any, instance_handle: Any, handle: Any) -> list[MatrixProperty]:
    """The device's cooperative-matrix products (VK_KHR_cooperative_matrix); none where
    the query is not available."""
    try:
        query = vk.vkGetInstanceProcAddr(instance_handle,
                                         "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
        entries = query(handle)
    except (vk.VkError, vk.VkException, AttributeError, TypeError):
        return []
    out = []
    for p in entries:
        a, b, c, result = (type_name(t) for t in (p.AType, p.BType, p.CType, p.ResultType))
        out.append(MatrixProperty(int(p.MSize), int(p.NSize), int(p.KSize), a, b, c, result,
                                  bool(p.saturatingAccumulation),
                                  scope_name(p.scope)))
    return out


__all__ = ["COMPONENT_TYPES", "SCOPE_NAMES", "FlexibleShape", "MatrixProperty", "query",
           "scope_name", "type_name"]
