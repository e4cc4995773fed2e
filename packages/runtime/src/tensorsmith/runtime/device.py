"""Device names ("cpu", "vulkan:0", "opencl") and the executor of each device kind.

Parsing is separate from loading so that a typo in a device name is reported before any
file is read. Which device runs an artifact is the artifact's to say (its plan's
``device``, see plan.py): this runtime knows its devices, not the compiler's targets.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorsmith.runtime.errors import DeviceError

__all__ = ["EXECUTORS", "Device", "import_binding", "parse_device"]

#: Device kind -> "module:Class" of its executor. A GPU executor is built as
#: Class(artifact, device); the CPU's CpuModel as Class(artifact, fd): the open file the
#: artifact was verified from, which it loads. Executors are imported only when used, so
#: an optional backend's dependency (pyopencl, vulkan) stays optional.
EXECUTORS = {
    "cpu": "tensorsmith.runtime.cpu:CpuModel",
    "vulkan": "tensorsmith.runtime.vulkan:VulkanModel",
    "opencl": "tensorsmith.runtime.opencl:OpenCLModel",
}


def import_binding(kind: str) -> None:
    """Import the Python package that drives ``kind``'s devices (nothing for the CPU): a
    DeviceError naming the package, or the system library, to install. For a tool that
    must know before it starts work that the device kind can be used at all."""
    if kind == "vulkan":
        from tensorsmith.runtime.vulkan.loader import import_vulkan

        import_vulkan()
    elif kind == "opencl":
        from tensorsmith.runtime.opencl import _pyopencl

        _pyopencl()


@dataclass(frozen=True)
class Device:
    """A device kind ("cpu", "vulkan", "opencl") and its index among devices of that kind."""

    kind: str
    index: int

    def __str__(self) -> str:
        return self.kind if self.index == 0 else f"{self.kind}:{self.index}"


def parse_device(spec: str) -> Device:
    """Parse "kind" or "kind:index"; refuse kinds this runtime has no executor for."""
    kind, sep, number = str(spec).strip().lower().partition(":")
    known = ", ".join(f"'{k}'" for k in EXECUTORS)
    if kind not in EXECUTORS:
        raise DeviceError(f"unknown device {spec!r}; use one of {known}, e.g. device='cpu'")
    if sep and not number.isdigit():
        raise DeviceError(
            f"device {spec!r} has a bad index {number!r}; write it as '{kind}' or '{kind}:0'"
        )
    index = int(number) if sep else 0
    if kind == "cpu" and index != 0:
        raise DeviceError(f"device {spec!r} does not exist: the CPU is device 'cpu' (or 'cpu:0')")
    return Device(kind, index)
