"""Clamped spans (a padding stage's reads) and constant lane offsets (a small image's
rows) load as one masked vector."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.codegen.llvm.clamped import clamped_span
from tensorsmith.codegen.llvm.offsets import lane_offsets
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


def test_lane_offsets_of_a_flattened_image() -> None:
    f, c = Var("f", INDEX), Var("c", INDEX)
    got = lane_offsets(c * 81 + (f // 7) * 9 + f % 7, f, 16)
    assert got is not None and got[1] == [0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 18, 19]
    assert lane_offsets(c * 81 + f * 9, f, 16) is None  # a span of 9 vectors: a gather


@pytest.mark.parametrize("size,cin", [(7, 16), (5, 3)])
def test_small_image_conv_reads_rows_as_one_span(size: int, cin: int, tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (1, cin, size, size), "float32")
    w = b.constant("w", rng.standard_normal((8, cin, 3, 3)).astype("float32"))
    g = b.finish([b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="conv")])
    lib = build(g, target="llvm")
    assert "shufflevector" in lib.get_source("llvm")
    path = tmp_path / "m.so"
    lib.export_library(path)
    feeds = {"x": rng.standard_normal((1, cin, size, size)).astype("float32")}
    got = rt.load(path, device="cpu").run(feeds)[0]
    np.testing.assert_allclose(got, run_graph(g, feeds)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [2, 3])
def test_strided_reads_of_whole_vectors_are_plain_loads(stride: int, tmp_path: Path) -> None:
    """A strided depthwise convolution's interior reads every ``stride``-th input as plain
    vector loads ending at the last element used (no masked load: slow on AVX2), then a
    shuffle; only the padded border and partial vectors use masked loads."""
    b = GraphBuilder()
    width = stride * 31 + 3  # output rows of 32: whole vectors
    x = b.input("x", (1, 2, 8, width), "float32")
    w = b.constant("w", rng.standard_normal((2, 1, 3, 3)).astype("float32"))
    g = b.finish([b.add1("conv2d", [x, w], {"groups": 2, "strides": [stride, stride]},
                         name="dw")])
    lib = build(g, target="llvm -mcpu=haswell")  # AVX2, which every test host runs
    source = lib.get_source("llvm")
    source = source if isinstance(source, str) else "\n".join(source)
    assert "shufflevector" in source and "llvm.masked.load" not in source
    path = tmp_path / "m.so"
    lib.export_library(path)
    feeds = {"x": rng.standard_normal((1, 2, 8, width)).astype("float32")}
    got = rt.load(path, device="cpu").run(feeds)[0]
    np.testing.assert_allclose(got, run_graph(g, feeds)[0], rtol=1e-5, atol=1e-5)
