"""A logical device per physical device, shared by every model loaded on it.

Creating a VkDevice is slow on some drivers and each holds a pipeline cache worth
sharing, so the first model loaded on ``vulkan:N`` creates it and later ones reuse it.
Every feature the SPIR-V of tensorsmith can use and the device has is enabled up front;
a model then only checks that the device has what its artifact lists. The queue is
shared too: submissions take ``submit_lock`` (a VkQueue must not be used by two threads
at once). Devices live until the process exits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tensorsmith.runtime.errors import DeviceError

from .instance import (
    ALL_FEATURES,
    EXTENSION_ALWAYS,
    EXTENSION_OF,
    PhysicalDevice,
    feature_chain,
    instance,
    select,
    vk,
)

__all__ = ["DeviceContext", "device_context"]


@dataclass
class DeviceContext:
    """A VkDevice, its compute queue and pipeline cache, and the device's description."""

    index: int
    physical: PhysicalDevice
    handle: Any
    queue: Any
    queue_family: int
    enabled: frozenset[str]
    pipeline_cache: Any
    submit_lock: threading.Lock

    @property
    def name(self) -> str:
        return f"vulkan:{self.index} '{self.physical.name}'"

    def memory_type(self, allowed_bits: int, required: int, preferred: int = 0) -> int | None:
        """The first allowed memory type with ``required`` flags, preferring ``preferred``."""
        candidates = [i for i, (flags, _) in enumerate(self.physical.memory_types)
                      if allowed_bits & (1 << i) and flags & required == required]
        for i in candidates:
            if self.physical.memory_types[i][0] & preferred == preferred:
                return i
        return candidates[0] if candidates else None


_lock = threading.Lock()
_contexts: dict[int, DeviceContext] = {}


def device_context(index: int) -> DeviceContext:
    """The shared context of ``vulkan:index`` (created on first use)."""
    with _lock:
        ctx = _contexts.get(index)
        if ctx is None:
            ctx = _contexts[index] = _create(index)
        return ctx


def _create(index: int) -> DeviceContext:
    v = vk()
    instance()
    physical = select(index)
    enable = {name: physical.features.get(name, False) for name in ALL_FEATURES}
    old = physical.api_version[:2] < (1, 2)
    extensions = sorted({EXTENSION_OF[n] for n, on in enable.items()
                         if on and n in EXTENSION_OF and (old or n in EXTENSION_ALWAYS)
                         and EXTENSION_OF[n] in physical.extensions})
    chain = feature_chain(v, physical.api_version, physical.extensions, enable)
    family = physical.compute_family
    assert family is not None
    queue_info = v.VkDeviceQueueCreateInfo(
        sType=v.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, queueFamilyIndex=family,
        queueCount=1, pQueuePriorities=[1.0])
    info = v.VkDeviceCreateInfo(
        sType=v.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=chain[0], queueCreateInfoCount=1,
        pQueueCreateInfos=[queue_info], enabledExtensionCount=len(extensions),
        ppEnabledExtensionNames=extensions or v.ffi.NULL, pEnabledFeatures=v.ffi.NULL)
    try:
        handle = v.vkCreateDevice(physical.handle, info, None)
    except (v.VkError, v.VkException) as e:
        raise DeviceError(f"cannot create a Vulkan device on {physical.describe(index)}: "
                          f"{type(e).__name__}") from None
    del chain
    queue = v.vkGetDeviceQueue(handle, family, 0)
    cache = v.vkCreatePipelineCache(
        handle, v.VkPipelineCacheCreateInfo(sType=v.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO),
        None)
    return DeviceContext(index, physical, handle, queue, family,
                         frozenset(n for n, on in enable.items() if on), cache, threading.Lock())
