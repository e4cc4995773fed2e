"""The task scheduler: warm-up order, then the task whose weighted latency falls fastest."""

from __future__ import annotations

import random

from tensorsmith.autotune.scheduler import TaskProgress, TaskScheduler


def test_warm_up_goes_to_the_most_expensive_fresh_task_first() -> None:
    s = TaskScheduler(eps=0.0)
    tasks = [TaskProgress(1, priority=5), TaskProgress(3, priority=50), TaskProgress(1, 9)]
    assert s.pick(tasks) == 1
    tasks[1].rounds = 1
    tasks[1].history = [(8, 1e-3)]
    assert s.pick(tasks) == 2


def test_picks_the_largest_weighted_improvement() -> None:
    s = TaskScheduler(eps=0.0)
    stalled = TaskProgress(1, rounds=4, trials=64,
                           history=[(16, 2e-3), (32, 2e-3), (48, 2e-3), (64, 2e-3)])
    improving = TaskProgress(1, rounds=4, trials=64,
                             history=[(16, 4e-3), (32, 3e-3), (48, 2e-3), (64, 1e-3)])
    assert s.pick([stalled, improving]) == 1
    # the same improvement in a kernel the model runs 10 times matters 10x more
    heavy_stalled = TaskProgress(10, rounds=4, trials=64, history=stalled.history)
    light = TaskProgress(1, rounds=4, trials=64,
                         history=[(16, 2.1e-3), (32, 2.05e-3), (48, 2.02e-3), (64, 2e-3)])
    assert s.gradient(heavy_stalled) < s.gradient(light)


def test_exhausted_tasks_are_skipped_and_eps_explores() -> None:
    done = TaskProgress(1, rounds=1, exhausted=True, history=[(1, 1.0)])
    assert TaskScheduler().pick([done]) is None
    tasks = [TaskProgress(1, rounds=2, trials=32, history=[(16, 1.0), (32, 0.5)]),
             TaskProgress(1, rounds=2, trials=32, history=[(16, 1.0), (32, 1.0)])]
    picks = {TaskScheduler(eps=1.0, rng=random.Random(i)).pick(tasks) for i in range(20)}
    assert picks == {0, 1}
