"""The cost model learns a ranking from samples and generalizes it to unseen ones."""

from __future__ import annotations

import numpy as np

from tensorsmith.autotune.cost_model import CostModel


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_untrained_model_predicts_zeros() -> None:
    model = CostModel()
    model.update([np.ones(5)] * 3, [1.0, 2.0, 3.0], ["t"] * 3)
    assert not model.trained
    assert (model.predict(np.ones((4, 5))) == 0).all()


def test_targets_are_relative_to_each_tasks_best() -> None:
    model = CostModel()
    for t, g in [(1.0, "a"), (2.0, "a"), (10.0, "b"), (40.0, "b"), (float("inf"), "b")]:
        model.add(np.zeros(3), t, g)
    assert model.num_samples == 4  # failures are not training data
    np.testing.assert_allclose(model.targets(), [0.0, -1.0, 0.0, -2.0])


def test_fits_and_ranks_a_synthetic_set() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 4, (300, 12))

    def seconds(x: np.ndarray, task: int) -> np.ndarray:
        # time falls with x0, rises with x1 squared; task 1 is 100x bigger
        return (10.0 ** task) * np.exp2(-x[:, 0] + 0.3 * x[:, 1] ** 2)

    model = CostModel()
    groups = ["small" if i % 2 == 0 else "big" for i in range(200)]
    times = np.concatenate([seconds(x[i:i + 1], i % 2) for i in range(200)])
    model.update(list(x[:200]), list(times), groups)
    assert model.trained
    test = x[200:]
    predicted = model.predict(test)
    truth = -np.log2(seconds(test, 0))  # higher is faster, as the scores
    assert _spearman(predicted, truth) > 0.9
