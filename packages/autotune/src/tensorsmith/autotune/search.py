"""Proposing candidates for one task: random sampling, then cost-model-guided evolution.

Each round starts from a population of the best configs measured so far plus fresh
random samples, scores it with the cost model (features of the lowered candidate),
keeps the better half and refills it with mutations (one or two knobs changed: tile
sizes, loop order, annotations) and crossovers (each stage's knobs from either parent).
After a few generations the best-scored unmeasured candidates are proposed, except a
fraction ``eps`` drawn at random, so the model keeps seeing (and learning from) parts
of the space it rates poorly. The first proposals are the rules (the default config and
the other choices of each structural knob, ``seeds``), then random ones (see
``_random``: partly near those rules).
Candidates are told apart by their steps, not their configs: knobs that do not matter
for a stage produce the same steps and are measured once. The space is the knobs of the
target's default rules (:mod:`.space`), whatever the target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from tensorsmith.ir.lowering import weight_transforms
from tensorsmith.ir.te.lower import lower
from tensorsmith.ir.te.schedule import Step

from .cost_model import CostModel
from .features import NUM_FEATURES, extract_features
from .space import Config, SearchSpace, steps_key
from .task import Task


@dataclass
class Candidate:
    config: Config | None
    steps: list[Step]
    key: str


class TaskSearch:
    """The search state of one task: its space, what was measured, how to propose more."""

    def __init__(self, task: Task, model: CostModel, rng: random.Random,
                 population: int = 256, generations: int = 4, eps: float = 0.1,
                 elite: int = 8) -> None:
        self.task = task
        self.space = SearchSpace(task)
        self.seeds = self.space.seeds()
        self.model = model
        self.rng = rng
        self.population = population
        self.generations = generations
        self.eps = eps
        self.elite = elite
        self.measured: set[str] = set()
        self.good: list[tuple[float, Config]] = []  # (seconds, config) measured without error
        self._features: dict[Config, np.ndarray | None] = {}
        self._steps: dict[Config, tuple[list[Step], str]] = {}

    # -- candidates -----------------------------------------------------------------
    def candidate(self, config: Config) -> Candidate:
        if config not in self._steps:
            steps = self.space.steps(config)
            self._steps[config] = (steps, steps_key(steps))
        steps, key = self._steps[config]
        return Candidate(config, steps, key)

    def features_of_steps(self, steps: list[Step]) -> np.ndarray | None:
        """Features of a candidate given by its steps (for records read back on resume)."""
        from tensorsmith.ir.te.schedule import replay

        inputs, outputs = self.task.compute(weight_transforms(steps))
        try:
            return extract_features(lower(replay(outputs, steps), inputs, outputs))
        except Exception:
            return None

    def features(self, config: Config) -> np.ndarray | None:
        if config not in self._features:
            inputs, outputs = self.space.io(config)
            try:
                func = lower(self.space.schedule(config), inputs, outputs)
                self._features[config] = extract_features(func)
            except Exception:
                self._features[config] = None
        return self._features[config]

    def record(self, candidate: Candidate, seconds: float) -> None:
        """Note a measurement (``inf`` for a failure)."""
        self.measured.add(candidate.key)
        if candidate.config is not None and np.isfinite(seconds):
            self.good.append((seconds, candidate.config))
            self.good.sort(key=lambda x: x[0])

    # -- proposals ------------------------------------------------------------------
    def propose(self, n: int) -> list[Candidate]:
        """Up to ``n`` unmeasured candidates (fewer only when the space seems exhausted)."""
        chosen: dict[str, Candidate] = {}
        for config in self.seeds:  # the rules first: measured once, early
            if len(chosen) < n:
                self._take(config, chosen)
        if self.model.trained:
            n_model = n - round(n * self.eps)
            for config in self._evolve():
                if len(chosen) >= n_model:
                    break
                self._take(config, chosen)
        misses = 0
        while len(chosen) < n and misses < 20 * n + 100:
            before = len(chosen)
            self._take(self._random(), chosen)
            misses += len(chosen) == before
        return list(chosen.values())

    def _take(self, config: Config, chosen: dict[str, Candidate]) -> None:
        cand = self.candidate(config)
        if cand.key in self.measured or cand.key in chosen:
            return
        if self.features(config) is None:  # does not lower: never propose it
            return
        chosen[cand.key] = cand

    def _scores(self, configs: list[Config]) -> np.ndarray:
        feats = [self.features(c) for c in configs]
        x = np.stack([f if f is not None else np.zeros(NUM_FEATURES) for f in feats])
        scores = self.model.predict(x)
        return np.where([f is None for f in feats], -np.inf, scores)

    def _evolve(self) -> list[Config]:
        """Configs met during evolution, best predicted first."""
        pop: list[Config] = [c for _, c in self.good[:self.elite]]
        pop += self.seeds
        while len(pop) < self.population:
            pop.append(self._random())
        seen: dict[Config, float] = {}
        for _ in range(self.generations):
            pop = list(dict.fromkeys(pop))
            scores = self._scores(pop)
            seen.update(zip(pop, scores.tolist()))
            order = np.argsort(-scores)
            parents = [pop[i] for i in order[:max(2, len(pop) // 2)]]
            children: list[Config] = []
            while len(parents) + len(children) < self.population:
                a = parents[self._pick(len(parents))]
                if self.rng.random() < 0.2:
                    b = parents[self._pick(len(parents))]
                    children.append(self.space.crossover(a, b, self.rng))
                else:
                    children.append(self.space.mutate(a, self.rng))
            pop = parents + children
        pop = list(dict.fromkeys(pop))
        seen.update(zip(pop, self._scores(pop).tolist()))
        return [c for c, s in sorted(seen.items(), key=lambda x: -x[1]) if s > -np.inf]

    def _random(self) -> Config:
        """A random config: uniform over the knobs, or near one of the rules (each knob
        kept at that rule's value with probability 0.5 or 0.8), a third of the time
        each. Most of the space is slow; samples near the rules make early rounds useful."""
        return self.space.sample(self.rng, keep_default=self.rng.choice((0.0, 0.5, 0.8)),
                                 base=self.rng.choice(self.seeds))

    def _pick(self, n: int) -> int:
        """A parent index biased to the front (the better predicted)."""
        return min(int(self.rng.expovariate(3.0 / n)), n - 1)
