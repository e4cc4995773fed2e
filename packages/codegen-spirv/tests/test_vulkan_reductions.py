"""Long reductions shared by a workgroup (partial results combined in shared memory) on
Vulkan: a classifier's softmax and argmax, layer normalization rows, global pooling;
validated by spirv-val and compared with the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check

from tensorsmith.ir import GraphBuilder

pytestmark = pytest.mark.vulkan


def test_softmax_and_argmax_over_1000_classes(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 1000), "float32")
    sm = b.add1("softmax", [x], {"axis": -1}, name="sm")
    am = b.add1("argmax", [x], {"axis": 1, "keepdims": False}, name="am")
    check(b.finish([sm, am]), {"x": rng.standard_normal((2, 1000)).astype("float32") * 3},
          tmp_path, 1e-6)


def test_layer_norm_rows(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (197, 768), "float32")
    mean = b.add1("reduce_mean", [x], {"axes": [1], "keepdims": True}, name="mean")
    centered = b.add1("sub", [x, mean], name="c")
    var = b.add1("reduce_mean", [b.add1("mul", [centered, centered], name="sq")],
                 {"axes": [1], "keepdims": True}, name="var")
    eps = b.constant("eps", np.array([1e-5], "float32"))
    y = b.add1("div", [centered, b.add1("sqrt", [b.add1("add", [var, eps], name="ve")],
                                        name="sd")], name="y")
    check(b.finish([y]), {"x": rng.standard_normal((197, 768)).astype("float32")}, tmp_path,
          1e-4)


def test_global_average_pool(tmp_path: Path, rng: np.random.Generator) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 40, 7, 7), "float32")
    g = b.finish([b.add1("reduce_mean", [x], {"axes": [2, 3], "keepdims": True}, name="gap")])
    check(g, {"x": rng.standard_normal((2, 40, 7, 7)).astype("float32")}, tmp_path, 1e-5)
