"""Choosing a task's final schedule by re-measuring the front-runners side by side.

During the search each candidate is timed once, in its own moment: on a shared machine a
quiet instant makes a mediocre schedule look fast, and the minimum over the whole search
is then biased towards such lucky timings. So the tuner ends each task by building its
top few candidates again, together with the default schedule, and timing them in several
rounds, alternating the order so that a slow phase of the machine hits all of them. The
winner is the lowest *median* over all those timings; the default schedule is always in
the running, so a noise spike can never make ``build`` pick a schedule slower than the
one it would have used anyway.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from tensorsmith.ir.te.schedule import Step

from .measure import Builder, MeasureInput, Runner
from .task import Task


@dataclass
class Remeasured:
    """One front-runner: ``steps`` (None: the default schedule) and all its new timings."""

    steps: list[Step] | None
    costs: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float:
        """Median seconds over every round; infinite when any round failed."""
        if self.error is not None or not self.costs:
            return math.inf
        return statistics.median(self.costs)


def pick_by_median(items: list[Remeasured]) -> int:
    """Index of the lowest median (the first one on a tie); -1 when all failed."""
    best, index = math.inf, -1
    for i, item in enumerate(items):
        if item.median < best:
            best, index = item.median, i
    return index


def round_orders(n: int, rounds: int) -> list[list[int]]:
    """Measuring orders for ``rounds`` rounds: forwards, backwards, forwards... so a drift
    in the machine's speed during a round is shared out evenly over the candidates."""
    return [list(range(n)) if r % 2 == 0 else list(range(n - 1, -1, -1)) for r in range(rounds)]


def remeasure(task: Task, candidates: list[list[Step] | None], builder: Builder,
              runner: Runner, folder: Path, rounds: int = 3) -> list[Remeasured]:
    """Build ``candidates`` once and time them ``rounds`` times each, interleaved.

    Outputs are checked against the default schedule's, as in the search; a candidate
    whose build or any round fails gets that error (and an infinite median).
    """
    items = [Remeasured(steps) for steps in candidates]
    inputs = [MeasureInput(task, None)] + [MeasureInput(task, s) for s in candidates]
    ref, *builds = builder.build(inputs, folder)
    try:
        if ref.error is not None:
            for item in items:
                item.error = f"the default schedule failed to build: {ref.error}"
            return items
        for item, b in zip(items, builds, strict=True):
            item.error = b.error
        ok = [i for i, item in enumerate(items) if item.error is None]
        for order in round_orders(len(ok), rounds):
            picked = [ok[j] for j in order]
            results = runner.run(task, ref.path, [builds[i] for i in picked])
            for i, res in zip(picked, results, strict=True):
                if res.error is not None:
                    items[i].error = res.error
                else:
                    items[i].costs.extend(res.costs)
    finally:
        for b in (ref, *builds):
            if b.path:
                Path(b.path).unlink(missing_ok=True)
    return items
