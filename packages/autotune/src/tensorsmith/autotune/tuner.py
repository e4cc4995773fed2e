"""The tuning loop: schedule a task, propose candidates, build, measure, record, learn.

``tune(tasks, records, trials)`` spends ``trials`` measurements in total on the tasks
(counting those already in ``records``: rerunning the same command after a crash or a
kill finishes the job instead of starting over). Each task's first round measures its
default schedule too, so the records always hold the baseline and ``build(records=...)``
never picks something slower than it. Every measurement is appended to the records as
it arrives; the cost model is retrained after each round on everything measured,
including what the records held when the run began. At the end, each task's top few
candidates and its default schedule are re-measured side by side and the lowest median
wins (:mod:`.confirm`): that choice is appended as a ``"selected"`` record, which
``build(records=...)`` prefers over the single fastest timing.

Every task searches the knobs of its target's default rules (:mod:`.space`), measured
on the runtime device of its target (:func:`.measure.device_for`).
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tensorsmith.ir.codegen import get_codegen
from tensorsmith.ir.target import Target
from tensorsmith.ir.targets import installed_kinds, target_info
from tensorsmith.ir.te.schedule import Step

from .artifact import lower_candidate
from .confirm import Remeasured, pick_by_median, remeasure
from .cost_model import CostModel
from .measure import (
    Builder,
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    Runner,
)
from .records import RecordLog, make_record
from .scheduler import TaskProgress, TaskScheduler
from .search import Candidate, TaskSearch
from .space import Config, steps_key
from .task import Task


@dataclass
class TaskState:
    task: Task
    search: TaskSearch
    progress: TaskProgress
    default_steps: list[Step]
    default_key: str
    default_config: Config | None = None  # the space's config of the default schedule
    default_cost: float = math.inf
    best_cost: float = math.inf
    errors: int = 0
    reference: str | None = None
    reference_error: str | None = None
    ok: list[tuple[float, str, list[Step]]] = field(default_factory=list)  # (s, key, steps)
    new_trials: int = 0
    has_selected: bool = False  # the records already hold a final choice for this task
    selected_cost: float = math.inf  # median of the final choice's re-measurement
    remeasured_default: float = math.inf  # median of the default's, re-measured with it

    @property
    def best_gflops(self) -> float:
        return self.task.flops / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0


@dataclass
class TuneEvent:
    """A progress snapshot, passed to the callback after every round of the search
    (``stage`` "search") and before each task's front-runners are re-measured
    (``stage`` "confirm"). Times are the search's: each kernel timed alone."""

    task: Task
    task_trials: int
    total_trials: int
    budget: int
    best_seconds: float
    best_gflops: float
    e2e_seconds: float
    round_errors: int
    task_index: int = 0  # of ``task`` in the tuner's tasks
    task_count: int = 1
    stage: str = "search"


@dataclass
class TuneResult:
    tasks: list[Task]
    default_seconds: list[float]
    best_seconds: list[float]
    trials: list[int]
    errors: list[int]
    new_trials: int
    resumed_trials: int
    # (trials so far over all tasks, task index, that task's best seconds after the trial)
    curve: list[tuple[int, int, float]] = field(default_factory=list)
    # median time of each task's final (re-measured) choice; inf where none was made
    selected_seconds: list[float] = field(default_factory=list)
    # median time of each task's default schedule, re-measured next to the final choice
    remeasured_default_seconds: list[float] = field(default_factory=list)

    def e2e_seconds(self, which: str = "best") -> float:
        """Weighted sum of each task's best, default or selected time: the model's
        kernel time."""
        seconds = {"best": self.best_seconds, "default": self.default_seconds,
                   "selected": self.selected_seconds}[which]
        return e2e([t.weight for t in self.tasks], seconds)


def e2e(weights: list[int] | list[float], seconds: list[float]) -> float:
    known = [w * s for w, s in zip(weights, seconds) if math.isfinite(s)]
    return float(sum(known)) if known else math.inf


def tunable_kinds() -> list[str]:
    """The installed targets whose records say the tuner may search them (their rules
    ask for knobs and their runtime device can time a kernel)."""
    return [k for k in installed_kinds() if target_info(k).tunable]


class Tuner:
    def __init__(self, tasks: list[Task], records: str | Path, trials: int, *,
                 builder: Builder | None = None, runner: Runner | None = None,
                 per_round: int = 16, seed: int = 0, eps: float = 0.1,
                 population: int = 256, generations: int = 4, model: CostModel | None = None,
                 callback: Callable[[TuneEvent], None] | None = None,
                 confirm_top: int = 3, confirm_rounds: int = 3,
                 on_confirm: Callable[[Task, list[Remeasured], int], None] | None = None
                 ) -> None:
        if not tasks:
            raise ValueError("nothing to tune: no tasks")
        for tgt in {Target.parse(t.target).kind: Target.parse(t.target) for t in tasks}.values():
            if not tgt.info.tunable:
                raise ValueError(f"cannot tune kernels for target {tgt.kind!r}; tunable "
                                 f"targets: {', '.join(tunable_kinds())}")
            get_codegen(tgt)  # a target whose codegen is not installed fails here, plainly
        self.tasks = tasks
        self.budget = trials
        self.per_round = max(1, per_round)
        self.rng = random.Random(seed)
        self.model = model or CostModel(seed=seed)
        self.callback = callback
        self.confirm_top = confirm_top
        self.confirm_rounds = confirm_rounds
        self.on_confirm = on_confirm
        self._own = (builder is None, runner is None)
        self.builder = builder or LocalBuilder()
        self.runner = runner or LocalRunner()
        self.scheduler = TaskScheduler(rng=random.Random(seed + 1))
        self.log = RecordLog(records)
        self.curve: list[tuple[int, int, float]] = []
        self.states = [self._state(t, population, generations, eps) for t in tasks]
        self.total = 0
        self.resumed = self._resume()

    def _state(self, task: Task, population: int, generations: int, eps: float) -> TaskState:
        search = TaskSearch(task, self.model, random.Random(self.rng.random()), population,
                            generations, eps)
        default = [Step.from_json(s) for s in lower_candidate(task, None).attrs["steps"]]
        key = steps_key(default)
        config = search.space.default()
        return TaskState(task, search, TaskProgress(task.weight, task.weight * task.flops),
                         default, key,
                         config if search.candidate(config).key == key else None)

    # -- resuming -------------------------------------------------------------------
    def _resume(self) -> int:
        by_key = {st.task.key: st for st in self.states}
        count = 0
        for rec in self.log.records:
            st = by_key.get(rec.get("workload", ""))
            if st is None or Target.parse(rec["target"], installed=False).kind != Target.parse(
                    st.task.target).kind:
                continue
            if rec.get("selected"):  # a final choice re-measured earlier, not a trial
                st.has_selected = True
                continue
            try:
                steps = [Step.from_json(s) for s in rec["steps"]]
            except (KeyError, IndexError, TypeError):
                continue
            key = steps_key(steps)
            if key in st.search.measured:
                continue
            costs = rec.get("costs") or []
            cost = min(costs) if costs and not rec.get("error") else math.inf
            config = st.default_config if key == st.default_key else None
            self._note(st, Candidate(config, steps, key), cost, steps)
            count += 1
        for st in self.states:
            if st.progress.trials:
                st.progress.rounds = 1
                st.progress.history.append((st.progress.trials, st.best_cost))
        self.model.fit()
        return count

    def _note(self, st: TaskState, cand: Candidate, cost: float, steps: list[Step]) -> None:
        """Account for one measurement (new or read back)."""
        st.search.record(cand, cost)
        st.progress.trials += 1
        self.total += 1
        if math.isfinite(cost):
            st.ok.append((cost, cand.key, steps))
            feats = (st.search.features(cand.config) if cand.config is not None
                     else st.search.features_of_steps(steps))
            if feats is not None:
                self.model.add(feats, cost, st.task.key)
            st.best_cost = min(st.best_cost, cost)
        else:
            st.errors += 1
        if cand.key == st.default_key:
            st.default_cost = cost
        self.curve.append((self.total, self.states.index(st) if st in self.states
                           else len(self.states), st.best_cost))

    # -- tuning ---------------------------------------------------------------------
    def run(self) -> TuneResult:
        folder = Path(tempfile.mkdtemp(prefix="tsm-tune-"))
        try:
            while self.total < self.budget:
                i = self.scheduler.pick([st.progress for st in self.states])
                if i is None:
                    break
                self._round(self.states[i], folder)
            if self.confirm_top > 0:
                for st in self.states:
                    self._confirm(st, folder)
        finally:
            self.close()
            shutil.rmtree(folder, ignore_errors=True)
        return self.result()

    def _round(self, st: TaskState, folder: Path) -> None:
        want = min(self.per_round, self.budget - self.total)
        measure_default = st.default_key not in st.search.measured
        st.search.measured.add(st.default_key)  # measured below: never proposed twice
        proposals = st.search.propose(want - int(measure_default))
        if not proposals and not measure_default:
            st.progress.exhausted = True
            return
        inputs = [MeasureInput(st.task, c.steps) for c in proposals]
        if st.reference is None and st.reference_error is None:
            inputs.insert(0, MeasureInput(st.task, None))
        builds = self.builder.build(inputs, folder) if inputs else []
        if len(builds) > len(proposals):
            ref = builds.pop(0)
            st.reference, st.reference_error = ref.path, ref.error
        cands: list[Candidate] = list(proposals)
        if measure_default:
            cands.insert(0, Candidate(st.default_config, st.default_steps, st.default_key))
            builds.insert(0, BuildResult(st.reference, st.reference_error))
        results = self.runner.run(st.task, st.reference, builds)
        errors = 0
        for cand, res in zip(cands, results, strict=True):
            self.log.append(make_record(st.task.key, st.task.target, cand.steps, res.costs,
                                        res.error))
            errors += res.error is not None
            self._note(st, cand, res.cost, cand.steps)
            st.new_trials += 1
        for b in builds:
            if b.path and b.path != st.reference:
                Path(b.path).unlink(missing_ok=True)
        st.progress.rounds += 1
        st.progress.history.append((st.progress.trials, st.best_cost))
        self.model.fit()
        self._event(st, errors, "search")

    def _event(self, st: TaskState, errors: int, stage: str) -> None:
        if self.callback is not None:
            self.callback(TuneEvent(st.task, st.progress.trials, self.total, self.budget,
                                    st.best_cost, st.best_gflops, self.e2e(), errors,
                                    self.states.index(st), len(self.states), stage))

    def _confirm(self, st: TaskState, folder: Path) -> None:
        """Re-measure the task's front-runners with its default; record the median winner."""
        if st.has_selected and st.new_trials == 0:
            return  # chosen by an earlier run and nothing new measured since
        top: list[list[Step]] = []
        for _, key, steps in sorted(st.ok, key=lambda x: x[0]):
            if key != st.default_key and all(steps_key(t) != key for t in top):
                top.append(steps)
            if len(top) == self.confirm_top:
                break
        if not top:
            return  # only the default ran: build uses it anyway
        self._event(st, 0, "confirm")
        # The default goes first, so it wins a tie.
        items = remeasure(st.task, [None, *top], self.builder, self.runner, folder,
                          self.confirm_rounds)
        i = pick_by_median(items)
        if self.on_confirm is not None:
            self.on_confirm(st.task, items, i)
        if i < 0:
            return
        steps = st.default_steps if i == 0 else top[i - 1]
        record = make_record(st.task.key, st.task.target, steps, items[i].costs, None)
        record["selected"] = True
        record["medians"] = [item.median if math.isfinite(item.median) else None
                             for item in items]
        self.log.append(record)
        st.has_selected = True
        st.selected_cost = items[i].median
        st.remeasured_default = items[0].median

    def e2e(self) -> float:
        return e2e([st.task.weight for st in self.states], [st.best_cost for st in self.states])

    def result(self) -> TuneResult:
        return TuneResult(self.tasks, [st.default_cost for st in self.states],
                          [st.best_cost for st in self.states],
                          [st.progress.trials for st in self.states],
                          [st.errors for st in self.states], self.total - self.resumed,
                          self.resumed, list(self.curve),
                          [st.selected_cost for st in self.states],
                          [st.remeasured_default for st in self.states])

    def close(self) -> None:
        self.log.close()
        if self._own[0]:
            self.builder.close()
        if self._own[1]:
            self.runner.close()


def tune(tasks: list[Task], records: str | Path, trials: int, **options: object) -> TuneResult:
    """Tune ``tasks`` with ``trials`` measurements in total; see :class:`Tuner`."""
    return Tuner(tasks, records, trials, **options).run()  # type: ignore[arg-type]
