"""Recording the model's one command buffer, and submitting it.

The command buffer is recorded once, at load, because nothing it refers to changes
between runs: (staging only) copy the inputs up, then every dispatch of every step with
a compute-to-compute memory barrier after each (simplest correct: dispatches of a step
depend on each other, and the memory plan reuses ranges between steps, which makes even
independent-looking steps write-after-read hazards), then (staging only) copy the
outputs down, and a final barrier that makes the results visible to the host. A run is
one vkQueueSubmit and a wait on the model's fence.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from tensorsmith.runtime.errors import DeviceError

from .context import DeviceContext
from .instance import vk

__all__ = ["CommandRecorder", "Copy", "Submitter"]

#: (source VkBuffer, destination VkBuffer, source offset, destination offset, bytes)
Copy = tuple[Any, Any, int, int, int]


class CommandRecorder:
    """Thin helpers over ``vkCmd*`` for one command buffer being recorded."""

    def __init__(self, cmd: Any) -> None:
        self.cmd = cmd
        v = vk()
        v.vkBeginCommandBuffer(cmd, v.VkCommandBufferBeginInfo(
            sType=v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))

    def copies(self, copies: Iterable[Copy]) -> None:
        v = vk()
        for src, dst, src_offset, dst_offset, size in copies:
            if size:
                v.vkCmdCopyBuffer(self.cmd, src, dst, 1, [v.VkBufferCopy(
                    srcOffset=src_offset, dstOffset=dst_offset, size=size)])

    def dispatch(self, pipeline: Any, layout: Any, descriptor_set: Any,
                 grid: tuple[int, int, int]) -> None:
        if 0 in grid:
            return
        v = vk()
        v.vkCmdBindPipeline(self.cmd, v.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        v.vkCmdBindDescriptorSets(self.cmd, v.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1,
                                  [descriptor_set], 0, v.ffi.NULL)
        v.vkCmdDispatch(self.cmd, *grid)

    def barrier(self, src: str, dst: str) -> None:
        """A global memory barrier between two kinds of work: "compute", "transfer", "host"."""
        v = vk()
        stage = {"compute": v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 "transfer": v.VK_PIPELINE_STAGE_TRANSFER_BIT,
                 "host": v.VK_PIPELINE_STAGE_HOST_BIT}
        write = {"compute": v.VK_ACCESS_SHADER_WRITE_BIT,
                 "transfer": v.VK_ACCESS_TRANSFER_WRITE_BIT, "host": v.VK_ACCESS_HOST_WRITE_BIT}
        access = {"compute": v.VK_ACCESS_SHADER_READ_BIT | v.VK_ACCESS_SHADER_WRITE_BIT,
                  "transfer": v.VK_ACCESS_TRANSFER_READ_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT,
                  "host": v.VK_ACCESS_HOST_READ_BIT}
        memory = v.VkMemoryBarrier(sType=v.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   srcAccessMask=write[src], dstAccessMask=access[dst])
        v.vkCmdPipelineBarrier(self.cmd, stage[src], stage[dst], 0, 1, [memory], 0, v.ffi.NULL,
                               0, v.ffi.NULL)

    def end(self) -> None:
        vk().vkEndCommandBuffer(self.cmd)


class Submitter:
    """The model's command pool, command buffer and fence; ``run`` submits and waits."""

    def __init__(self, ctx: DeviceContext) -> None:
        v = vk()
        self.ctx = ctx
        self.pool = v.vkCreateCommandPool(ctx.handle, v.VkCommandPoolCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
            queueFamilyIndex=ctx.queue_family), None)
        self.cmd = v.vkAllocateCommandBuffers(ctx.handle, v.VkCommandBufferAllocateInfo(
            sType=v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=self.pool,
            level=v.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self.fence = v.vkCreateFence(ctx.handle, v.VkFenceCreateInfo(
            sType=v.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
        self.timeout_ns = int(float(os.environ.get("TSM_VULKAN_TIMEOUT_S", "600")) * 1e9)
        self._submit = v.VkSubmitInfo(sType=v.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                      commandBufferCount=1, pCommandBuffers=[self.cmd])

    def run(self, where: str) -> None:
        v = vk()
        try:
            with self.ctx.submit_lock:
                v.vkQueueSubmit(self.ctx.queue, 1, [self._submit], self.fence)
            v.vkWaitForFences(self.ctx.handle, 1, [self.fence], v.VK_TRUE, self.timeout_ns)
        except v.VkTimeout:
            raise DeviceError(f"{where} did not finish on device {self.ctx.name} within "
                              f"{self.timeout_ns / 1e9:g} s (TSM_VULKAN_TIMEOUT_S)") from None
        except (v.VkError, v.VkException) as e:
            raise DeviceError(f"running {where} on device {self.ctx.name} failed: "
                              f"{type(e).__name__}") from None
        v.vkResetFences(self.ctx.handle, 1, [self.fence])

    def reset(self) -> None:
        """Make the command buffer recordable again (after a run: none is pending)."""
        vk().vkResetCommandPool(self.ctx.handle, self.pool, 0)

    def destroy(self) -> None:
        v = vk()
        v.vkDestroyFence(self.ctx.handle, self.fence, None)
        v.vkDestroyCommandPool(self.ctx.handle, self.pool, None)  # frees the command buffer
