"""Compute pipelines and descriptor sets, created once per loaded model.

One pipeline per distinct dispatch (a kernel used by several steps shares its
pipelines), compiled through the device's shared VkPipelineCache, so loading the same
model twice compiles nothing the second time. Each (step, dispatch) gets one descriptor
set, written once: binding ``n`` is the range of the plan buffer the step passes as
that parameter. Nothing here changes after load, which is what lets the command buffer
be recorded once -- except in a model with dynamic shapes, whose sets are rewritten
(and its command buffer recorded again) when a new shape moves its buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

from tensorsmith.runtime.errors import ArtifactError, DeviceError

from .context import DeviceContext
from .instance import vk
from .plan import DispatchSpec, StepSpec, is_spirv

__all__ = ["DescriptorSets", "Pipeline", "Pipelines"]

#: (VkBuffer, offset, range) of the plan buffer a step argument refers to.
Resolver = Callable[[int], tuple[Any, int, int]]


@dataclass
class Pipeline:
    handle: Any
    layout: Any  # VkPipelineLayout
    set_layout: Any  # VkDescriptorSetLayout


class Pipelines:
    """The compute pipeline of every distinct dispatch of a model."""

    def __init__(self, ctx: DeviceContext, steps: list[StepSpec],
                 section: Callable[[str], bytes], where: str) -> None:
        self.ctx = ctx
        self.by_section: dict[str, Pipeline] = {}
        try:
            for step in steps:
                for d in step.dispatches:
                    if d.section not in self.by_section:
                        self._check_limits(d, where)
                        self.by_section[d.section] = self._create(d, section(d.section), where)
        except BaseException:
            self.destroy()
            raise

    def _check_limits(self, d: DispatchSpec, where: str) -> None:
        limits = self.ctx.physical.limits
        size, most = limits["maxComputeWorkGroupSize"], limits["maxComputeWorkGroupInvocations"]
        if prod(d.workgroup) > most or any(w > s for w, s in zip(d.workgroup, size)):
            raise DeviceError(
                f"dispatch {d.name} of {where} needs workgroups of {list(d.workgroup)} "
                f"invocations and device {self.ctx.name} allows at most {most} "
                f"({list(size)} per axis); compile it with a smaller workgroup size")
        counts = limits["maxComputeWorkGroupCount"]
        if any(isinstance(g, int) and g > c for g, c in zip(d.grid, counts)):
            raise DeviceError(f"dispatch {d.name} of {where} needs {list(d.grid)} workgroups "
                              f"and device {self.ctx.name} allows at most {list(counts)}")
        storage = limits["maxPerStageDescriptorStorageBuffers"]
        if len(d.bindings) > storage:
            raise DeviceError(f"dispatch {d.name} of {where} binds {len(d.bindings)} storage "
                              f"buffers and device {self.ctx.name} allows {storage} per shader")

    def _create(self, d: DispatchSpec, code: bytes, where: str) -> Pipeline:
        v, device = vk(), self.ctx.handle
        if not is_spirv(code):
            raise ArtifactError(f"{where}: section {d.section!r} is not a SPIR-V module")
        bindings = [v.VkDescriptorSetLayoutBinding(
            binding=n, descriptorType=v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
            stageFlags=v.VK_SHADER_STAGE_COMPUTE_BIT) for n, _ in d.bindings]
        set_layout = v.vkCreateDescriptorSetLayout(device, v.VkDescriptorSetLayoutCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            bindingCount=len(bindings), pBindings=bindings or v.ffi.NULL), None)
        layout = v.vkCreatePipelineLayout(device, v.VkPipelineLayoutCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1,
            pSetLayouts=[set_layout]), None)
        pipeline = Pipeline(None, layout, set_layout)
        module = v.vkCreateShaderModule(device, v.VkShaderModuleCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
            pCode=code), None)
        try:
            stage = v.VkPipelineShaderStageCreateInfo(
                sType=v.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                stage=v.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName=d.entry_point)
            info = v.VkComputePipelineCreateInfo(
                sType=v.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage,
                layout=layout)
            pipeline.handle = v.vkCreateComputePipelines(
                device, self.ctx.pipeline_cache, 1, [info], None)[0]
        except (v.VkError, v.VkException) as e:
            _destroy_pipeline(device, pipeline)
            raise DeviceError(f"device {self.ctx.name} could not build the pipeline of "
                              f"dispatch {d.name} of {where} ({type(e).__name__})") from None
        finally:
            v.vkDestroyShaderModule(device, module, None)
        return pipeline

    def destroy(self) -> None:
        for p in self.by_section.values():
            _destroy_pipeline(self.ctx.handle, p)
        self.by_section = {}


def _destroy_pipeline(device: Any, p: Pipeline) -> None:
    v = vk()
    if p.handle is not None:
        v.vkDestroyPipeline(device, p.handle, None)
    v.vkDestroyPipelineLayout(device, p.layout, None)
    v.vkDestroyDescriptorSetLayout(device, p.set_layout, None)


class DescriptorSets:
    """One descriptor set per (step, dispatch), from one pool, written once."""

    def __init__(self, ctx: DeviceContext, steps: list[StepSpec], pipelines: Pipelines,
                 resolve: Resolver) -> None:
        v, device = vk(), ctx.handle
        self.ctx = ctx
        count = sum(len(s.dispatches) for s in steps)
        descriptors = sum(len(d.bindings) for s in steps for d in s.dispatches)
        self.pool = v.vkCreateDescriptorPool(device, v.VkDescriptorPoolCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=max(count, 1),
            poolSizeCount=1, pPoolSizes=[v.VkDescriptorPoolSize(
                type=v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=max(descriptors, 1))]),
            None)
        self.sets: list[list[Any]] = []
        for step in steps:
            row = []
            for d in step.dispatches:
                layout = pipelines.by_section[d.section].set_layout
                handle = v.vkAllocateDescriptorSets(device, v.VkDescriptorSetAllocateInfo(
                    sType=v.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                    descriptorPool=self.pool, descriptorSetCount=1, pSetLayouts=[layout]))[0]
                self._write(handle, d, step, resolve)
                row.append(handle)
            self.sets.append(row)

    def _write(self, handle: Any, d: DispatchSpec, step: StepSpec, resolve: Resolver) -> None:
        v = vk()
        infos = []
        writes = []
        for binding, param in d.bindings:
            buffer, offset, size = resolve(step.args[param])
            info = v.VkDescriptorBufferInfo(buffer=buffer, offset=offset, range=size)
            infos.append(info)
            writes.append(v.VkWriteDescriptorSet(
                sType=v.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=handle,
                dstBinding=binding, dstArrayElement=0, descriptorCount=1,
                descriptorType=v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[info]))
        if writes:
            v.vkUpdateDescriptorSets(self.ctx.handle, len(writes), writes, 0, v.ffi.NULL)

    def rewrite(self, steps: list[StepSpec], resolve: Resolver) -> None:
        """Point every set at the buffers ``resolve`` gives now (a model with dynamic shapes
        whose buffers moved). Only between runs: no set may be in use."""
        for step, row in zip(steps, self.sets):
            for d, handle in zip(step.dispatches, row):
                self._write(handle, d, step, resolve)

    def destroy(self) -> None:
        vk().vkDestroyDescriptorPool(self.ctx.handle, self.pool, None)
