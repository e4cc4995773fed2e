"""A small Vulkan host that runs an ``export_spirv`` directory from its manifest alone.

It stands for "an existing Vulkan engine": it uses neither tensorsmith's runtime nor its
compiler, only the files (manifest.json, the .spv modules, params.bin) and the
``vulkan`` package, and it follows docs/spirv-manifest.md literally, choosing the
simplest options the document allows: one VkBuffer per manifest buffer (no aliasing),
all memory host-visible and coherent, one descriptor set layout per dispatch, every
dispatch followed by its ``barrier_after``.

    outputs = run_manifest("out_dir", {"x": x})   # {output name: array}
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np
import vulkan as vk

STAGES = {"COMPUTE_SHADER": vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT}
ACCESS = {"SHADER_READ": vk.VK_ACCESS_SHADER_READ_BIT,
          "SHADER_WRITE": vk.VK_ACCESS_SHADER_WRITE_BIT}
DESCRIPTORS = {"STORAGE_BUFFER": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER}


class Host:
    """Instance, device (first with a compute queue) and a few helpers."""

    def __init__(self, features: list[str], extensions: list[str]) -> None:
        app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                   apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
        self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app), None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next(i for i, f in enumerate(families)
                           if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        # The features the manifest lists, in the structures Vulkan 1.2 defines them in.
        f12 = vk.VkPhysicalDeviceVulkan12Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
            storageBuffer8BitAccess="storageBuffer8BitAccess" in features,
            shaderFloat16="shaderFloat16" in features, shaderInt8="shaderInt8" in features)
        f11 = vk.VkPhysicalDeviceVulkan11Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, pNext=f12,
            storageBuffer16BitAccess="storageBuffer16BitAccess" in features)
        core = vk.VkPhysicalDeviceFeatures(shaderInt64="shaderInt64" in features,
                                           shaderFloat64="shaderFloat64" in features,
                                           shaderInt16="shaderInt16" in features)
        f2 = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          pNext=f11, features=core)
        queue = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           queueFamilyIndex=self.family, queueCount=1,
                                           pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=f2, queueCreateInfoCount=1,
            pQueueCreateInfos=[queue]), None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        memory = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        self.memory_types = [i for i in range(memory.memoryTypeCount)
                             if memory.memoryTypes[i].propertyFlags & want == want]
        self.owned: list[tuple[Any, Any]] = []  # (vkDestroy*/vkFree*, handle), in creation order

    def own(self, destroy: Any, handle: Any) -> Any:
        self.owned.append((destroy, handle))
        return handle

    def close(self) -> None:
        vk.vkDeviceWaitIdle(self.device)
        for destroy, handle in reversed(self.owned):
            destroy(self.device, handle, None)
        vk.vkDestroyDevice(self.device, None)
        vk.vkDestroyInstance(self.instance, None)

    def buffer(self, size: int) -> tuple[Any, Any, int]:
        """A host-visible storage buffer: (VkBuffer, VkDeviceMemory, mapped address)."""
        buf = self.own(vk.vkDestroyBuffer, vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
            usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None))
        needs = vk.vkGetBufferMemoryRequirements(self.device, buf)
        index = next(i for i in self.memory_types if needs.memoryTypeBits & (1 << i))
        mem = self.own(vk.vkFreeMemory, vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=needs.size,
            memoryTypeIndex=index), None))
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        mapped = vk.vkMapMemory(self.device, mem, 0, size, 0)
        return buf, mem, int(vk.ffi.cast("uintptr_t", vk.ffi.from_buffer(mapped)))

    def pipeline(self, code: bytes, entry: str, bindings: list[dict[str, Any]]) -> tuple:
        set_layout = self.own(vk.vkDestroyDescriptorSetLayout, vk.vkCreateDescriptorSetLayout(
            self.device, vk.VkDescriptorSetLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            bindingCount=len(bindings), pBindings=[vk.VkDescriptorSetLayoutBinding(
                binding=b["binding"], descriptorType=DESCRIPTORS[b["descriptor_type"]],
                descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                for b in bindings]), None))
        layout = self.own(vk.vkDestroyPipelineLayout, vk.vkCreatePipelineLayout(
            self.device, vk.VkPipelineLayoutCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1,
                pSetLayouts=[set_layout]), None))
        module = self.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(
            self.device, vk.VkShaderModuleCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                pCode=code), None))
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName=entry)
        pipeline = self.own(vk.vkDestroyPipeline, vk.vkCreateComputePipelines(
            self.device, vk.VK_NULL_HANDLE, 1, [vk.VkComputePipelineCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage,
                layout=layout)], None)[0])
        return pipeline, layout, set_layout


def run_manifest(directory: str | Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    root = Path(directory)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["schema"] == "tensorsmith.spirv-manifest" and manifest["version"] == 1
    req = manifest["requirements"]
    host = Host(req["features"], req["device_extensions_vulkan_1_1"])
    params = (root / manifest["params"]["file"]).read_bytes()

    # One buffer per manifest buffer; params copied in, inputs written by the host.
    buffers = {}
    for b in manifest["buffers"]:
        buf, _, address = host.buffer(b["alloc_bytes"])
        buffers[b["id"]] = (buf, address)
        if b["kind"] == "param" and b["nbytes"]:
            start = b["params_offset"]
            ctypes.memmove(address, params[start:start + b["nbytes"]], b["nbytes"])
    for io in manifest["inputs"]:
        array = np.ascontiguousarray(inputs[io["name"]], dtype=io["dtype"])
        assert list(array.shape) == io["shape"]
        ctypes.memmove(buffers[io["buffer"]][1], array.ctypes.data, array.nbytes)

    dispatches = manifest["dispatches"]
    total = sum(len(s["bindings"]) for d in dispatches for s in d["descriptor_sets"])
    pool = host.own(vk.vkDestroyDescriptorPool, vk.vkCreateDescriptorPool(
        host.device, vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=len(dispatches),
            poolSizeCount=1, pPoolSizes=[vk.VkDescriptorPoolSize(
                type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=max(total, 1))]),
        None))
    commands = host.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(
        host.device, vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=host.family),
        None))
    cmd = vk.vkAllocateCommandBuffers(host.device, vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=commands,
        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    for d in dispatches:
        assert d["push_constants"] == [] and len(d["descriptor_sets"]) == 1
        (dset,) = d["descriptor_sets"]
        code = (root / d["spv"]).read_bytes()
        pipeline, layout, set_layout = host.pipeline(code, d["entry_point"], dset["bindings"])
        handle = vk.vkAllocateDescriptorSets(host.device, vk.VkDescriptorSetAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, descriptorPool=pool,
            descriptorSetCount=1, pSetLayouts=[set_layout]))[0]
        writes = [vk.VkWriteDescriptorSet(
            sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=handle,
            dstBinding=b["binding"], descriptorCount=1,
            descriptorType=DESCRIPTORS[b["descriptor_type"]],
            pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=buffers[b["buffer"]][0],
                                                   offset=b["offset"], range=b["range"])])
            for b in dset["bindings"]]
        vk.vkUpdateDescriptorSets(host.device, len(writes), writes, 0, None)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, dset["set"],
                                   1, [handle], 0, None)
        vk.vkCmdDispatch(cmd, *d["workgroup_count"])
        barrier = d["barrier_after"]
        vk.vkCmdPipelineBarrier(
            cmd, STAGES[barrier["src_stage"]], STAGES[barrier["dst_stage"]], 0, 1,
            [vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                srcAccessMask=_bits(barrier["src_access"]),
                                dstAccessMask=_bits(barrier["dst_access"]))], 0, None, 0, None)
    vk.vkCmdPipelineBarrier(  # make the results visible to the host
        cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
        [vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                            dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)], 0, None, 0, None)
    vk.vkEndCommandBuffer(cmd)
    fence = host.own(vk.vkDestroyFence, vk.vkCreateFence(host.device, vk.VkFenceCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None))
    vk.vkQueueSubmit(host.queue, 1, [vk.VkSubmitInfo(
        sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1, pCommandBuffers=[cmd])],
        fence)
    vk.vkWaitForFences(host.device, 1, [fence], vk.VK_TRUE, 60 * 10**9)

    results = {}
    for io in manifest["outputs"]:
        out = np.empty(io["shape"], io["dtype"])
        ctypes.memmove(out.ctypes.data, buffers[io["buffer"]][1], out.nbytes)
        results[io["name"]] = out
    host.close()
    return results


def _bits(names: list[str]) -> int:
    value = 0
    for n in names:
        value |= ACCESS[n]
    return value
