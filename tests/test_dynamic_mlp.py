"""A model with a symbolic batch, built once by ``build`` (GraphBuilder input [batch, 16]),
exported, and run by the CPU runtime at batch 1, 3 and 8 (and back down), against NumPy:
the compiler's plan with symbols, its plan.c, the LLVM kernels that read the batch at
run time, and the runtime's binding and placement together."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.symbolic import symbol
from tensorsmith.runtime import InputError

rng = np.random.default_rng(7)
W1 = rng.standard_normal((16, 32)).astype(np.float32)
B1 = rng.standard_normal(32).astype(np.float32)
W2 = rng.standard_normal((32, 10)).astype(np.float32)


def reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W1 + B1, 0) @ W2


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = GraphBuilder()
    x = b.input("x", (symbol("batch"), 16), "float32")
    hidden = b.add1("relu", [b.add1("add", [b.add1("matmul", [x, b.constant("w1", W1)]),
                                            b.constant("b1", B1)])])
    lib = build(b.finish([b.add1("matmul", [hidden, b.constant("w2", W2)])]), target="llvm")
    assert lib.plan.symbols == ("batch",)
    path = tmp_path_factory.mktemp("dynamic_mlp") / "mlp.so"
    lib.export_library(path)
    return path


def test_one_artifact_runs_batch_1_3_and_8(mlp_path: Path) -> None:
    with rt.load(mlp_path) as module:
        assert module.input_info == [{"name": "x", "shape": ("batch", 16), "dtype": "float32"}]
        assert module.output_info[0]["shape"] == ("batch", 10)
        for batch in (1, 3, 8, 3, 1, 8):
            x = rng.standard_normal((batch, 16)).astype(np.float32)
            (y,) = module.run({"x": x})
            assert y.shape == (batch, 10)
            np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4)
        profile = module.profile({"x": rng.standard_normal((5, 16)).astype(np.float32)},
                                 repeat=2)
        assert profile and module.get_output(0).shape == (5, 10)


def test_a_wrong_fixed_axis_is_refused(mlp_path: Path) -> None:
    with rt.load(mlp_path) as module, pytest.raises(
            InputError, match=r"input 'x' has shape \(2, 15\) but the model expects "
                              r"\[batch, 16\]"):
        module.run({"x": np.zeros((2, 15), np.float32)})
