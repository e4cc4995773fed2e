"""The account of a tuning run, taken inside the model: both builds timed in the same runs,
the tuned build being the one `build(records=...)` (and so `compile --records`) makes."""

from __future__ import annotations

import math

import pytest
from autotune_testing import mlp, needs_llvm

from tensorsmith.autotune.model_timing import Timings
from tensorsmith.autotune.outcome import KernelOutcome, Outcome, measure_outcome, ratio
from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.space import SearchSpace, steps_key
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir import build


def test_ratio_is_nan_without_two_positive_times() -> None:
    assert ratio(3.0, 1.5) == 2.0
    assert all(math.isnan(ratio(a, b)) for a, b in [(1.0, 0.0), (0.0, 1.0), (math.inf, 1.0),
                                                    (1.0, math.nan)])


def test_model_numbers_derive_from_the_same_timings_as_the_kernels() -> None:
    task = extract_tasks(mlp())[0]
    default, tuned = Timings([2.0, 1.0], 4.0), Timings([1.0, 1.0], 3.0)
    outcome = Outcome([KernelOutcome(task, 3.0, 2.0, True)], default, tuned, 2, 3)
    assert outcome.kernel_speedup == pytest.approx(1.5)  # (2 + 1) / (1 + 1)
    assert outcome.run_speedup == pytest.approx(4 / 3)
    assert outcome.kernels[0].speedup == pytest.approx(1.5)
    assert default.workload_ms("a", ["a", "b"]) == 2.0


def test_measured_in_the_model_with_the_build_compile_makes(tmp_path) -> None:
    needs_llvm()
    graph = mlp(batch=4, sizes=(64, 64, 64, 10))
    tasks = extract_tasks(graph)
    first = tasks[0]
    space = SearchSpace(first)
    default_key = steps_key(space.steps(space.default()))
    steps = next(s for s in map(space.steps, space.seeds()) if steps_key(s) != default_key)
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:  # one kernel gets a tuned schedule, the others none
        log.append({**make_record(first.key, "llvm", steps, [1e-4], None), "selected": True})
    outcome = measure_outcome(graph, None, "llvm", tasks, path, rounds=2, repeat=2)

    assert [k.task for k in outcome.kernels] == tasks
    assert [k.tuned for k in outcome.kernels] == [True] + [False] * (len(tasks) - 1)
    for k in outcome.kernels:
        assert k.default_ms > 0 and k.tuned_ms > 0
    # the model's kernel time is the kernels' rows added up, in each build
    assert outcome.default.kernel_ms == pytest.approx(sum(k.default_ms for k in outcome.kernels))
    assert outcome.tuned.kernel_ms == pytest.approx(sum(k.tuned_ms for k in outcome.kernels))
    assert outcome.tuned.run_ms >= outcome.tuned.kernel_ms * 0.5
    # the tuned build applies exactly what build(records=...) applies
    lib = build(graph, "llvm", records=path)
    applied = {f.attrs["workload"]: steps_key(f.attrs["steps"]) for f in lib.funcs}
    assert applied[first.key] == steps_key(steps)
