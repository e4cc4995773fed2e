"""The final choice inside the whole model: front-runners are read from the records,
timed in place, and a schedule that only looked fast alone never replaces the default."""

from __future__ import annotations

import json
import random

import numpy as np
from autotune_testing import matmul, mlp, needs_llvm

from tensorsmith.autotune.in_model import choose_in_model, front_runners
from tensorsmith.autotune.model_timing import Timings
from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir import build, run_graph
from tensorsmith.ir.records import read_records


def test_front_runners_are_the_fastest_distinct_error_free(tmp_path) -> None:
    (task,) = extract_tasks(matmul(8, 16, 32))
    space = SearchSpace(task)
    rng = random.Random(1)
    a, b, c = space.steps(space.default()), space.steps(space.sample(rng)), None
    while c is None or c in (a, b):
        c = space.steps(space.sample(rng))
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:
        log.append(make_record(task.key, "llvm", a, [3e-4], None))
        log.append(make_record(task.key, "llvm", b, [1e-6], "run: wrong result"))
        log.append(make_record(task.key, "llvm", c, [2e-4], None))
        log.append(make_record(task.key, "llvm", c, [1e-4], None))  # the same, again
        log.append(make_record("other", "llvm", b, [1e-9], None))
    got = front_runners(path, [task], top=3)[task.key]
    assert [[s.to_json() for s in x] for x in got] == [
        [s.to_json() for s in c], [s.to_json() for s in a]]


def _slow_steps(task):  # noqa: ANN001, ANN202
    """A correct schedule several times slower than the default: nothing vectorized,
    nothing parallel, the reduction outermost."""
    space = SearchSpace(task)
    config = list(space.default())
    for k, (_, knob) in enumerate(space.knobs):
        if knob.name in ("vectorize", "parallel", "cache", "unroll_rows", "epilogue"):
            config[k] = False
    assert space.valid(tuple(config))
    return space.steps(tuple(config))


def test_a_schedule_fast_only_alone_does_not_replace_the_default(tmp_path, monkeypatch) -> None:
    """The records claim a schedule is the fastest; in the model it is slower (the timing
    is faked, so the test does not depend on how busy the machine is): the default stays."""
    needs_llvm()
    import tensorsmith.autotune.in_model as in_model

    def timed(modules, rounds, repeat):  # noqa: ANN001, ANN202
        steps = len(modules[0].metadata["steps"])
        return [Timings([0.4 * (1 + rank)] * steps, 1.0 + rank) for rank in range(len(modules))]

    monkeypatch.setattr(in_model, "time_interleaved", timed)
    graph = matmul(192, 192, 192)
    (task,) = extract_tasks(graph)
    slow = _slow_steps(task)
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:  # the records claim the slow schedule is the fastest,
        log.append(make_record(task.key, "llvm", slow, [1e-9], None))
        selected = make_record(task.key, "llvm", slow, [1e-9], None)
        log.append({**selected, "selected": True})  # and even chose it
    (choice,) = choose_in_model(graph, None, "llvm", [task], path, top=2, rounds=3)
    assert choice.chosen == 0 and choice.ms[1] > 1.5 * choice.ms[0], choice.ms
    last = read_records(path)[-1]
    assert last["selected"] and last["in_model_ms"][0] == choice.ms[0]
    lib = build(graph, "llvm", records=path)  # the default again, not the slow one
    (func,) = lib.funcs
    assert func.attrs["steps"] != [s.to_json() for s in slow]


def test_choices_apply_and_compute_the_same(tmp_path) -> None:
    needs_llvm()
    import tensorsmith.runtime as rt

    graph = mlp(batch=4, sizes=(64, 64, 64, 10))
    tasks = extract_tasks(graph)
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:
        for task in tasks:
            space = SearchSpace(task)
            for cfg in space.seeds()[:1]:
                log.append(make_record(task.key, "llvm", space.steps(cfg), [1e-4], None))
    choices = choose_in_model(graph, None, "llvm", tasks, path, top=1, rounds=2)
    assert {c.task.key for c in choices} == {t.key for t in tasks}
    assert all(len(c.ms) == 2 and all(np.isfinite(c.ms)) for c in choices)
    for line in path.read_text().splitlines():
        json.loads(line)  # every appended line is whole
    lib = build(graph, "llvm", records=path)
    lib.export_library(tmp_path / "m.so")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype("float32")
    (got,) = rt.load(tmp_path / "m.so").run({"x": x})
    (want,) = run_graph(graph, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
