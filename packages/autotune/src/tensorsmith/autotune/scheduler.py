"""The task scheduler: which task gets the next round of trials (Ansor's gradient rule).

The objective is the model's end-to-end latency, sum over tasks of weight x best time.
Its derivative with respect to the trials spent on task i is estimated as

    w_i * ((1 - alpha) * backward_i + alpha * forward_i)

where ``backward_i`` is the recent improvement of the task's best time per trial (over
the last ``window`` rounds) and ``forward_i = -best_i / trials_i`` is an optimistic guess
that the time keeps falling like 1 / trials. The next round goes to the task with the
most negative estimate, i.e. where a trial is expected to cut the most end-to-end
latency. Every task first gets one round (warm-up); with probability ``eps`` a random
task is chosen, so a task that looked stuck gets a second chance.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class TaskProgress:
    """What the scheduler knows of one task."""

    weight: float
    priority: float = 0.0  # warm-up order: larger first (the tuner uses weight x FLOPs)
    rounds: int = 0
    trials: int = 0
    exhausted: bool = False
    # (trials of this task, best seconds so far) after each round
    history: list[tuple[int, float]] = field(default_factory=list)

    @property
    def best(self) -> float:
        return self.history[-1][1] if self.history else math.inf


class TaskScheduler:
    def __init__(self, alpha: float = 0.2, window: int = 3, eps: float = 0.05,
                 rng: random.Random | None = None) -> None:
        self.alpha = alpha
        self.window = window
        self.eps = eps
        self.rng = rng or random.Random(0)

    def gradient(self, p: TaskProgress) -> float:
        """d(weighted latency) / d(trials) estimate; more negative = more worth a round."""
        if not p.history:
            return -math.inf
        t, best = p.history[-1]
        if not math.isfinite(best):
            # Nothing measured successfully: retry a few rounds, then stop wasting trials.
            return -math.inf if p.rounds < 3 else 0.0
        t0, best0 = p.history[max(0, len(p.history) - 1 - self.window)]
        if not math.isfinite(best0):
            best0 = best
        backward = (best - best0) / max(t - t0, 1)
        forward = -best / max(t, 1)
        return p.weight * ((1 - self.alpha) * backward + self.alpha * forward)

    def pick(self, tasks: list[TaskProgress]) -> int | None:
        """Index of the task to tune next; None when every task is exhausted."""
        open_ = [i for i, p in enumerate(tasks) if not p.exhausted]
        if not open_:
            return None
        fresh = [i for i in open_ if tasks[i].rounds == 0]
        if fresh:
            return max(fresh, key=lambda i: (tasks[i].priority, -i))
        if self.rng.random() < self.eps:
            return self.rng.choice(open_)
        return min(open_, key=lambda i: (self.gradient(tasks[i]), i))
