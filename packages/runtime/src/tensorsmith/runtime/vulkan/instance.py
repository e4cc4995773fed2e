"""The process's Vulkan instance and what it knows about each physical device.

One instance serves every model of the process (creating one costs a driver scan). Its
physical devices are listed in preference order -- discrete GPUs, integrated GPUs,
virtual GPUs, CPUs (lavapipe), others; ties keep the loader's order -- and ``vulkan:N``
names the N-th of that list, so plain ``vulkan`` (= ``vulkan:0``) is the best device.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorsmith.runtime.errors import DeviceError

from . import matrix_properties, workgroup_matrix
from .loader import INSTALL_DRIVER, import_vulkan
from .matrix_properties import MatrixProperty
from .workgroup_matrix import WorkgroupMatrices

__all__ = ["MatrixProperty", "PhysicalDevice", "list_devices", "physical_devices", "vk"]

_TYPE_NAMES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
_PREFERENCE = {2: 0, 1: 1, 3: 2, 4: 3, 0: 4}
#: The instance asks for Vulkan 1.3 so 1.2 devices expose their core 8-bit storage and
#: float16/int8 features and 1.3 devices take SPIR-V 1.6 (the kernels on workgroup-held
#: matrices); 1.1 devices still work (through extensions where they have them).
API_VERSION = (1, 3, 0)
MIN_DEVICE_VERSION = (1, 1)

# Features the SPIR-V of tensorsmith may need, by the structure that reports them.
CORE_FEATURES = ("shaderInt64", "shaderFloat64", "shaderInt16")
STORAGE_8BIT = ("storageBuffer8BitAccess",)
STORAGE_16BIT = ("storageBuffer16BitAccess",)
FLOAT16_INT8 = ("shaderFloat16", "shaderInt8")
MEMORY_MODEL = ("vulkanMemoryModel",)
COOPERATIVE_MATRIX = ("cooperativeMatrix",)
INTEGER_DOT_PRODUCT = ("shaderIntegerDotProduct",)
#: Every feature above, in one tuple: what is queried and what a context enables.
ALL_FEATURES = (*CORE_FEATURES, *STORAGE_8BIT, *STORAGE_16BIT, *FLOAT16_INT8, *MEMORY_MODEL,
                *COOPERATIVE_MATRIX, *INTEGER_DOT_PRODUCT, *workgroup_matrix.USED_FEATURES)
#: Device extensions that provide the features above on Vulkan 1.1 devices.
EXTENSION_OF = {"storageBuffer8BitAccess": "VK_KHR_8bit_storage",
                "shaderFloat16": "VK_KHR_shader_float16_int8",
                "shaderInt8": "VK_KHR_shader_float16_int8",
                "vulkanMemoryModel": "VK_KHR_vulkan_memory_model",
                "cooperativeMatrix": "VK_KHR_cooperative_matrix",
                "shaderIntegerDotProduct": "VK_KHR_shader_integer_dot_product",
                **{f: workgroup_matrix.EXTENSION for f in workgroup_matrix.USED_FEATURES}}
#: Features whose extension is needed on every version (not core in Vulkan 1.2; the
#: integer dot product is core from 1.3, which a device may not have).
EXTENSION_ALWAYS = frozenset({"cooperativeMatrix", "shaderIntegerDotProduct",
                              *workgroup_matrix.USED_FEATURES})


@dataclass
class PhysicalDevice:
    """A physical device: its handle and the properties the executor needs."""

    handle: Any
    name: str
    type_name: str
    api_version: tuple[int, int, int]
    preference: int
    limits: dict[str, Any]
    features: dict[str, bool]
    extensions: set[str]
    compute_family: int | None  # a queue family with compute, or None
    timestamp_bits: int  # valid bits of that family's timestamps (0: none)
    memory_types: list[tuple[int, int]] = field(default_factory=list)  # (flags, heap)
    subgroup_size: int = 0  # 0: not reported
    cooperative_matrix: list[MatrixProperty] = field(default_factory=list)
    #: matrices a whole workgroup holds (VK_NV_cooperative_matrix2), None: none
    workgroup_matrices: WorkgroupMatrices | None = None

    def matrix_shapes(self) -> set[str]:
        """The cooperative-matrix products kernels of tensorsmith may use here."""
        return {s for p in self.cooperative_matrix if (s := p.shape) is not None}

    def describe(self, index: int) -> str:
        major, minor, _ = self.api_version
        return f"vulkan:{index} = '{self.name}' ({self.type_name}, Vulkan {major}.{minor})"

    @property
    def is_unified_memory(self) -> bool:
        """CPU and integrated devices share host memory: mapping it directly costs nothing."""
        return self.type_name in ("CPU", "integrated GPU")


class _Instance:
    """The VkInstance and its physical devices, sorted by preference."""

    def __init__(self) -> None:
        vk = import_vulkan()
        app = vk.VkApplicationInfo(
            sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName="tensorsmith",
            applicationVersion=1, pEngineName="tensorsmith", engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(*API_VERSION))
        info = vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                       pApplicationInfo=app)
        try:
            self.handle = vk.vkCreateInstance(info, None)
        except vk.VkErrorIncompatibleDriver:
            raise DeviceError(f"no Vulkan driver found by the Vulkan loader; {INSTALL_DRIVER}"
                              f"{_headless_nvidia_hint()}") from None
        except (vk.VkError, vk.VkException) as e:
            raise DeviceError(f"cannot create a Vulkan instance ({type(e).__name__}); "
                              f"{INSTALL_DRIVER}") from None
        try:
            handles = list(vk.vkEnumeratePhysicalDevices(self.handle))
        except (vk.VkError, vk.VkException):
            handles = []
        devices = [_describe(vk, self.handle, h, order) for order, h in enumerate(handles)]
        devices.sort(key=lambda d: d.preference)
        self.devices = devices


_lock = threading.Lock()
_instance: _Instance | None = None


def instance() -> _Instance:
    global _instance
    with _lock:
        if _instance is None:
            _instance = _Instance()
        return _instance


def vk() -> Any:
    """The imported ``vulkan`` module (raises DeviceError if it cannot be imported)."""
    return import_vulkan()


def physical_devices() -> list[PhysicalDevice]:
    """Every Vulkan device, best first; a DeviceError when there is none."""
    devices = instance().devices
    if not devices:
        raise DeviceError(f"the Vulkan loader found no device; {INSTALL_DRIVER}")
    return devices


def list_devices() -> list[str]:
    """``vulkan:N = 'name' (type, Vulkan x.y)`` for every device, in ``vulkan:N`` order."""
    return [d.describe(i) for i, d in enumerate(physical_devices())]


def select(index: int) -> PhysicalDevice:
    """The device ``vulkan:index``, checked to be usable."""
    devices = physical_devices()
    if index >= len(devices):
        have = "; ".join(d.describe(i) for i, d in enumerate(devices))
        raise DeviceError(
            f"device 'vulkan:{index}' does not exist: this machine has {len(devices)} Vulkan "
            f"device{'s' if len(devices) != 1 else ''} ({have})")
    dev = devices[index]
    if dev.api_version[:2] < MIN_DEVICE_VERSION:
        raise DeviceError(f"{dev.describe(index)} supports only Vulkan "
                          f"{dev.api_version[0]}.{dev.api_version[1]}; tensorsmith needs 1.1")
    if dev.compute_family is None:
        raise DeviceError(f"{dev.describe(index)} has no queue that runs compute shaders")
    return dev


def _headless_nvidia_hint() -> str:
    """The commonest broken setup: NVIDIA's ICD file names its GLX library, which fails to
    start without a display (containers, servers); its EGL library works headless."""
    for directory in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"):
        for path in sorted(Path(directory).glob("*nvidia*.json")):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if "libGLX_nvidia" in text:
                return (f". {path} names libGLX_nvidia.so.0, which fails on a machine without "
                        "a display: point VK_DRIVER_FILES at a copy of it that names "
                        "libEGL_nvidia.so.0")
    return ""


def _describe(vk: Any, instance_handle: Any, handle: Any, order: int) -> PhysicalDevice:
    props = vk.vkGetPhysicalDeviceProperties(handle)
    version = props.apiVersion
    api = (version >> 22, (version >> 12) & 0x3FF, version & 0xFFF)
    extensions = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(handle, None)}
    limits = props.limits
    wanted = ("minStorageBufferOffsetAlignment", "maxStorageBufferRange",
              "maxPerStageDescriptorStorageBuffers", "maxComputeWorkGroupInvocations",
              "timestampPeriod", "nonCoherentAtomSize", "maxComputeSharedMemorySize")
    lims: dict[str, Any] = {k: getattr(limits, k) for k in wanted}
    lims["maxComputeWorkGroupCount"] = tuple(limits.maxComputeWorkGroupCount)
    lims["maxComputeWorkGroupSize"] = tuple(limits.maxComputeWorkGroupSize)
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(handle)
    compute, bits = None, 0
    for i, f in enumerate(families):  # prefer a compute family that has timestamps
        if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT and (compute is None or
                                                        (bits == 0 < f.timestampValidBits)):
            compute, bits = i, f.timestampValidBits
    memory = vk.vkGetPhysicalDeviceMemoryProperties(handle)
    types = [(memory.memoryTypes[i].propertyFlags, memory.memoryTypes[i].heapIndex)
             for i in range(memory.memoryTypeCount)]
    type_code = int(props.deviceType)
    features = _features(vk, handle, api, extensions)
    matrices = matrix_properties.query(vk, instance_handle, handle) \
        if features.get("cooperativeMatrix") else []
    held = workgroup_matrix.query(vk, instance_handle, handle) \
        if all(features.get(f) for f in workgroup_matrix.USED_FEATURES) else None
    return PhysicalDevice(
        handle=handle, name=str(props.deviceName), type_name=_TYPE_NAMES.get(type_code, "other"),
        api_version=api, preference=_PREFERENCE.get(type_code, 4) * 1000 + order,
        limits=lims, features=features, extensions=extensions,
        compute_family=compute, timestamp_bits=bits, memory_types=types,
        subgroup_size=_subgroup_size(vk, handle, api), cooperative_matrix=matrices,
        workgroup_matrices=held)


def _subgroup_size(vk: Any, handle: Any, api: tuple[int, int, int]) -> int:
    if api[:2] < (1, 1):
        return 0
    sub = vk.VkPhysicalDeviceSubgroupProperties(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
    props = vk.VkPhysicalDeviceProperties2(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=sub)
    vk.vkGetPhysicalDeviceProperties2(handle, props)
    return int(sub.subgroupSize)


def _features(vk: Any, handle: Any, api: tuple[int, int, int], extensions: set[str]
              ) -> dict[str, bool]:
    """The features the SPIR-V may use, as this device reports them."""
    if api[:2] < (1, 1):
        core = vk.vkGetPhysicalDeviceFeatures(handle)
        return {name: bool(getattr(core, name)) for name in CORE_FEATURES}
    chain = feature_chain(vk, api, extensions, {})
    vk.vkGetPhysicalDeviceFeatures2(handle, chain[0])
    found: dict[str, bool] = {}
    for struct in chain[:-1]:  # the last is the input copy of the core features
        source = struct.features if hasattr(struct, "features") else struct
        for name in ALL_FEATURES:
            if hasattr(source, name):
                found[name] = bool(getattr(source, name))
    return found


def feature_chain(vk: Any, api: tuple[int, int, int], extensions: set[str],
                  enable: dict[str, bool]) -> list[Any]:
    """``VkPhysicalDeviceFeatures2`` and the structures chained to it, head first.

    Used twice: empty to query a device, filled with ``enable`` to create one. Structures
    are included only where the device's version or extensions define them. The caller
    keeps the list alive while the chain is in use (cffi frees what nothing references).
    """
    on = {name: vk.VK_TRUE if enable.get(name) else vk.VK_FALSE for name in ALL_FEATURES}
    tail: list[Any] = []
    v12 = api[:2] >= (1, 2)
    if v12 or "VK_KHR_8bit_storage" in extensions:
        tail.append(vk.VkPhysicalDevice8BitStorageFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES,
            storageBuffer8BitAccess=on["storageBuffer8BitAccess"]))
    if v12 or "VK_KHR_shader_float16_int8" in extensions:
        tail.append(vk.VkPhysicalDeviceShaderFloat16Int8Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
            pNext=tail[-1] if tail else vk.ffi.NULL,
            shaderFloat16=on["shaderFloat16"], shaderInt8=on["shaderInt8"]))
    if v12 or "VK_KHR_vulkan_memory_model" in extensions:
        tail.append(vk.VkPhysicalDeviceVulkanMemoryModelFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
            pNext=tail[-1] if tail else vk.ffi.NULL,
            vulkanMemoryModel=on["vulkanMemoryModel"]))
    if "VK_KHR_cooperative_matrix" in extensions:
        tail.append(vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
            pNext=tail[-1] if tail else vk.ffi.NULL,
            cooperativeMatrix=on["cooperativeMatrix"]))
    if "VK_KHR_shader_integer_dot_product" in extensions:
        tail.append(vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
            pNext=tail[-1] if tail else vk.ffi.NULL,
            shaderIntegerDotProduct=on["shaderIntegerDotProduct"]))
    if workgroup_matrix.EXTENSION in extensions:
        tail.append(workgroup_matrix.features_struct(vk, tail[-1] if tail else None, enable))
    tail.append(vk.VkPhysicalDevice16BitStorageFeatures(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        pNext=_pointer(vk, tail[-1]) if tail else vk.ffi.NULL,
        storageBuffer16BitAccess=on["storageBuffer16BitAccess"]))
    core = vk.VkPhysicalDeviceFeatures(**{n: on[n] for n in CORE_FEATURES})
    head = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        pNext=tail[-1], features=core)
    return [head, *reversed(tail), core]


def _pointer(vk: Any, structure: Any) -> Any:
    """What a ``pNext`` takes of ``structure`` (a cffi structure or a raw one)."""
    return structure.pointer if isinstance(structure, workgroup_matrix.RawStruct) else structure
