"""The search space of one task: the knobs its target's default rules ask for.

The space has no description of schedules of its own. It runs the target's default
rules (``tensorsmith.ir.schedules.default_schedule``) once with a recorder, which
learns the knobs every stage's rule asks for, their choices and the rules' defaults;
a config is one value per knob, and its schedule is those same rules run again with a
``choose`` that answers from the config. The default config is therefore the default
schedule, on every target family, and a knob added to a rule is searched without a
change here. A combination a rule cannot schedule correctly raises ``KnobConflict``
and is not in the space.

A config is a tuple of knob values (hashable, so the search can remember what it has
seen). ``steps(config)`` returns the schedule steps a tuning record stores; those, not
the config, are what gets measured, recorded and applied by ``build``, so records
outlive any change to the knobs.

On CPU targets a convolution that a fast algorithm can compute (:data:`FAST_CONVOLUTIONS`)
adds one knob, ``algorithm``: each choice is its own compute with its own stages (the
knobs of the others do not matter then), whose schedule begins with the ``layout`` step
that stores the weights transformed.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

from tensorsmith.ir.lowering import constant_conv_weights, transformed_start
from tensorsmith.ir.schedules import Knob, KnobConflict, default_schedule, rule_knobs
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Schedule, Stage, Step
from tensorsmith.ir.te.tensor import Tensor

from .task import Task

Config = tuple[Any, ...]
Values = dict[str, Any]
#: Knobs that pick between structures rather than sizes (an algorithm, a weight layout,
#: where the vector lanes run, a loop order, inlining): each other choice of one is a
#: seed, measured early by the search.
STRUCTURAL_KNOBS = ("algorithm", "pack", "vec_axis", "outer_order", "flatten", "inline")
#: Configs whose validity is remembered (validity costs one run of the rules).
VALID_CACHE = 1 << 14


@dataclass
class StageKnobs:
    """The knobs one stage's rule asks for (``stage`` is "" for the choice of
    algorithm), and the algorithm whose compute the stage belongs to (-1: all)."""

    stage: str
    knobs: tuple[Knob, ...]
    owner: int = 0


@dataclass
class Algorithm:
    """One way to compute a task: the direct compute (no transforms), or one that reads
    some weights transformed (``transforms``: input index -> transform name)."""

    name: str
    transforms: dict[int, str]
    inputs: list[Tensor]
    outputs: list[Tensor]
    stages: list[StageKnobs] = field(default_factory=list)


class SearchSpace:
    """All schedules the target's rules make for ``task`` under other answers."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.rules = default_schedule(task.target)
        self.constants = frozenset(f"in{i}" for i in task.constant_inputs)  # group_compute's
        self.algorithms = [self._algorithm("direct", {}, 0)]
        if Target.parse(task.target).family == "cpu":
            for k, (transform, found) in enumerate(fast_convolutions(task).items(), 1):
                self.algorithms.append(self._algorithm(transform, found, k))
        self.stages: list[StageKnobs] = []
        if len(self.algorithms) > 1:
            names = tuple(a.name for a in self.algorithms)
            default = next(iter(task.default_transforms.values()), "direct")
            self.stages.append(StageKnobs("", (Knob("algorithm", names, default),), -1))
        for alg in self.algorithms:
            self.stages += alg.stages
        self.knobs: list[tuple[int, Knob]] = [
            (i, k) for i, sk in enumerate(self.stages) for k in sk.knobs]
        self._valid: dict[Config, bool] = {}

    def _algorithm(self, name: str, transforms: dict[int, str], owner: int) -> Algorithm:
        inputs, outputs = self.task.compute(transforms)
        alg = Algorithm(name, transforms, inputs, outputs)
        knobs = rule_knobs(self.rules, outputs, self.constants, self._start(alg))
        alg.stages = [StageKnobs(stage, tuple(k.values()), owner)
                      for stage, k in knobs.items()]
        return alg

    @staticmethod
    def _start(alg: Algorithm) -> Schedule:
        """A schedule of ``alg``'s compute with its weights stored transformed."""
        return transformed_start(alg.inputs, alg.outputs, alg.transforms)

    # -- configs --------------------------------------------------------------------
    def _values(self, config: Config) -> list[Values]:
        values: list[Values] = [{} for _ in self.stages]
        for (i, knob), value in zip(self.knobs, config, strict=True):
            values[i][knob.name] = value
        return values

    def _chosen(self, values: list[Values]) -> int:
        if not self.stages or self.stages[0].owner != -1:
            return 0
        return [a.name for a in self.algorithms].index(values[0]["algorithm"])

    def default(self) -> Config:
        """The config of the default schedule."""
        return tuple(k.default for _, k in self.knobs)

    def valid(self, config: Config) -> bool:
        """Whether the rules can schedule ``config`` (they raise ``KnobConflict`` where
        not)."""
        known = self._valid.get(config)
        if known is None:
            try:
                self.schedule(config)
                known = True
            except KnobConflict:
                known = False
            if len(self._valid) >= VALID_CACHE:
                self._valid.clear()
            self._valid[config] = known
        return known

    def seeds(self) -> list[Config]:
        """The default config, then each other choice of a structural knob
        (:data:`STRUCTURAL_KNOBS`), the rest left at the default, where that makes
        another schedule: where the search starts, and what random samples stay near."""
        base = self.default()
        out, seen = [base], {steps_key(self.steps(base))}
        for j, (_, knob) in enumerate(self.knobs):
            if knob.name not in STRUCTURAL_KNOBS:
                continue
            for choice in knob.choices:
                config = (*base[:j], choice, *base[j + 1:])
                if config in out:
                    continue
                try:
                    key = steps_key(self.steps(config))
                except KnobConflict:  # not in the space
                    continue
                if key not in seen:
                    seen.add(key)
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
        pick = [rng.random() < 0.5 for _ in self.stages]
        out = tuple(x if pick[i] else y for (i, _), x, y in zip(self.knobs, a, b))
        return out if self.valid(out) else a

    def size(self) -> int:
        return math.prod(len(k.choices) for _, k in self.knobs)

    # -- schedules ------------------------------------------------------------------
    def io(self, config: Config) -> tuple[list[Tensor], list[Tensor]]:
        """The compute (inputs, outputs) that ``config``'s schedule is for."""
        alg = self.algorithms[self._chosen(self._values(config))]
        return alg.inputs, alg.outputs

    def schedule(self, config: Config) -> Schedule:
        """The rules run with ``config``'s answers (``KnobConflict`` where they cannot)."""
        values = self._values(config)
        k = self._chosen(values)
        alg = self.algorithms[k]
        answers = {sk.stage: v for sk, v in zip(self.stages, values) if sk.owner == k}

        def choose(st: Stage, knob: str, default: Any, choices: Any = ()) -> Any:
            return answers.get(st.name, {}).get(knob, default)

        return self.rules(alg.outputs, constants=self.constants, choose=choose,
                          start=self._start(alg))

    def steps(self, config: Config) -> list[Step]:
        return list(self.schedule(config).steps)


#: Weight transforms that compute a convolution faster than the direct loop nest, tried
#: by the search wherever they apply (ops/winograd.py).
FAST_CONVOLUTIONS = ("winograd_f2_3", "winograd_f4_3")


def fast_convolutions(task: Task) -> dict[str, dict[int, str]]:
    """Per fast algorithm that applies to some convolution of ``task`` whose weights are
    constant: the inputs it transforms."""
    from tensorsmith.ir.ops.winograd import eligible

    out: dict[str, dict[int, str]] = {}
    for transform in FAST_CONVOLUTIONS:
        found = {}
        for node, i in constant_conv_weights(task.group, task.constant_inputs):
            if (node.inputs[0].dtype == "float32"  # the tables are float32
                    and eligible(node.attrs, node.inputs[1].shape, transform)):
                found[i] = transform
        if found:
            out[transform] = found
    return out


def steps_key(steps: list[Step] | list[list[Any]]) -> str:
    """A canonical string of a step list: equal schedules, equal keys (for de-duplication)."""
    data = [s.to_json() if isinstance(s, Step) else list(s) for s in steps]
    return json.dumps(data, separators=(",", ":"))
