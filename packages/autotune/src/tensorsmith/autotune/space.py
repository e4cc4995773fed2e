"""The search space of one task: a sketch per stage, and configs that choose every knob.

A config is a tuple of knob values (hashable, so the search can remember what it has
seen). ``steps(config)`` replays the sketches on a fresh schedule and returns the
schedule steps a tuning record stores; those, not the config, are what gets measured,
recorded and applied by ``build``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from tensorsmith.ir.schedules.epilogue import stage_readers
from tensorsmith.ir.te.schedule import Schedule, Step

from .sketches import Knob, Sketch, sketch_for
from .task import Task

Config = tuple[Any, ...]


class KnobSpace:
    """Configs over the knobs of per-stage sketches: sampling, mutation, crossover. A
    subclass says what the sketches are (``sketches``, ``knobs``) and how a config
    becomes a schedule (``schedule``)."""

    sketches: Sequence[Any]  # each with .knobs, .valid(values) and .seeds()
    knobs: list[tuple[int, Knob]]

    # -- configs --------------------------------------------------------------------
    def _values(self, config: Config) -> list[dict[str, Any]]:
        values: list[dict[str, Any]] = [{} for _ in self.sketches]
        for (i, knob), value in zip(self.knobs, config, strict=True):
            values[i][knob.name] = value
        return values

    def valid(self, config: Config) -> bool:
        return all(sk.valid(v) for sk, v in zip(self.sketches, self._values(config)))

    def default(self) -> Config:
        """The config of the default schedule."""
        return tuple(k.default for _, k in self.knobs)

    def seeds(self) -> list[Config]:
        """The default config, then each alternative rule a sketch knows (e.g. a
        convolution's vector loop over output channels), the rest left at the default:
        where the search starts, and what random samples stay near."""
        out = [self.default()]
        for i, sk in enumerate(self.sketches):
            for values in sk.seeds():
                config = tuple(_nearest(k.choices, values[k.name])
                               if j == i and k.name in values else c
                               for (j, k), c in zip(self.knobs, out[0]))
                if config not in out and self.valid(config):
                    out.append(config)
        return out

    def sample(self, rng: random.Random, keep_default: float = 0.0, tries: int = 100,
               base: Config | None = None) -> Config:
        """A random valid config (``base`` if none turns up in ``tries``); each knob keeps
        its value in ``base`` (default: the default config) with probability
        ``keep_default``."""
        base = base or self.default()
        for _ in range(tries):
            config = tuple(b if rng.random() < keep_default else rng.choice(k.choices)
                           for (_, k), b in zip(self.knobs, base))
            if self.valid(config):
                return config
        return base

    def mutate(self, config: Config, rng: random.Random, tries: int = 50) -> Config:
        """``config`` with one or two knobs changed (tile sizes, order, annotations)."""
        free = [i for i, (_, k) in enumerate(self.knobs) if len(k.choices) > 1]
        if not free:
            return config
        for _ in range(tries):
            new = list(config)
            for i in rng.sample(free, min(len(free), rng.choice((1, 1, 2)))):
                new[i] = rng.choice([c for c in self.knobs[i][1].choices if c != config[i]])
            out = tuple(new)
            if self.valid(out):
                return out
        return config

    def crossover(self, a: Config, b: Config, rng: random.Random) -> Config:
        """Each stage's knobs from one parent or the other (stages are independent)."""
        pick = [rng.random() < 0.5 for _ in self.sketches]
        out = tuple(x if pick[i] else y for (i, _), x, y in zip(self.knobs, a, b))
        return out if self.valid(out) else a

    # -- schedules ------------------------------------------------------------------
    def schedule(self, config: Config) -> Schedule:
        raise NotImplementedError

    def steps(self, config: Config) -> list[Step]:
        return list(self.schedule(config).steps)

    def size(self) -> int:
        return math.prod(len(k.choices) for _, k in self.knobs)


def _nearest(choices: tuple[Any, ...], value: Any) -> Any:
    """``value`` if it is a choice, else the closest numeric choice (tile sizes the
    seeds name may exceed a small axis)."""
    if value in choices or isinstance(value, bool) or not isinstance(value, int):
        return value
    return min(choices, key=lambda c: (abs(c - value), -c))


class SearchSpace(KnobSpace):
    """All schedules the CPU sketches of ``task`` can express."""

    def __init__(self, task: Task) -> None:
        self.task = task
        _, outputs = task.compute()
        self.outputs = outputs
        probe = Schedule(outputs)
        out_ids = {t.uid for t in outputs}
        readers = stage_readers(probe)
        constants = frozenset(f"in{i}" for i in task.constant_inputs)  # group_compute's names
        self.sketches: list[Sketch] = [sketch_for(st, out_ids, readers, constants)
                                       for st in probe.stages]
        self.knobs = [(i, k) for i, sk in enumerate(self.sketches) for k in sk.knobs]

    def schedule(self, config: Config) -> Schedule:
        s = Schedule(self.outputs)
        for sk, values in zip(self.sketches, self._values(config)):
            sk.apply(s, values)
        return s


def steps_key(steps: list[Step] | list[list[Any]]) -> str:
    """A canonical string of a step list: equal schedules, equal keys (for de-duplication)."""
    import json

    data = [s.to_json() if isinstance(s, Step) else list(s) for s in steps]
    return json.dumps(data, separators=(",", ":"))
