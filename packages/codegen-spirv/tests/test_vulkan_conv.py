"""Convolutions through the tiled GPU schedule (channels x pixels, staged weights and
input windows with their padding) on Vulkan, validated by spirv-val and compared with
the reference interpreter; grouped ones through the simple schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check

from tensorsmith.ir import GraphBuilder

pytestmark = pytest.mark.vulkan

# (batch, channels, size, out channels, kernel, stride, pad, groups)
CASES = [(1, 3, 32, 64, 7, 2, 3, 1), (2, 5, 16, 40, 3, 2, 1, 1), (1, 64, 7, 96, 3, 1, 1, 1),
         (1, 24, 10, 70, 1, 1, 0, 1), (1, 16, 20, 16, 1, 2, 0, 1), (1, 8, 9, 8, 3, 1, 1, 8)]


@pytest.mark.parametrize("case", CASES)
def test_conv_bias_relu(case: tuple[int, ...], tmp_path: Path, rng: np.random.Generator) -> None:
    n, c, size, o, k, stride, pad, groups = case
    b = GraphBuilder()
    x = b.input("x", (n, c, size, size), "float32")
    w = b.constant("w", rng.standard_normal((o, c // groups, k, k)).astype("float32"))
    bias = b.constant("bias", rng.standard_normal((o, 1, 1)).astype("float32"))
    y = b.add1("conv2d", [x, w], {"strides": [stride, stride], "pads": [pad] * 4,
                                  "groups": groups}, name="conv")
    g = b.finish([b.add1("relu", [b.add1("add", [y, bias], name="a")], name="r")])
    check(g, {"x": rng.standard_normal((n, c, size, size)).astype("float32")}, tmp_path, 1e-4)
