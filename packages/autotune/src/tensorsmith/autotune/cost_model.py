"""The cost model: gradient-boosted trees that rank a task's candidates by features.

Trained online on every measured candidate. The target is log throughput relative to
the best candidate of the same task (``log2(best_time / time)``, so 0 is the best seen
and -1 is half as fast): what the search needs is the order of candidates *within* a
task, and normalizing per task lets tasks of very different sizes share one model.
Failed candidates are left out: their failures (crashes, timeouts) are not a property
of the features. Training is single-threaded (see ``_one_thread``); until enough
samples exist the model predicts nothing useful, and the
search falls back to random sampling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_SAMPLES = 8


class CostModel:
    """``update`` with measured samples, ``predict`` scores (higher is faster)."""

    def __init__(self, kind: str = "hist", seed: int = 0) -> None:
        self.kind = kind
        self.seed = seed
        self._x: list[np.ndarray] = []
        self._time: list[float] = []
        self._group: list[str] = []
        self._model: Any = None

    @property
    def num_samples(self) -> int:
        return len(self._x)

    @property
    def trained(self) -> bool:
        return self._model is not None

    def add(self, features: np.ndarray, seconds: float, group: str) -> None:
        """Record one measured candidate of task ``group`` (without retraining)."""
        if not math.isfinite(seconds) or seconds <= 0:
            return
        self._x.append(np.asarray(features, dtype=np.float64))
        self._time.append(float(seconds))
        self._group.append(group)

    def update(self, features: Sequence[np.ndarray] = (), seconds: Sequence[float] = (),
               groups: Sequence[str] = ()) -> None:
        """Add samples and retrain on everything seen."""
        for f, t, g in zip(features, seconds, groups, strict=True):
            self.add(f, t, g)
        self.fit()

    def targets(self) -> np.ndarray:
        """log2(best time of the task / time): 0 for each task's best, negative otherwise."""
        times = np.asarray(self._time)
        groups = np.asarray(self._group)
        y = np.empty(len(times))
        for g in set(self._group):
            mask = groups == g
            y[mask] = np.log2(times[mask].min() / times[mask])
        return y

    def fit(self) -> None:
        if len(self._x) < MIN_SAMPLES:
            return
        x = np.stack(self._x)
        y = self.targets()
        model = self._make()
        with _one_thread():
            model.fit(x, y)
        self._model = model

    def _make(self) -> Any:
        if self.kind == "gbr":
            from sklearn.ensemble import GradientBoostingRegressor

            return GradientBoostingRegressor(n_estimators=150, max_depth=5, learning_rate=0.1,
                                             subsample=0.8, random_state=self.seed)
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(max_iter=150, learning_rate=0.1,
                                             max_leaf_nodes=31,
                                             min_samples_leaf=min(10, max(2, len(self._x) // 8)),
                                             random_state=self.seed)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Scores for rows of ``features``: higher means predicted faster (zeros untrained)."""
        x = np.atleast_2d(np.asarray(features, dtype=np.float64))
        if self._model is None or len(x) == 0:
            return np.zeros(len(x))
        with _one_thread():
            return np.asarray(self._model.predict(x), dtype=np.float64)


def _one_thread() -> Any:
    """Small fits are fastest single-threaded: OpenMP's spinning threads fight the
    builder and runner processes for cores (10-50x slower on a 2-core machine)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)
