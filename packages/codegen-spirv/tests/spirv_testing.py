"""Shared helpers of the vulkan tests: compile for ``vulkan``, validate every SPIR-V module with
spirv-val, export, load on the Vulkan device (lavapipe in CI), compare.

These tests need spirv-tools and a Vulkan driver; they fail (not skip) without them, so
a CI machine that lost its driver cannot pass quietly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tensorsmith.runtime as rt
from tensorsmith.ir import CompiledModule, GraphBuilder, build, run_graph

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[2]


def compile_vulkan(graph: Any, tmp_path: Path, params: dict[str, np.ndarray] | None = None,
                   name: str = "model.tsm") -> tuple[CompiledModule, Any]:
    """Build for vulkan, spirv-val every module, export, and load on device 'vulkan'."""
    lib = build(graph, target="vulkan", params=params)
    lib.kernels.validate()
    path = tmp_path / name
    lib.export_library(path)
    return lib, rt.load(path, device="vulkan")


def check(graph: Any, inputs: dict[str, np.ndarray], tmp_path: Path, tol: float = 1e-5
          ) -> list[np.ndarray]:
    """The vulkan outputs of ``graph`` match the reference interpreter within ``tol``."""
    _, module = compile_vulkan(graph, tmp_path)
    got = module.run(inputs)
    want = run_graph(graph, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return got


def dense_bias_relu(m: int, k: int, n: int, rng: np.random.Generator) -> tuple[Any, dict]:
    """``relu(x @ w + c)`` with random weights, and a random input for it."""
    b = GraphBuilder()
    x = b.input("x", (m, k), "float32")
    w = b.constant("w", rng.standard_normal((k, n)).astype("float32"))
    c = b.constant("c", rng.standard_normal((n,)).astype("float32"))
    h = b.add1("relu", [b.add1("add", [b.add1("matmul", [x, w], name="mm"), c], name="a")],
               name="r")
    return b.finish([h]), {"x": rng.standard_normal((m, k)).astype("float32")}
