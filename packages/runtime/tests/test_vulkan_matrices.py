"""What the Vulkan runtime makes of cooperative matrices, with no such device here: the
shapes a device's properties offer, the target string the probe prints for it, and the
load-time check of an artifact's needs against a device (what a device with
VK_KHR_cooperative_matrix but other shapes or another subgroup size is told), and the
same for matrices a workgroup holds (VK_NV_cooperative_matrix2), whose structures the
runtime lays out itself."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from tensorsmith.runtime import DeviceError
from tensorsmith.runtime.vulkan.instance import MatrixProperty, PhysicalDevice
from tensorsmith.runtime.vulkan.matrix_properties import FlexibleShape
from tensorsmith.runtime.vulkan.model import VulkanModel
from tensorsmith.runtime.vulkan.probe import describe, target_string
from tensorsmith.runtime.vulkan.workgroup_matrix import FEATURES, RawStruct, WorkgroupMatrices

NEEDS = {"shapes": ["16x16x16 float16*float16+float32"], "subgroup_size": 32}


def device(shapes: list[MatrixProperty], subgroup: int = 32, invocations: int = 256
           ) -> PhysicalDevice:
    return PhysicalDevice(
        handle=None, name="a GPU", type_name="discrete GPU", api_version=(1, 4, 0),
        preference=0, limits={"maxComputeSharedMemorySize": 49152,
                              "maxComputeWorkGroupInvocations": invocations},
        features={"cooperativeMatrix": bool(shapes), "shaderFloat16": True},
        extensions=set(), compute_family=0, timestamp_bits=64, subgroup_size=subgroup,
        cooperative_matrix=shapes)


F16_F32 = MatrixProperty(16, 16, 16, "float16", "float16", "float32", "float32", False,
                         "subgroup")
F16_F16 = replace(F16_F32, c="float16", result="float16")
INT8 = MatrixProperty(16, 16, 32, "int8", "int8", "int32", "int32", False, "subgroup")
WORKGROUP = replace(F16_F32, m=64, n=64, scope="workgroup")


def test_shapes_and_target_string() -> None:
    dev = device([F16_F32, F16_F16, INT8, WORKGROUP])
    assert dev.matrix_shapes() == {"16x16x16 float16*float16+float32",
                                   "16x16x16 float16*float16+float16",
                                   "16x16x32 int8*int8+int32"}  # subgroup scope only
    assert target_string(dev) == ("vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 "
                                  "-shared-memory=49152")
    assert target_string(device([])) == "vulkan"
    big = device([F16_F32], invocations=1024)  # more than every device's 256: said
    assert target_string(big) == ("vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 "
                                  "-shared-memory=49152 -max-invocations=1024")
    facts = describe(dev, 0)
    assert facts["max_invocations"] == 256
    assert facts["cooperative_matrix"][0] == ("16x16x16 float16 x float16 + float32 -> "
                                              "float32 (subgroup)")


def check(dev: PhysicalDevice, needs: dict[str, Any] | None = NEEDS) -> None:
    fake = SimpleNamespace(plan=SimpleNamespace(cooperative_matrix=needs), path="mm.tsm",
                           ctx=SimpleNamespace(physical=dev, name="vulkan:0 'a GPU'"))
    VulkanModel._check_matrices(fake)  # type: ignore[arg-type]


def test_load_checks_what_the_kernels_assume() -> None:
    check(device([F16_F32]))
    check(device([]), None)  # an artifact without cooperative matrices loads anywhere
    with pytest.raises(DeviceError, match="has no VK_KHR_cooperative_matrix"):
        check(device([]))
    with pytest.raises(DeviceError, match=r"multiplies cooperative matrices of 16x16x16 "
                       r"float16\*float16\+float32, which device vulkan:0 'a GPU' does not "
                       r"offer \(it offers 16x16x16 float16\*float16\+float16\)"):
        check(device([F16_F16]))
    with pytest.raises(DeviceError, match="built for subgroups of 32 invocations and device "
                       "vulkan:0 'a GPU' has subgroups of 64; build it with "
                       "-subgroup-size=64"):
        check(device([F16_F32], subgroup=64))


HELD_NEEDS = {"shapes": ["128x256x32/256 float16*float16+float32"]}
FLEX = FlexibleShape(16, 16, 16, "float16", "float16", "float32", "float32", False,
                     "workgroup", 256)


def held_device(shapes: tuple[FlexibleShape, ...], largest: int = 256) -> PhysicalDevice:
    return replace(device([F16_F32]), workgroup_matrices=WorkgroupMatrices(
        largest, 1024, 1024, shapes))


def check_held(dev: PhysicalDevice, needs: dict[str, Any] | None = HELD_NEEDS) -> None:
    fake = SimpleNamespace(plan=SimpleNamespace(workgroup_matrix=needs), path="mm.tsm",
                           ctx=SimpleNamespace(physical=dev, name="vulkan:0 'a GPU'"))
    VulkanModel._check_held_matrices(fake)  # type: ignore[arg-type]


def test_load_checks_workgroup_held_blocks() -> None:
    check_held(held_device((FLEX,)))
    check_held(device([F16_F32]), None)
    with pytest.raises(DeviceError, match="has no VK_NV_cooperative_matrix2 with workgroup "
                       "scope; build it without -workgroup-matrix"):
        check_held(device([F16_F32]))
    for dev in (held_device((replace(FLEX, invocations=128),)),  # other workgroups
                held_device((replace(FLEX, m=48),)),  # 128 rows are no multiple of 48
                held_device((FLEX,), largest=128),  # 256 columns: over the largest
                held_device((replace(FLEX, scope="subgroup"),))):
        with pytest.raises(DeviceError, match=r"multiplies workgroup-held matrices of "
                           r"128x256x32/256 float16\*float16\+float32, which device"):
            check_held(dev)


def test_target_string_names_workgroup_held_blocks() -> None:
    dev = held_device((FLEX, replace(FLEX, invocations=128),
                       replace(FLEX, a="int8", b="int8", c="int32", result="int32")))
    assert target_string(dev) == ("vulkan -cooperative-matrix=16x16x16 -workgroup-matrix="
                                  "16x16x16/128,16x16x16/256 -subgroup-size=32 "
                                  "-shared-memory=49152")
    assert describe(dev, 0)["workgroup_matrix"]["shapes"][0] == (
        "16x16x16 granularity, float16 x float16 + float32 -> float32 (workgroup, 256 "
        "invocations)")
    assert "-workgroup-matrix=16x16x16/256 -workgroup-matrix-max=512 " in target_string(
        held_device((FLEX,), largest=512))


def test_raw_structures_match_the_vulkan_layout() -> None:
    """RawStruct lays a structure out as C does: checked on one the ``vulkan`` package
    knows (VkPhysicalDeviceCooperativeMatrixFeaturesKHR: sType, pNext, two VkBool32)."""
    vk = pytest.importorskip("vulkan", reason="the vulkan package is a runtime dependency")
    raw = RawStruct(vk, 1000506000, ("cooperativeMatrix", "cooperativeMatrixRobustBufferAccess"),
                    cooperativeMatrixRobustBufferAccess=1)
    known = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(
        sType=1000506000, cooperativeMatrix=0, cooperativeMatrixRobustBufferAccess=1)
    size = vk.ffi.sizeof(known)
    assert bytes(vk.ffi.buffer(raw.pointer, size)) == bytes(
        vk.ffi.buffer(vk.ffi.addressof(known), size))
    assert raw.cooperativeMatrixRobustBufferAccess == 1 and raw.cooperativeMatrix == 0
    for before, address in ((raw, raw.pointer), (known, vk.ffi.addressof(known))):
        chained = RawStruct(vk, 1000593000, FEATURES, before)
        assert int(vk.ffi.cast("uintptr_t", address)) == int.from_bytes(
            bytes(vk.ffi.buffer(chained.pointer, 16))[8:], "little")
