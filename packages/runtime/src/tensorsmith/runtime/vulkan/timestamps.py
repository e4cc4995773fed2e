"""Per-step device time from timestamp queries, for ``GraphModule.profile``.

The command buffer writes timestamp 0 before the first step and timestamp ``i + 1``
after step ``i`` (past the barrier that ends it, at the bottom of the pipe, so it marks
the completion of everything before it). Step ``i`` took ``t[i+1] - t[i]`` ticks of
``timestampPeriod`` nanoseconds. Devices whose compute queue has no timestamps
(timestampValidBits = 0) cannot profile; running still works.
"""

from __future__ import annotations

from typing import Any

from tensorsmith.runtime.errors import DeviceError

from .context import DeviceContext
from .instance import vk

__all__ = ["StepTimer"]


class StepTimer:
    """A query pool of ``steps + 1`` timestamps and their conversion to milliseconds."""

    def __init__(self, ctx: DeviceContext, steps: int) -> None:
        self.ctx = ctx
        self.count = steps + 1
        self.supported = ctx.physical.timestamp_bits > 0
        self.pool: Any = None
        if self.supported:
            v = vk()
            self.pool = v.vkCreateQueryPool(ctx.handle, v.VkQueryPoolCreateInfo(
                sType=v.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                queryType=v.VK_QUERY_TYPE_TIMESTAMP, queryCount=self.count), None)

    def reset(self, cmd: Any) -> None:
        if self.supported:
            vk().vkCmdResetQueryPool(cmd, self.pool, 0, self.count)

    def mark(self, cmd: Any, index: int) -> None:
        if self.supported:
            v = vk()
            v.vkCmdWriteTimestamp(cmd, v.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool, index)

    def step_ms(self, where: str) -> list[float]:
        """The milliseconds of each step of the last run."""
        if not self.supported:
            raise DeviceError(f"device {self.ctx.name} has no timestamps on its compute queue, "
                              f"so the steps of {where} cannot be timed; run() still works")
        v = vk()
        data = v.ffi.new("uint64_t[]", self.count)
        v.vkGetQueryPoolResults(self.ctx.handle, self.pool, 0, self.count, 8 * self.count,
                                data, 8, v.VK_QUERY_RESULT_64_BIT | v.VK_QUERY_RESULT_WAIT_BIT)
        bits = self.ctx.physical.timestamp_bits
        mask = (1 << bits) - 1 if bits < 64 else (1 << 64) - 1
        period_ns = float(self.ctx.physical.limits["timestampPeriod"])
        ticks = [int(data[i]) & mask for i in range(self.count)]
        return [((ticks[i + 1] - ticks[i]) & mask) * period_ns * 1e-6
                for i in range(self.count - 1)]

    def destroy(self) -> None:
        if self.pool is not None:
            vk().vkDestroyQueryPool(self.ctx.handle, self.pool, None)
            self.pool = None
