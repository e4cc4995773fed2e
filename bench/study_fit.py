"""Cost-model quality on measured random candidates: rank correlation on held-out ones.

Reads a records file written by ``study_measure``; computes each candidate's features
the way the tuner does (lowered tensor IR), then, over several random train/held-out
splits, trains the tuner's :class:`CostModel` on the training part and reports the
Spearman rank correlation between its scores and the measured speed of the held-out
part. Two references put the number in context: the correlation between two repeats
of the same measurement (how well *any* model could do with this noise), and how fast
the candidate the model ranks first among the held-out ones really is. Because random
candidates span orders of magnitude, ranking them all is easier than what the search
needs (ordering good candidates among themselves), so the correlation is also given
over the faster half of the held-out candidates alone.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from tensorsmith.autotune.cost_model import CostModel
from tensorsmith.autotune.search import TaskSearch
from tensorsmith.autotune.task import Task
from tensorsmith.ir.records import read_records
from tensorsmith.ir.te.schedule import Step


def measured_set(task: Task, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, best seconds, all repeat costs) of the error-free records of ``path``."""
    search = TaskSearch(task, CostModel(), random.Random(0))
    feats, best, costs = [], [], []
    for rec in read_records(path):
        if rec.get("error") or not rec.get("costs"):
            continue
        f = search.features_of_steps([Step.from_json(s) for s in rec["steps"]])
        if f is None:
            continue
        feats.append(f)
        best.append(min(rec["costs"]))
        costs.append(rec["costs"])
    width = min(len(c) for c in costs) if costs else 0
    return np.array(feats), np.array(best), np.array([c[:width] for c in costs])


def held_out_spearman(x: np.ndarray, seconds: np.ndarray, train_frac: float, seed: int,
                      kind: str = "hist") -> tuple[float, float, float]:
    """Spearman of scores vs speed on the held-out part, the same on its faster half,
    and held-out best / the time of the model's top pick."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(seconds))
    cut = int(len(order) * train_frac)
    train, test = order[:cut], order[cut:]
    model = CostModel(kind=kind, seed=seed)
    model.update(list(x[train]), list(seconds[train]), ["task"] * len(train))
    scores = model.predict(x[test])
    rho = float(spearmanr(scores, -seconds[test]).statistic)
    fast = seconds[test] <= np.median(seconds[test])
    rho_fast = float(spearmanr(scores[fast], -seconds[test][fast]).statistic)
    top = test[int(np.argmax(scores))]
    return rho, rho_fast, float(seconds[test].min() / seconds[top])


def fit_report(task: Task, path: Path, splits: int = 10, train_frac: float = 0.7,
               kind: str = "hist") -> str:
    x, seconds, costs = measured_set(task, path)
    n = len(seconds)
    if n < 20:
        return f"{task.label}: only {n} good measurements in {path}; measure more first"
    rhos, fast, tops = zip(*(held_out_spearman(x, seconds, train_frac, s, kind)
                       for s in range(splits)))
    noise = [float(spearmanr(costs[:, i], costs[:, j]).statistic)
             for i in range(costs.shape[1]) for j in range(i + 1, costs.shape[1])]
    spread = seconds.max() / seconds.min()
    lines = [
        f"{task.label}: {n} measured candidates (fastest {seconds.min() * 1e3:.3f} ms, "
        f"slowest {spread:.0f}x that), {splits} splits {train_frac:.0%} train / "
        f"{1 - train_frac:.0%} held out, model {kind!r}",
        f"  Spearman(predicted, measured) on held-out: mean {np.mean(rhos):.3f}, "
        f"min {np.min(rhos):.3f}, max {np.max(rhos):.3f}",
        f"  the same over the faster half of the held-out: mean {np.mean(fast):.3f}, "
        f"min {np.min(fast):.3f}",
        f"  repeat-vs-repeat Spearman of the same measurements (noise ceiling): "
        f"{np.mean(noise):.3f}" if noise else "  (one repeat per record: no noise ceiling)",
        f"  model's top held-out pick runs at {np.mean(tops):.2f} of the held-out best "
        f"(mean; 1.00 = it picked the fastest)",
    ]
    return "\n".join(lines)
