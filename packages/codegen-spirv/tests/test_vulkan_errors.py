"""Errors a user meets with the vulkan target and device, and what they say."""

from __future__ import annotations

from pathlib import Path

import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.runtime import DeviceError

pytestmark = pytest.mark.vulkan


def tiny(target: str, path: Path) -> Path:
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    build(b.finish([b.add1("exp", [x], name="e")]), target=target).export_library(path)
    return path


def test_llvm_artifact_on_a_vulkan_device(tmp_path: Path) -> None:
    path = tiny("llvm", tmp_path / "cpu.so")
    with pytest.raises(DeviceError, match=r"compiled for target 'llvm', and device 'vulkan' "
                                          r"does not run it \(it runs on device 'cpu'\); load "
                                          r"it with device='cpu'"):
        rt.load(path, device="vulkan")


def test_vulkan_artifact_on_the_cpu(tmp_path: Path) -> None:
    path = tiny("vulkan", tmp_path / "gpu.tsm")
    with pytest.raises(DeviceError, match=r"compiled for target 'vulkan'.*device='vulkan'"):
        rt.load(path, device="cpu")


def test_bad_device_index(tmp_path: Path) -> None:
    path = tiny("vulkan", tmp_path / "gpu.tsm")
    with pytest.raises(DeviceError, match=r"device 'vulkan:97' does not exist: this machine "
                                          r"has \d+ Vulkan devices? \(vulkan:0 = '"):
        rt.load(path, device="vulkan:97")
    with pytest.raises(DeviceError, match="bad index"):
        rt.load(path, device="vulkan:x")


def test_validate_option_runs_spirv_val() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    lib = build(b.finish([b.add1("erf", [x], name="e")]), target="vulkan -validate=1")
    assert lib.kernels.modules()
