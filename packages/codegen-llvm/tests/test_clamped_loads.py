"""Clamped contiguous spans (a padding stage's reads) load as one masked vector."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm.clamped import clamped_span
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.te.expr import INDEX, Var, maximum, minimum

rng = np.random.default_rng(9)


def test_match_clamped_span() -> None:
    x, row = Var("x", INDEX), Var("row", INDEX)
    span = clamped_span(row * 56 + maximum(minimum(x - 1, 55), 0), x)
    assert span is not None and (span.lo, span.hi) == (0, 55)
    strided = clamped_span(row * 56 + maximum(minimum(x * 2 - 1, 55), 0), x)
    assert strided is not None and strided.step == 2
    assert clamped_span(row * 56 + maximum(minimum(x * 5, 55), 0), x) is None  # stride 5
    assert clamped_span(row * 56 + x, x) is None  # nothing clamped: a plain vector load


@pytest.mark.parametrize("width,pads", [(9, [1, 1, 1, 1]), (70, [2, 3, 0, 1])])
def test_padded_input_read_as_masked_span(width: int, pads: list[int], tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 3, 5, width), "float32")
    w = b.constant("w", rng.standard_normal((3, 1, 3, 3)).astype("float32"))
    g = b.finish([b.add1("conv2d", [x, w], {"pads": pads, "groups": 3}, name="dw")])
    lib = build(g, target="llvm")
    assert "llvm.masked.load" in lib.get_source("llvm")
    path = tmp_path / "m.so"
    lib.export_library(path)
    feeds = {"x": rng.standard_normal((1, 3, 5, width)).astype("float32")}
    got = rt.load(path, device="cpu").run(feeds)[0]
    np.testing.assert_allclose(got, run_graph(g, feeds)[0], rtol=1e-5, atol=1e-5)
