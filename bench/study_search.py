"""Model-guided search against random sampling, on the best-so-far latency curve.

``run_search`` is a plain tuning run of one task (the tuner's own loop, cost model and
evolutionary search, starting from nothing: it does not see the random set). The random
baseline is the measured random set of ``study_measure``; its best-so-far curve is the
median over many random orders of the set, so it does not depend on the order it
happened to be measured in. The claim to check: the search reaches the best latency of
the whole random set in at most a third as many measurements.

Single timings on a shared machine are noisy, and a best-so-far curve is a minimum over
them, so it is biased towards lucky timings. ``compare_report`` therefore also re-builds
the top few of every run and of the random set and times them side by side in
alternating rounds (:func:`tensorsmith.autotune.confirm.remeasure`); the medians of that
re-measurement are the fair comparison of "who found the faster schedule".
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tensorsmith.autotune.confirm import remeasure
from tensorsmith.autotune.measure import LocalBuilder, LocalRunner
from tensorsmith.autotune.task import Task
from tensorsmith.autotune.tuner import TuneEvent, Tuner
from tensorsmith.ir.records import read_records
from tensorsmith.ir.te.schedule import Step


def run_search(task: Task, path: Path, budget: int, *, seed: int = 0,
               min_repeat_ms: float = 30.0, population: int = 256, generations: int = 4
               ) -> None:
    """A tuning run of ``task`` alone with ``budget`` measurements (resumes from ``path``)."""
    start = time.monotonic()

    def progress(e: TuneEvent) -> None:
        print(f"{task.label} search seed {seed}: {e.task_trials}/{budget}, best "
              f"{e.best_seconds * 1e3:.3f} ms, {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)

    Tuner([task], path, budget, seed=seed, runner=LocalRunner(min_repeat_ms=min_repeat_ms),
          callback=progress, confirm_top=0, population=population,
          generations=generations).run()


def trial_costs(path: Path) -> tuple[list[float], list[list[list]]]:
    """Best seconds per trial in file order (inf: failed) and the steps of each trial."""
    costs, steps = [], []
    for rec in read_records(path):
        if rec.get("selected"):
            continue
        ok = rec.get("costs") and not rec.get("error")
        costs.append(min(rec["costs"]) if ok else math.inf)
        steps.append(rec["steps"])
    return costs, steps


def best_so_far(costs: list[float]) -> np.ndarray:
    return np.minimum.accumulate(np.asarray(costs, dtype=np.float64))


def random_curve(costs: list[float], orders: int = 500, seed: int = 0) -> np.ndarray:
    """Median best-so-far over ``orders`` random orders of the measured set."""
    rng = np.random.default_rng(seed)
    arr = np.asarray(costs, dtype=np.float64)
    curves = np.stack([best_so_far(list(arr[rng.permutation(len(arr))]))
                       for _ in range(orders)])
    return np.median(curves, axis=0)


def first_reaching(curve: np.ndarray, target: float) -> int | None:
    """1-based count of measurements after which ``curve`` is at or below ``target``."""
    hit = np.nonzero(curve <= target)[0]
    return int(hit[0]) + 1 if len(hit) else None


def top_steps(costs: list[float], steps: list[list[list]], k: int) -> list[list[list]]:
    order = sorted((c, i) for i, c in enumerate(costs) if math.isfinite(c))
    out: list[list[list]] = []
    for _, i in order:
        if steps[i] not in out and steps[i]:
            out.append(steps[i])
        if len(out) == k:
            break
    return out


def compare_report(task: Task, random_path: Path, search_paths: list[Path],
                   remeasure: int = 3, min_repeat_ms: float = 30.0) -> str:
    rand_costs, rand_steps = trial_costs(random_path)
    n = len(rand_costs)
    target = min(rand_costs)
    rcurve = random_curve(rand_costs)
    lines = [f"{task.label}: random set of {n} (best {target * 1e3:.3f} ms); a third is "
             f"{n // 3} measurements"]
    for k in (n // 10, n // 3, n):
        lines.append(f"  random, median over orders: best after {k:4d}: "
                     f"{rcurve[k - 1] * 1e3:.3f} ms")
    runs = []
    for path in search_paths:
        costs, steps = trial_costs(path)
        curve = best_so_far(costs)
        hit = first_reaching(curve, target)
        hit5 = first_reaching(curve, target * 1.05)
        m = min(len(curve), n // 3)
        lines.append(
            f"  {path.stem}: {len(costs)} measurements (its first, the default schedule: "
            f"{costs[0] * 1e3:.3f} ms), best {curve[-1] * 1e3:.3f} ms; "
            f"after {m}: {curve[m - 1] * 1e3:.3f} ms (random's median curve there: "
            f"{rcurve[m - 1] * 1e3:.3f} ms); reaches the random set's best after "
            f"{hit if hit else 'never'}, within 5% after {hit5 if hit5 else 'never'}")
        runs.append((path.stem, costs, steps))
    if remeasure > 0:
        lines += _remeasured(task, [("random", rand_costs, rand_steps), *runs], remeasure,
                             min_repeat_ms)
    return "\n".join(lines)


def _remeasured(task: Task, runs: list[tuple[str, list[float], list[list[list]]]], k: int,
                min_repeat_ms: float) -> list[str]:
    """Re-time the top ``k`` of every run (and the default) side by side; per run the
    lowest median."""
    owners: list[str] = ["default"]
    cands: list[list[Step] | None] = [None]
    for name, costs, steps in runs:
        for s in top_steps(costs, steps, k):
            owners.append(name)
            cands.append([Step.from_json(x) for x in s])
    folder = Path(tempfile.mkdtemp(prefix="tsm-study-"))
    builder, runner = LocalBuilder(2), LocalRunner(min_repeat_ms=min_repeat_ms)
    try:
        items = remeasure(task, cands, builder, runner, folder, rounds=5)
    finally:
        builder.close()
        shutil.rmtree(folder, ignore_errors=True)
    best: dict[str, tuple[float, float]] = {}
    for owner, item in zip(owners, items):
        fastest = min(item.costs) if item.costs and item.error is None else math.inf
        if owner not in best or item.median < best[owner][0]:
            best[owner] = (item.median, fastest)
    out = [f"  re-measured side by side (top {k} of each, 5 alternating rounds; the run's "
           "lowest median, and that candidate's min):"]
    ref = best["random"][0]
    for owner, (median, fastest) in best.items():
        rel = median / ref if math.isfinite(ref) else math.nan
        out.append(f"    {owner:38s} median {median * 1e3:.3f} ms ({rel:.3f} x random's), "
                   f"min {fastest * 1e3:.3f} ms")
    return out
