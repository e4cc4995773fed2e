"""The ``choose`` hook through which every default schedule rule takes its free
parameters, and the knobs that hook records.

A rule asks ``choose(stage, knob, default, choices=...)`` for each parameter it would
otherwise fix (a tile size, a loop order, whether to run in parallel), passing its own
choice as the default and the values it can also schedule correctly as the choices.
``build`` passes :func:`default_choice`, so every rule keeps its choice; the auto-tuner
first passes a :class:`KnobRecorder` to learn which knobs each stage has, with their
choices and defaults, then answers with other values. The default schedule is
therefore the tuner's default point by construction, not by imitation, and the search
space is whatever the rules say it is: there is no second description of it.

A rule that is answered a combination it cannot schedule correctly (a register tile
too large to stay in registers, a reduction loop above a cached tile) raises
:class:`KnobConflict`; the tuner treats that combination as outside the space.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..te.schedule import Stage


@dataclass(frozen=True)
class Knob:
    """A free parameter of a stage's rule: its name, its choices, and the rule's value."""

    name: str
    choices: tuple[Any, ...]
    default: Any


class Choose(Protocol):
    def __call__(self, st: Stage, knob: str, default: Any,
                 choices: Sequence[Any] = ()) -> Any: ...


class KnobConflict(ValueError):
    """Answers a rule cannot schedule correctly together."""


def default_choice(st: Stage, knob: str, default: Any, choices: Sequence[Any] = ()) -> Any:
    return default


def conflict_unless(ok: bool, why: str) -> None:
    """Raise :class:`KnobConflict` with ``why`` unless ``ok``."""
    if not ok:
        raise KnobConflict(why)


class KnobRecorder:
    """A ``choose`` that keeps every rule's default and records the knobs asked:
    ``knobs[stage name][knob] = Knob`` (the default is always one of the choices)."""

    def __init__(self) -> None:
        self.knobs: dict[str, dict[str, Knob]] = {}

    def __call__(self, st: Stage, knob: str, default: Any,
                 choices: Sequence[Any] = ()) -> Any:
        options = tuple(choices)
        if default not in options:
            options = (*options, default)
        self.knobs.setdefault(st.name, {})[knob] = Knob(knob, options, default)
        return default
