"""The ``choose`` hook through which every default schedule rule takes its free
parameters.

A rule asks ``choose(stage, knob, default)`` for each parameter it would otherwise fix
(a tile size, a loop order, whether to run in parallel), passing its own choice as the
default. ``build`` passes :func:`default_choice`, so every rule keeps its choice; the
auto-tuner first passes a recorder (:class:`KnobRecorder`) to learn which knobs each
stage has and what the rules chose, then answers with other values. The default
schedule is therefore the tuner's default point by construction, not by imitation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..te.schedule import Stage

Choose = Callable[[Stage, str, Any], Any]


def default_choice(st: Stage, knob: str, default: Any) -> Any:
    return default


class KnobRecorder:
    """A ``choose`` that keeps every rule's default: ``knobs[stage name][knob]``."""

    def __init__(self) -> None:
        self.knobs: dict[str, dict[str, Any]] = {}

    def __call__(self, st: Stage, knob: str, default: Any) -> Any:
        self.knobs.setdefault(st.name, {})[knob] = default
        return default
