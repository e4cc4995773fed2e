"""The final choice: front-runners re-measured with the default, the lowest median wins,
and ``build`` applies that choice (also in a fresh process). No timing assertions: the
runners here report made-up times."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from autotune_testing import (
    HERE,
    FakeBuilder,
    FakeRunner,
    fake_seconds,
    key_of,
    matmul,
    mlp,
    needs_llvm,
)

from tensorsmith.autotune.confirm import Remeasured, pick_by_median, round_orders
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.autotune.tuner import Tuner
from tensorsmith.ir.records import load_best_steps, read_records
from tensorsmith.ir.target import Target


class SpikyRunner(FakeRunner):
    """The search's fastest candidate was a lucky timing: re-measured, it is 10x slower.
    With ``default_wins`` every re-measured candidate is slower than the default."""

    def __init__(self, builder: FakeBuilder, default_wins: bool = False) -> None:
        super().__init__(builder)
        self.seen: dict[str, int] = {}
        self.lucky: str | None = None
        self.default_wins = default_wins

    def run(self, task, reference, builds):  # noqa: ANN001, ANN201
        out = super().run(task, reference, builds)
        for b, res in zip(builds, out):
            key = self.builder.keys[b.path]
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.seen[key] > 1 and key != "default" and (
                    self.default_wins or key == self.lucky):
                res.costs = [c * 20 for c in res.costs]
        return out


def test_pick_by_median_and_alternating_orders() -> None:
    items = [Remeasured(None, [3.0, 3.0, 3.0]), Remeasured(None, [0.1, 5.0, 5.0]),
             Remeasured(None, [2.0, 2.5, 9.0]), Remeasured(None, [1.0], "run: crashed")]
    assert pick_by_median(items) == 2  # not the one with the lowest single timing
    assert pick_by_median([Remeasured(None, [1.0]), Remeasured(None, [1.0])]) == 0
    assert pick_by_median([Remeasured(None, [], "build: failed")]) == -1
    assert round_orders(3, 3) == [[0, 1, 2], [2, 1, 0], [0, 1, 2]]


def _tune(tmp_path, runner_cls_kw: dict, trials: int = 20):  # noqa: ANN001, ANN202
    tasks = extract_tasks(matmul(8, 16, 16))
    builder = FakeBuilder()
    runner = SpikyRunner(builder, **runner_cls_kw)
    path = tmp_path / "r.jsonl"
    tuner = Tuner(tasks, path, trials, per_round=5, builder=builder, runner=runner)
    return tasks, tuner, runner, path


def test_a_lucky_timing_does_not_become_the_final_choice(tmp_path) -> None:
    tasks, tuner, runner, path = _tune(tmp_path, {})
    # Whatever the search measures fastest will turn out slow when re-measured.
    orig_note = tuner._note

    def note(st, cand, cost, steps):  # noqa: ANN001, ANN202
        orig_note(st, cand, cost, steps)
        runner.lucky = min(st.ok)[1]
    tuner._note = note  # type: ignore[method-assign]
    result = tuner.run()
    records = read_records(path)
    trials = [r for r in records if not r.get("selected")]
    (selected,) = [r for r in records if r.get("selected")]
    ranked = sorted((min(r["costs"]), key_of(r)) for r in trials if key_of(r) != "[]")
    assert ranked[0][1] == runner.lucky and key_of(selected) == ranked[1][1]
    # FakeRunner times s and 1.1 s per round: the median over the rounds is 1.05 s
    assert result.selected_seconds[0] == pytest.approx(1.05 * fake_seconds(ranked[1][1]))
    best = load_best_steps(path, Target.parse("llvm"))
    assert [s.to_json() for s in best[tasks[0].key]] == selected["steps"]
    assert len(trials) == 20 and result.new_trials == 20  # re-measuring is not a trial


def test_the_default_is_kept_when_it_is_really_faster(tmp_path) -> None:
    _, tuner, _, path = _tune(tmp_path, {"default_wins": True})
    tuner.run()
    (selected,) = [r for r in read_records(path) if r.get("selected")]
    default = tuner.states[0].default_steps
    assert selected["steps"] == [s.to_json() for s in default]
    assert selected["medians"][0] == min(m for m in selected["medians"] if m is not None)


def test_resume_skips_the_choice_and_does_not_choose_again(tmp_path) -> None:
    _, tuner, _, path = _tune(tmp_path, {})
    tuner.run()
    lines = path.read_text().splitlines()
    _, again, _, _ = _tune(tmp_path, {})
    assert again.resumed == 20  # the selected record is not counted as a trial
    again.run()
    assert path.read_text().splitlines() == lines


APPLY = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from autotune_testing import mlp
    from tensorsmith.ir import build
    from tensorsmith.ir.te.printer import print_stmt
    lib = build(mlp(batch=3), "llvm", records=sys.argv[2])
    print(json.dumps({f.attrs["workload"]: [f.attrs["steps"], print_stmt(f.body)]
                      for f in lib.funcs}))
""")


def test_build_in_a_fresh_process_runs_the_kernels_that_were_chosen(tmp_path) -> None:
    """The artifact ``build(records=...)`` makes in another process contains, for every
    tuned workload, exactly the kernel the tuner measured for its final choice."""
    needs_llvm()
    from tensorsmith.autotune.artifact import lower_candidate
    from tensorsmith.ir.te.printer import print_stmt

    builder = FakeBuilder()
    tasks = extract_tasks(mlp(batch=3))
    path = tmp_path / "r.jsonl"
    Tuner(tasks, path, 24, per_round=4, builder=builder, runner=SpikyRunner(builder)).run()
    chosen = {r["workload"]: r["steps"] for r in read_records(path) if r.get("selected")}
    assert set(chosen) == {t.key for t in tasks}
    script = tmp_path / "apply.py"
    script.write_text(APPLY)
    out = subprocess.run([sys.executable, str(script), str(HERE), str(path)],
                         capture_output=True, text=True, check=True).stdout
    built = json.loads(out.strip().splitlines()[-1])
    for task in tasks:
        steps, body = built[task.key]
        assert steps == chosen[task.key]
        measured = lower_candidate(task, [s for s in load_best_steps(
            path, Target.parse("llvm"))[task.key]])
        assert body == print_stmt(measured.body)
