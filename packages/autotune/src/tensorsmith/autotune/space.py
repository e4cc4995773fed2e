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
from dataclasses import dataclass
from typing import Any

from tensorsmith.ir.schedules import default_schedule, rule_knobs
from tensorsmith.ir.schedules.epilogue import stage_readers
from tensorsmith.ir.te.schedule import Schedule, Step, input_tensors
from tensorsmith.ir.te.tensor import Tensor

from .sketches import AlgorithmSketch, Knob, Sketch, sketch_for
from .task import Task

Config = tuple[Any, ...]


class KnobSpace:
    """Configs over the knobs of per-stage sketches: sampling, mutation, crossover. A
    subclass says what the sketches are (``sketches``, ``knobs``) and how a config
    becomes a schedule (``schedule``)."""

    task: Task
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
    def io(self, config: Config) -> tuple[list[Tensor], list[Tensor]]:
        """The compute (inputs, outputs) that ``config``'s schedule is for."""
        return self.task.compute()

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


@dataclass
class Algorithm:
    """One way to compute a task: the direct compute (no transforms), or one that reads
    some weights transformed (``transforms``: input index -> transform name), with the
    sketches of its stages."""

    name: str
    transforms: dict[int, str]
    inputs: list[Tensor]
    outputs: list[Tensor]
    sketches: list[Sketch]


class SearchSpace(KnobSpace):
    """All schedules the CPU sketches of ``task`` can express.

    A convolution that a fast algorithm can compute (:data:`FAST_CONVOLUTIONS`) has one
    more knob, ``algorithm``: each choice is its own compute with its own sketches (the
    knobs of the others do not matter then), and its schedule begins with the ``layout``
    step that stores the weights transformed."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.algorithms = [self._algorithm(task, "direct", {})]
        for transform, found in fast_convolutions(task).items():
            self.algorithms.append(self._algorithm(task, transform, found))
        self.sketches: list[Any] = list(self.algorithms[0].sketches)
        self.owner = [0] * len(self.sketches)  # the algorithm each sketch belongs to
        if len(self.algorithms) > 1:
            self.sketches.insert(0, AlgorithmSketch([a.name for a in self.algorithms]))
            self.owner.insert(0, -1)
            for k, alg in enumerate(self.algorithms[1:], 1):
                self.sketches += alg.sketches
                self.owner += [k] * len(alg.sketches)
        self.knobs = [(i, k) for i, sk in enumerate(self.sketches) for k in sk.knobs]

    @staticmethod
    def _algorithm(task: Task, name: str, transforms: dict[int, str]) -> Algorithm:
        inputs, outputs = task.compute(transforms)
        probe = Schedule(outputs)
        out_ids = {t.uid for t in outputs}
        readers = stage_readers(probe)
        constants = frozenset(f"in{i}" for i in task.constant_inputs)  # group_compute's names
        rules = rule_knobs(default_schedule(task.target), outputs, constants)
        return Algorithm(name, transforms, inputs, outputs,
                         [sketch_for(st, out_ids, readers, constants, rules.get(st.name))
                          for st in probe.stages])

    def _chosen(self, values: list[dict[str, Any]]) -> int:
        if self.owner[0] != -1:
            return 0
        names = [a.name for a in self.algorithms]
        return names.index(values[0]["algorithm"])

    def valid(self, config: Config) -> bool:
        values = self._values(config)
        k = self._chosen(values)
        return all(sk.valid(v) for sk, v, owner in zip(self.sketches, values, self.owner)
                   if owner in (-1, k))

    def io(self, config: Config) -> tuple[list[Tensor], list[Tensor]]:
        """The compute (inputs, outputs) that ``config``'s schedule is for."""
        alg = self.algorithms[self._chosen(self._values(config))]
        return alg.inputs, alg.outputs

    def schedule(self, config: Config) -> Schedule:
        values = self._values(config)
        k = self._chosen(values)
        alg = self.algorithms[k]
        s = Schedule(alg.outputs)
        for index, transform in alg.transforms.items():
            name = f"in{index}"
            reader = next(st for st in s.stages
                          if any(t.name == name for t in input_tensors(st.tensor)))
            s.layout(reader.name, name, tuple(range(alg.inputs[index].ndim)), None, transform)
        for sk, v, owner in zip(self.sketches, values, self.owner):
            if owner == k:
                sk.apply(s, v)
        return s


#: Weight transforms that compute a convolution faster than the direct loop nest, tried
#: by the search wherever they apply (ops/winograd.py).
FAST_CONVOLUTIONS = ("winograd_f2_3", "winograd_f4_3")


def fast_convolutions(task: Task) -> dict[str, dict[int, str]]:
    """Per fast algorithm that applies to some convolution of ``task`` whose weights are
    constant: the inputs it transforms."""
    from tensorsmith.ir.ops.winograd import eligible

    group = task.group
    index = {v.uid: i for i, v in enumerate(group.inputs)}
    out: dict[str, dict[int, str]] = {}
    for transform in FAST_CONVOLUTIONS:
        found = {}
        for node in group.nodes:
            if (node.op != "conv2d" or node.inputs[1].uid not in index
                    or node.inputs[0].dtype != "float32"):  # the tables are float32
                continue
            i = index[node.inputs[1].uid]
            if i in task.constant_inputs and eligible(node.attrs, node.inputs[1].shape,
                                                      transform):
                found[i] = transform
        if found:
            out[transform] = found
    return out


def steps_key(steps: list[Step] | list[list[Any]]) -> str:
    """A canonical string of a step list: equal schedules, equal keys (for de-duplication)."""
    import json

    data = [s.to_json() if isinstance(s, Step) else list(s) for s in steps]
    return json.dumps(data, separators=(",", ":"))
