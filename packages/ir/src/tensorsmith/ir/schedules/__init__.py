"""Default schedules per target family: the rules most users will ever run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..target import Target
from ..te.schedule import Schedule
from ..te.tensor import Tensor
from .cpu import schedule_cpu
from .knobs import Choose, KnobRecorder, default_choice

#: ``schedule(outputs, constants=..., choose=...)``: a target's default rules.
ScheduleFn = Callable[..., Schedule]


def default_schedule(target: str | Target) -> ScheduleFn:
    """The default rules of ``target``'s family, sized by the CPU it compiles for: the
    one place that decides which rules ``build`` and the auto-tuner's baseline use."""
    tgt = Target.parse(target)
    if tgt.family == "cpu":
        from ..codegen import target_resources

        resources = target_resources(tgt)

        def cpu(outputs: list[Tensor], constants: frozenset[str] = frozenset(),
                choose: Choose = default_choice) -> Schedule:
            return schedule_cpu(outputs, resources=resources, choose=choose,
                                constants=constants)

        return cpu
    from .gpu import schedule_gpu

    def gpu(outputs: list[Tensor], constants: frozenset[str] = frozenset(),
            choose: Choose = default_choice) -> Schedule:
        return schedule_gpu(outputs, choose=choose)

    return gpu


def rule_knobs(schedule: ScheduleFn, outputs: list[Tensor],
               constants: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """The knobs each stage's rule asks for, with the rule's choice: what a search
    space starts from (``knobs[stage name][knob] = default``)."""
    recorder = KnobRecorder()
    schedule(outputs, constants=constants, choose=recorder)
    return recorder.knobs


__all__ = ["Choose", "ScheduleFn", "default_choice", "default_schedule", "rule_knobs",
           "schedule_cpu"]
