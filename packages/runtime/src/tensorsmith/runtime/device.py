"""Device names ("cpu", "vulkan:0", "opencl") and which target's artifacts each runs.

Parsing is separate from loading so that a typo in a device name is reported before any
file is read, and so the GPU backends can be added here without touching the loader.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorsmith.runtime._version import __version__
from tensorsmith.runtime.errors import DeviceError

__all__ = ["Device", "parse_device"]

# device kind -> the artifact target kind it runs
TARGET_OF_DEVICE = {"cpu": "llvm", "vulkan": "vulkan", "opencl": "opencl"}
AVAILABLE = ("cpu", "opencl", "vulkan")


@dataclass(frozen=True)
class Device:
    """A device kind ("cpu", "vulkan", "opencl") and its index among devices of that kind."""

    kind: str
    index: int

    def __str__(self) -> str:
        return self.kind if self.index == 0 else f"{self.kind}:{self.index}"


def parse_device(spec: str) -> Device:
    """Parse "kind" or "kind:index"; refuse unknown kinds and backends not in this runtime."""
    kind, sep, number = str(spec).strip().lower().partition(":")
    known = ", ".join(f"'{k}'" for k in TARGET_OF_DEVICE)
    if kind not in TARGET_OF_DEVICE:
        raise DeviceError(f"unknown device {spec!r}; use one of {known}, e.g. device='cpu'")
    if sep and not number.isdigit():
        raise DeviceError(
            f"device {spec!r} has a bad index {number!r}; write it as '{kind}' or '{kind}:0'"
        )
    index = int(number) if sep else 0
    if kind not in AVAILABLE:
        raise DeviceError(
            f"the {kind} device backend is not available in this runtime version "
            f"(tensorsmith-runtime {__version__} runs artifacts on "
            f"{', '.join(repr(k) for k in AVAILABLE)}); compile the model for target 'llvm' "
            "and load it with device='cpu'"
        )
    if kind == "cpu" and index != 0:
        raise DeviceError(f"device {spec!r} does not exist: the CPU is device 'cpu' (or 'cpu:0')")
    return Device(kind, index)
