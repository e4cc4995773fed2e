"""Measuring random candidates of one task into a resumable records file.

The study needs a large, unbiased sample of the search space with real timings. It is
drawn the way the tuner draws before its cost model is trained (``TaskSearch.propose``
with an untrained model: uniform over the knobs, or near the default rules), so the
"random" baseline is exactly the tuner's own fallback. Measurements go to a tuning
records file as they arrive: a killed study resumes where it stopped, and the file is
what the analysis reads (and what ``build(records=...)`` could apply).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tensorsmith.autotune.cost_model import CostModel
from tensorsmith.autotune.measure import LocalBuilder, LocalRunner, MeasureInput
from tensorsmith.autotune.records import RecordLog, make_record
from tensorsmith.autotune.search import TaskSearch
from tensorsmith.autotune.space import steps_key
from tensorsmith.autotune.task import Task


def measure_random(task: Task, path: Path, n: int, *, seed: int = 0, batch: int = 32,
                   builders: int = 2, min_repeat_ms: float = 30.0, timeout: float = 20.0
                   ) -> None:
    """Append measurements of random candidates of ``task`` to ``path`` until it has ``n``."""
    search = TaskSearch(task, CostModel(), random.Random(seed))
    log = RecordLog(path)
    for rec in log.records:
        search.measured.add(steps_key(rec["steps"]))
    done = len(log.records)
    # A resumed run draws from a shifted stream: the same seed would re-propose the
    # candidates already measured (skipped, but only after lowering each one again).
    search.rng = random.Random(seed * 1_000_003 + done)
    builder = LocalBuilder(builders)
    runner = LocalRunner(timeout=timeout, min_repeat_ms=min_repeat_ms)
    folder = Path(tempfile.mkdtemp(prefix="tsm-study-"))
    start = time.monotonic()
    try:
        (ref,) = builder.build([MeasureInput(task, None)], folder)
        if ref.error is not None:
            raise SystemExit(f"{task.label}: the default schedule does not build: {ref.error}")
        best = min((min(r["costs"]) for r in log.records if r["costs"] and not r["error"]),
                   default=float("inf"))
        while done < n:
            cands = search.propose(min(batch, n - done))
            if not cands:
                print(f"{task.label}: space exhausted at {done}", file=sys.stderr)
                break
            builds = builder.build([MeasureInput(task, c.steps) for c in cands], folder)
            results = runner.run(task, ref.path, builds)
            errors = 0
            for cand, res in zip(cands, results, strict=True):
                log.append(make_record(task.key, task.target, cand.steps, res.costs, res.error))
                search.measured.add(cand.key)
                errors += res.error is not None
                best = min(best, res.cost)
            for b in builds:
                if b.path:
                    Path(b.path).unlink(missing_ok=True)
            done += len(cands)
            print(f"{task.label}: {done}/{n} measured, best {best * 1e3:.3f} ms, "
                  f"{errors} failed in this batch, {time.monotonic() - start:.0f} s",
                  file=sys.stderr, flush=True)
    finally:
        log.close()
        builder.close()
        shutil.rmtree(folder, ignore_errors=True)
