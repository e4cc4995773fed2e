"""Convolutions whose GPU schedule prefetches the next reduction step's tiles, on every
target, against the graph's interpreter.

The GPU schedule stages the weights and the zero-padded input of each reduction step in
workgroup memory and loads the next step's share into registers while computing
(te/tiles.py): ``if (k + 1 < K) { copy loop; padded load }``. With 256 input channels on
a small image an invocation's share of the weights takes more copies than the schedule
unrolls, so the copy stays a loop under that guard, and the input's padding test follows
it. PoCL's kernel compiler (3.1 on LLVM 15, on AVX-512 hosts) gave every work-item work-item
0's side of the padding test there, zeroing the prefetched input after the first step:
almost every output was wrong while Vulkan, on the same schedule, was right. The OpenCL
codegen unrolls such a loop (codegen-opencl emit.py, ``_KernelWriter._skippable_loop``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.interpreter import run_graph


@pytest.mark.parametrize("channels, out_channels, size", [(256, 256, 2), (256, 512, 2)],
                         ids=["256to256", "256to512"])
def test_padded_conv_with_a_prefetched_reduction(channels: int, out_channels: int, size: int,
                                                 target: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    b = GraphBuilder("conv")
    x = b.input("x", (1, channels, size, size), "float32")
    w = b.constant("w", rng.standard_normal((out_channels, channels, 3, 3)).astype("float32"))
    y = b.add1("conv2d", [x, w], {"strides": [1, 1], "pads": [1, 1, 1, 1]})
    graph = b.finish([y])
    inputs = {"x": rng.standard_normal((1, channels, size, size)).astype("float32")}
    path = tmp_path / "conv.tsm"
    build(graph, target=target).export_library(path)
    with rt.load(path) as module:
        (got,) = module.run(inputs)
    (want,) = run_graph(graph, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
