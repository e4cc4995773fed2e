"""Default schedules per target family: the rules most users will ever run."""

from __future__ import annotations

from collections.abc import Callable

from ..target import Target
from ..te.schedule import Schedule
from ..te.tensor import Tensor
from .knobs import Choose, Knob, KnobConflict, KnobRecorder, default_choice
from .rules import schedule_cpu, schedule_gpu

#: ``schedule(outputs, constants=..., choose=..., start=...)``: a target's default rules.
ScheduleFn = Callable[..., Schedule]


def default_schedule(target: str | Target) -> ScheduleFn:
    """The default rules of ``target``'s family, sized by the CPU or GPU it compiles for
    (the GPU's cooperative matrices, if its target string names them): the
    one place that decides which rules ``build`` and the auto-tuner use."""
    tgt = Target.parse(target)
    if tgt.family == "cpu":
        from ..codegen import target_resources

        resources = target_resources(tgt)

        def cpu(outputs: list[Tensor], constants: frozenset[str] = frozenset(),
                choose: Choose = default_choice, start: Schedule | None = None) -> Schedule:
            return schedule_cpu(outputs, resources=resources, choose=choose,
                                constants=constants, start=start)

        return cpu

    from ..codegen import gpu_resources

    facts = gpu_resources(tgt)

    def gpu(outputs: list[Tensor], constants: frozenset[str] = frozenset(),
            choose: Choose = default_choice, start: Schedule | None = None) -> Schedule:
        return schedule_gpu(outputs, choose=choose, start=start, resources=facts)

    return gpu


def rule_knobs(schedule: ScheduleFn, outputs: list[Tensor],
               constants: frozenset[str] = frozenset(), start: Schedule | None = None
               ) -> dict[str, dict[str, Knob]]:
    """The knobs each stage's rule asks for, with their choices and the rule's choice
    as the default: a search space (``knobs[stage name][knob name]``)."""
    recorder = KnobRecorder()
    schedule(outputs, constants=constants, choose=recorder, start=start)
    return recorder.knobs


__all__ = ["Choose", "Knob", "KnobConflict", "ScheduleFn", "default_choice",
           "default_schedule", "rule_knobs", "schedule_cpu", "schedule_gpu"]
