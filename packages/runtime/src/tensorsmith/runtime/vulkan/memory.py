"""Buffers and their memory: device-local storage, host-visible staging, mapping.

Two layouts of the same model, chosen per device (``choose_mode``):

* ``direct``: on devices that share host memory (lavapipe, integrated GPUs) the storage
  buffers themselves live in host-visible, coherent memory and stay mapped: inputs are
  written and outputs read in place, and the command buffer holds only dispatches.
* ``staging``: discrete GPUs keep storage in device-local memory; inputs go through a
  host-visible upload buffer and outputs through a host-visible (cached where possible)
  download buffer, copied by the same command buffer that runs the dispatches.

``TSM_VULKAN_STAGING=1`` forces staging (=0 forces direct, where the device allows),
which is how the tests cover both paths on one CPU device.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from tensorsmith.runtime.errors import DeviceError

from .context import DeviceContext
from .instance import vk

__all__ = ["DeviceBuffer", "choose_mode", "create_buffer", "destroy_buffer"]

STORAGE_USAGE = "storage"
UPLOAD = "upload"
DOWNLOAD = "download"


@dataclass
class DeviceBuffer:
    """A VkBuffer bound to its own VkDeviceMemory; ``address`` is set while mapped."""

    buffer: Any
    memory: Any
    size: int
    address: int | None = None

    def write(self, offset: int, source: int, nbytes: int) -> None:
        assert self.address is not None and offset + nbytes <= self.size
        ctypes.memmove(self.address + offset, source, nbytes)

    def read(self, offset: int, destination: int, nbytes: int) -> None:
        assert self.address is not None and offset + nbytes <= self.size
        ctypes.memmove(destination, self.address + offset, nbytes)


def _flags(v: Any) -> dict[str, tuple[int, int, int]]:
    """usage -> (buffer usage bits, required memory flags, preferred memory flags)."""
    host = v.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | v.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    storage = (v.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
               | v.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    return {
        "storage": (storage, v.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0),
        "direct": (storage, host, v.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT),
        UPLOAD: (v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, host, 0),
        DOWNLOAD: (v.VK_BUFFER_USAGE_TRANSFER_DST_BIT, host, v.VK_MEMORY_PROPERTY_HOST_CACHED_BIT),
    }


def choose_mode(ctx: DeviceContext) -> str:
    """"direct" or "staging" (see the module's docstring)."""
    forced = os.environ.get("TSM_VULKAN_STAGING", "").strip().lower()
    v = vk()
    host = v.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | v.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    can_direct = any(flags & host == host for flags, _ in ctx.physical.memory_types)
    if forced in ("1", "true", "yes", "always"):
        return "staging"
    if forced in ("0", "false", "no", "never") and can_direct:
        return "direct"
    shared = host | v.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
    unified = any(flags & shared == shared for flags, _ in ctx.physical.memory_types)
    return "direct" if ctx.physical.is_unified_memory and unified else "staging"


def create_buffer(ctx: DeviceContext, size: int, kind: str, what: str) -> DeviceBuffer:
    """A buffer of ``size`` bytes for ``kind`` ("storage", "direct", "upload", "download");
    host-visible kinds come back mapped. ``what`` names the buffer in errors."""
    v = vk()
    usage, required, preferred = _flags(v)[kind]
    size = max(size, 4)
    info = v.VkBufferCreateInfo(sType=v.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
                                usage=usage, sharingMode=v.VK_SHARING_MODE_EXCLUSIVE)
    buffer = v.vkCreateBuffer(ctx.handle, info, None)
    needs = v.vkGetBufferMemoryRequirements(ctx.handle, buffer)
    index = ctx.memory_type(needs.memoryTypeBits, required, preferred)
    if index is None and kind == "storage":  # no device-local type fits: any will do
        index = ctx.memory_type(needs.memoryTypeBits, 0)
    if index is None:
        v.vkDestroyBuffer(ctx.handle, buffer, None)
        raise DeviceError(f"device {ctx.name} has no suitable memory type for {what}")
    alloc = v.VkMemoryAllocateInfo(sType=v.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                   allocationSize=needs.size, memoryTypeIndex=index)
    try:
        memory = v.vkAllocateMemory(ctx.handle, alloc, None)
    except (v.VkError, v.VkException) as e:
        v.vkDestroyBuffer(ctx.handle, buffer, None)
        raise DeviceError(f"device {ctx.name} cannot allocate {size} bytes for {what} "
                          f"({type(e).__name__})") from None
    v.vkBindBufferMemory(ctx.handle, buffer, memory, 0)
    result = DeviceBuffer(buffer, memory, size)
    if kind != "storage":
        mapped = v.vkMapMemory(ctx.handle, memory, 0, size, 0)
        result.address = int(v.ffi.cast("uintptr_t", v.ffi.from_buffer(mapped)))
    return result


def destroy_buffer(device: Any, buf: DeviceBuffer) -> None:
    v = vk()
    if buf.address is not None:
        v.vkUnmapMemory(device, buf.memory)
        buf.address = None
    v.vkDestroyBuffer(device, buf.buffer, None)
    v.vkFreeMemory(device, buf.memory, None)
