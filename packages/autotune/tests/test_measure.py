"""Measurement in isolated processes: a candidate that crashes, hangs, computes a wrong
result or fails to build is recorded as an error, and the rest of the batch is measured."""

from __future__ import annotations

import random
import textwrap

import pytest
from autotune_testing import matmul, needs_llvm

from tensorsmith.autotune.measure import LocalBuilder, LocalRunner, MeasureInput
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir.te.schedule import Step

HOOKS = textwrap.dedent("""
    import ctypes, time

    def misbehave(index, outputs):
        if index == 1:
            ctypes.string_at(0)          # segfault in the measuring process
        elif index == 2:
            outputs[0][0, 0] += 1.0      # a wrong result
        elif index == 3:
            time.sleep(60)               # a hang, past the timeout
""")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):  # noqa: ANN001, ANN201
    needs_llvm()
    tmp = tmp_path_factory.mktemp("measure")
    (task,) = extract_tasks(matmul(8, 16, 32))
    space = SearchSpace(task)
    rng = random.Random(0)
    configs: list = []
    while len(configs) < 5:
        steps = space.steps(space.sample(rng))
        if all(steps != c for c in configs):
            configs.append(steps)
    broken = [Step("split", "t0_matmul", ("no_such_loop", 4))]
    inputs = [MeasureInput(task, None)] + [MeasureInput(task, s) for s in configs[:4]]
    inputs += [MeasureInput(task, broken), MeasureInput(task, configs[4])]
    builder = LocalBuilder(workers=2)
    builds = builder.build(inputs, tmp)
    builder.close()
    hook = tmp / "hooks.py"
    hook.write_text(HOOKS)
    return task, builds, f"{hook}:misbehave"


def test_failures_are_recorded_and_the_batch_goes_on(batch) -> None:  # noqa: ANN001
    task, builds, hook = batch
    reference, candidates = builds[0], builds[1:]
    assert reference.error is None
    runner = LocalRunner(timeout=4.0, min_repeat_ms=5.0, hook=hook)
    results = runner.run(task, reference.path, candidates)
    assert results[0].error is None and len(results[0].costs) == 3
    assert "crashed" in results[1].error and "SIGSEGV" in results[1].error
    assert "wrong result" in results[2].error
    assert "timed out" in results[3].error
    assert results[4].error.startswith("build:") and "no_such_loop" in results[4].error
    assert results[5].error is None and results[5].costs  # measured after all of that
    assert all(c > 0 for r in results for c in r.costs)


def test_without_reference_nothing_is_compared(batch) -> None:  # noqa: ANN001
    task, builds, _ = batch
    results = LocalRunner(min_repeat_ms=2.0).run(task, None, builds[1:2])
    assert results[0].error is None and results[0].costs


def test_a_failing_reference_fails_the_batch_with_its_reason(batch, tmp_path) -> None:  # noqa: ANN001
    task, builds, _ = batch
    missing = str(tmp_path / "missing.so")
    results = LocalRunner(min_repeat_ms=2.0).run(task, missing, builds[1:3])
    assert all("default schedule failed" in r.error for r in results)


class _FakeModule:
    """Records how time_module drives the runtime's profile()."""

    def __init__(self, ms: float) -> None:
        self.ms = ms
        self.calls: list[tuple[int, bool]] = []

    def profile(self, repeat: int = 10, warmup: bool = True) -> list[dict[str, float]]:
        self.calls.append((repeat, warmup))
        return [{"total_ms": self.ms * repeat}]


def test_flushed_timing_runs_each_kernel_cold_once_per_flush() -> None:
    from tensorsmith.autotune.runner_main import FLUSHED_RUNS, time_module

    warm = _FakeModule(0.01)
    costs = time_module(warm, min_repeat_ms=30.0, repeats=3)
    assert costs == pytest.approx([1e-5] * 3)
    assert warm.calls[1:] == [(1000, True)] * 3  # batched, after a warm-up run each
    cold = _FakeModule(0.01)
    costs = time_module(cold, min_repeat_ms=30.0, repeats=3, flush_bytes=1 << 20)
    assert costs == pytest.approx([1e-5] * 3)
    assert cold.calls == [(1, False)] * (1 + 3 * FLUSHED_RUNS)  # one cold run per flush
