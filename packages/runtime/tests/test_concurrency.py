"""Several models from one artifact, run from several threads at once."""

from __future__ import annotations

import numpy as np

import tensorsmith.runtime as rt


def test_two_models_two_threads(model_artifact, run_in_threads) -> None:
    models = [rt.load(model_artifact.path, num_threads=4) for _ in range(2)]

    def job(model: rt.GraphModule, seed: int) -> None:
        rng = np.random.default_rng(seed)
        for i in range(200):
            x = rng.standard_normal((1, 1000)).astype(np.float32)
            s = int(rng.integers(-5, 6))
            y, total = model.run({"x": x, "s": np.array(s, np.int64)})
            want_y, want_total = model_artifact.reference(x, s)
            np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-6, err_msg=f"run {i}")
            np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-4)

    errors = run_in_threads([lambda m=m, k=k: job(m, k) for k, m in enumerate(models)])
    assert not errors, errors


def test_one_module_shared_by_threads_serializes(model_artifact, run_in_threads) -> None:
    model = rt.load(model_artifact.path)

    def job(s: int) -> None:
        x = np.full((1, 1000), 0.5, np.float32)
        for _ in range(100):
            y = model.run({"x": x, "s": np.array(s, np.int64)})[0]
            np.testing.assert_allclose(y, model_artifact.reference(x, s)[0], rtol=1e-6)

    errors = run_in_threads([lambda s=s: job(s) for s in (1, 2, 3)])
    assert not errors, errors
