"""Choosing each kernel's schedule inside the whole model.

A kernel timed alone is not the kernel the model runs: there its input was just written
by the previous layer (warm), its weights were last read an inference ago (cold), and
the layers before it leave the caches in their own state. On ResNet-50 schedules that
were 1.4x faster alone came out equal inside the model, and the tuned model was no
faster than the untuned one. So the last word goes to the model itself: it is built
once with the default schedules and once per rank ``j`` with every kernel's ``j``-th
best candidate, all of them are run interleaved, and the runtime's per-step times say,
kernel by kernel, which candidate is fastest where it really runs. The winners are
appended as ``"selected"`` records (the default wins ties, and needs no record), which
``build(records=...)`` applies.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensorsmith.ir.graph import Graph
from tensorsmith.ir.records import read_records
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.schedule import Step

from .artifact import lower_candidate
from .model_timing import ModelBuild, build_model, time_interleaved
from .records import RecordLog, make_record
from .space import steps_key
from .task import Task

#: A candidate must beat the default by this much inside the model to replace it.
MIN_GAIN = 0.01


@dataclass
class InModelChoice:
    """One kernel: its candidates' in-model milliseconds per run (all its steps; index 0
    the default schedule) and the index chosen."""

    task: Task
    candidates: list[list[Step] | None]
    ms: list[float] = field(default_factory=list)
    chosen: int = 0


def front_runners(records: str | Path, tasks: Sequence[Task], top: int
                  ) -> dict[str, list[list[Step]]]:
    """Per task, its ``top`` fastest distinct error-free schedules in the records (trials
    and earlier final choices alike), fastest first."""
    keys = {t.key for t in tasks}
    timed: dict[str, list[tuple[float, list[Any]]]] = {k: [] for k in keys}
    for rec in read_records(records):
        if rec["workload"] in keys and not rec.get("error") and rec.get("costs"):
            timed[rec["workload"]].append((min(rec["costs"]), rec["steps"]))
    out: dict[str, list[list[Step]]] = {}
    for key, items in timed.items():
        seen: set[str] = set()
        out[key] = []
        for _, steps in sorted(items, key=lambda x: x[0]):
            if steps_key(steps) not in seen and len(out[key]) < top:
                seen.add(steps_key(steps))
                out[key].append([Step.from_json(s) for s in steps])
    return out


def choose_in_model(mod: Graph, params: Mapping[str, np.ndarray] | None, target: str,
                    tasks: Sequence[Task], records: str | Path, top: int = 6,
                    rounds: int = 10, repeat: int = 3, opt_level: int = 2,
                    progress: Callable[[str], None] | None = None) -> list[InModelChoice]:
    """Time the model with the default schedules and with each rank of front-runners,
    pick each kernel's fastest in place and append those choices to ``records``."""
    tgt = Target.parse(target)
    runners = front_runners(records, tasks, top)
    ranks = max((len(v) for v in runners.values()), default=0)
    choices = [InModelChoice(t, [None, *runners.get(t.key, [])]) for t in tasks]
    if ranks == 0:
        return choices
    say = progress or (lambda _: None)
    with tempfile.TemporaryDirectory(prefix="tsm-in-model-") as tmp:
        builds: list[ModelBuild] = []
        try:
            for rank in range(ranks + 1):
                say("building the model with " + (f"each kernel's candidate ranked {rank}"
                                                  if rank else "the default schedules"))
                rec = Path(tmp) / f"rank{rank}.jsonl"
                with RecordLog(rec) as log:
                    for c in choices:
                        if 0 < rank < len(c.candidates):
                            log.append({**make_record(c.task.key, str(tgt),
                                                      c.candidates[rank], [1.0], None),
                                        "selected": True})
                builds.append(build_model(mod, params, tgt, rec, opt_level,
                                          Path(tmp) / f"rank{rank}.tsm"))
            say(f"timing {ranks + 1} builds of the model, {rounds} rounds")
            timings = time_interleaved([b.module for b in builds], rounds, repeat)
        finally:
            for b in builds:
                b.close()
    for c in choices:
        c.ms = [timings[r].workload_ms(c.task.key, builds[r].step_workloads)
                if r < len(c.candidates) else math.inf for r in range(ranks + 1)]
        best = min(range(len(c.ms)), key=lambda r: c.ms[r])
        c.chosen = best if c.ms[best] < c.ms[0] * (1 - MIN_GAIN) else 0
    _append_choices(records, str(tgt), choices)
    return choices


def _append_choices(records: str | Path, target: str, choices: list[InModelChoice]) -> None:
    """A ``selected`` record per kernel whose choice is a tuned schedule; a kernel where
    the default won gets its default steps selected only if an earlier choice exists."""
    earlier = {r["workload"] for r in read_records(records) if r.get("selected")}
    with RecordLog(records) as log:
        for c in choices:
            steps = c.candidates[c.chosen]
            if steps is None:
                if c.task.key not in earlier:
                    continue
                steps = [Step.from_json(s) for s in
                         lower_candidate(c.task, None).attrs["steps"]]
            ms = c.ms[c.chosen]
            log.append({**make_record(c.task.key, target, steps, [ms / 1e3], None),
                        "selected": True, "in_model_ms": [m if math.isfinite(m) else None
                                                          for m in c.ms]})
