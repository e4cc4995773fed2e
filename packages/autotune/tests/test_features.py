"""Features: fixed length, finite, and sensitive to what the schedule changes."""

from __future__ import annotations

import random

import numpy as np
from autotune_testing import convnet, matmul, mlp

from tensorsmith.autotune.features import FEATURE_NAMES, NUM_FEATURES, extract_features
from tensorsmith.autotune.space import SearchSpace
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.ir.te.lower import lower


def _features(task, config, space):  # noqa: ANN001, ANN202
    inputs, outputs = space.io(config)
    return extract_features(lower(space.schedule(config), inputs, outputs))


def test_fixed_length_and_finite() -> None:
    assert len(FEATURE_NAMES) == NUM_FEATURES == len(set(FEATURE_NAMES))
    rng = random.Random(0)
    for graph in (mlp(), convnet(), matmul(64, 64, 64)):
        for task in extract_tasks(graph):
            space = SearchSpace(task)
            for config in [space.default()] + [space.sample(rng) for _ in range(8)]:
                f = _features(task, config, space)
                assert f.shape == (NUM_FEATURES,)
                assert np.isfinite(f).all() and (f >= 0).all()


def test_features_see_vectorizing_parallelism_and_tiles() -> None:
    (task,) = extract_tasks(matmul(64, 64, 64))
    space = SearchSpace(task)
    names = [k.name for _, k in space.knobs]
    base = dict(zip(names, space.default()))

    def feat(**changes: object) -> dict[str, float]:
        config = tuple({**base, **changes}[n] for n in names)
        return dict(zip(FEATURE_NAMES, _features(task, config, space)))

    on, off = feat(vectorize=True, parallel=True), feat(vectorize=False, parallel=False)
    assert on["main.innermost_vectorized"] == 1 and off["main.innermost_vectorized"] == 0
    assert on["main.parallel_extent"] > 0 and off["main.parallel_extent"] == 0
    assert feat(cache=True)["main.local_elements"] > feat(cache=False)["main.local_elements"]
    assert feat(rows=8)["main.unrolled_body"] > feat(rows=1)["main.unrolled_body"]
