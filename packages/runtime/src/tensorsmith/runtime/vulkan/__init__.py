"""The Vulkan executor: runs ``vulkan`` artifacts (SPIR-V compute) on any Vulkan 1.1 device.

Needs the ``vulkan`` Python package (``pip install tensorsmith-runtime[vulkan]``), the
Vulkan loader and a driver; Mesa's lavapipe (``apt-get install mesa-vulkan-drivers
libvulkan1``) runs everything on the CPU. Nothing here is imported by
``tensorsmith.runtime`` until a model is loaded with ``device="vulkan"``.

Modules, one job each: loader (import the package), instance (devices, their order),
context (one logical device per physical device), memory (buffers and mapping), layout
(where each plan buffer lives), plan (the artifact's dispatch table, checked), pipelines
(pipelines, descriptor sets), commands (recording and submitting), timestamps
(profiling), model (the executor), probe (what a device offers the compiler:
``python -m tensorsmith.runtime.vulkan``).
"""

from __future__ import annotations

from .instance import list_devices
from .model import VulkanModel

__all__ = ["VulkanModel", "list_devices"]
