"""Records: the ir format, append + flush, torn-line repair, resume without re-measuring,
and build(records=...) applying the best record."""

from __future__ import annotations

import json
import random

import numpy as np
from autotune_testing import FakeBuilder, FakeRunner, key_of, mlp, needs_llvm, trial_records

from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.autotune.tuner import Tuner
from tensorsmith.ir.records import load_best_steps, read_records
from tensorsmith.ir.target import Target


def test_record_format_is_what_ir_reads(tmp_path) -> None:
    task = extract_tasks(mlp())[0]
    space = SearchSpace(task)
    steps = space.steps(space.sample(random.Random(0)))
    path = tmp_path / "r.jsonl"
    with RecordLog(path) as log:
        log.append(make_record(task.key, "llvm", steps, [2e-4, 3e-4], None))
        log.append(make_record(task.key, "llvm", space.steps(space.default()), [], "boom"))
        # flushed at once: readable while the log is still open
        assert len(read_records(path)) == 2
    (rec, failed) = read_records(path)
    assert set(rec) == {"workload", "target", "steps", "costs", "error", "versions"}
    assert failed["error"] == "boom" and failed["costs"] == []
    best = load_best_steps(path, Target.parse("llvm"))
    assert [s.to_json() for s in best[task.key]] == [s.to_json() for s in steps]


def test_torn_last_line_is_cut_on_open(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    good = json.dumps(make_record("k", "llvm", [], [1.0], None))
    path.write_text(good + "\n" + good[: len(good) // 2])
    with RecordLog(path) as log:
        assert len(log.records) == 1
        log.append(make_record("k", "llvm", [], [2.0], None))
    assert [r["costs"] for r in read_records(path)] == [[1.0], [2.0]]


def test_resume_skips_measured_and_seeds_the_model(tmp_path) -> None:
    tasks = extract_tasks(mlp())
    path = tmp_path / "r.jsonl"
    builder = FakeBuilder()
    first = Tuner(tasks, path, 12, builder=builder, runner=FakeRunner(builder), per_round=4)
    r1 = first.run()
    assert r1.new_trials == 12 and r1.resumed_trials == 0
    lines = path.read_text().splitlines()
    assert len(trial_records([json.loads(x) for x in lines])) == 12

    builder = FakeBuilder()
    second = Tuner(tasks, path, 30, builder=builder, runner=FakeRunner(builder), per_round=4)
    assert second.resumed == 12
    assert second.model.num_samples == 12  # every successful record became training data
    r2 = second.run()
    assert r2.resumed_trials == 12 and r2.new_trials == 18
    records = trial_records(read_records(path))
    assert path.read_text().splitlines()[:len(lines)] == lines  # nothing lost or rewritten
    assert len(records) == 30
    keys = [(r["workload"], key_of(r)) for r in records]
    assert len(set(keys)) == len(keys)  # no candidate measured twice
    # every task's default schedule was measured exactly once, and is the slowest here
    for t, d, b in zip(r2.tasks, r2.default_seconds, r2.best_seconds):
        assert d == 1e-3 and b < d, t.label


def test_build_applies_the_best_record(tmp_path) -> None:
    needs_llvm()
    import tensorsmith.runtime as rt
    from tensorsmith.ir import build, run_graph

    graph = mlp(batch=3)
    tasks = extract_tasks(graph)
    path = tmp_path / "r.jsonl"
    chosen = {}
    with RecordLog(path) as log:
        for i, task in enumerate(tasks):
            space = SearchSpace(task)
            rng = random.Random(i)
            a, b = space.steps(space.sample(rng)), space.steps(space.sample(rng))
            log.append(make_record(task.key, "llvm", b, [5e-4, 4e-4], None))
            log.append(make_record(task.key, "llvm", a, [1e-4], None))
            log.append(make_record(task.key, "llvm", b, [1e-6], "run: wrong result"))
            chosen[task.key] = [s.to_json() for s in a]
    lib = build(graph, "llvm", records=path)
    for f in lib.funcs:
        assert f.attrs["steps"] == chosen[f.attrs["workload"]]
    lib.export_library(tmp_path / "m.so")
    x = np.random.default_rng(0).standard_normal((3, 16)).astype("float32")
    (got,) = rt.load(tmp_path / "m.so").run({"x": x})
    (want,) = run_graph(graph, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
