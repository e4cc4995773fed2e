"""What the Vulkan runtime makes of cooperative matrices, with no such device here: the
shapes a device's properties offer, the target string the probe prints for it, and the
load-time check of an artifact's needs against a device (what a device with
VK_KHR_cooperative_matrix but other shapes or another subgroup size is told)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from tensorsmith.runtime import DeviceError
from tensorsmith.runtime.vulkan.instance import MatrixProperty, PhysicalDevice
from tensorsmith.runtime.vulkan.model import VulkanModel
from tensorsmith.runtime.vulkan.probe import describe, target_string

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
