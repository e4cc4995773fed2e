"""Slice, Split, Pad and CenterCropPad whose bounds, sizes or amounts are graph inputs:
compiled once, with those values read when the model runs (sizes the host computes),
each artifact run with several values and compared with ONNX Runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from frontend_onnx_testing import make_model, ort_run, rand
from onnx import ModelProto, helper

import tensorsmith.runtime
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.ir.text import print_graph

_Feeds = Mapping[str, np.ndarray]


class _Compiled:
    """One artifact of ``model``, whose graph must compute sizes from input values."""

    def __init__(self, model: ModelProto, tmp_path: Path) -> None:
        graph, params = from_onnx(model)
        text = print_graph(graph)
        assert "\n  size " in text, text  # not specialized on the values
        path = tmp_path / "model.so"
        build(graph, target="llvm", params=params).export_library(str(path))
        self.model = model
        self.module = tensorsmith.runtime.load(str(path), device="cpu")

    def run(self, feeds: _Feeds) -> list[np.ndarray]:
        out = self.module.run(dict(feeds))
        return list(out.values()) if isinstance(out, Mapping) else list(out)

    def check(self, feeds: _Feeds) -> None:
        for got, want in zip(self.run(feeds), ort_run(self.model, feeds), strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _ints(*values: int) -> np.ndarray:
    return np.asarray(values, np.int64)


def _slice_model(with_steps: bool) -> ModelProto:
    names = ["x", "starts", "ends", "axes"] + (["steps"] if with_steps else [])
    node = helper.make_node("Slice", names, ["y"])
    shape = [6, 5] if with_steps else [6, 5, 4]  # every axis of x is stepped at run time
    inputs = {"x": ("float32", shape)} | {n: ("int64", [2]) for n in names[1:]}
    return make_model([node], inputs, ["y"], opset=13)


SLICES = [  # starts, ends, axes, steps
    ((0, 1), (5, 4), (0, 1), (1, 1)),
    ((-1, 4), (-100, 0), (1, 0), (-2, -1)),     # backward, from the end, past the start
    ((1, -3), (2**62, 5), (-1, 0), (2, 3)),     # "to the end", a negative axis
    ((5, 0), (0, 1), (0, 1), (-3, 1)),
]


@pytest.fixture(scope="module")
def slice_no_steps(tmp_path_factory: pytest.TempPathFactory) -> _Compiled:
    return _Compiled(_slice_model(False), tmp_path_factory.mktemp("slice"))


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> _Compiled:
    return _Compiled(_split_model(), tmp_path_factory.mktemp("split"))


def test_slice_with_steps_compiles_once(tmp_path: Path) -> None:
    compiled = _Compiled(_slice_model(True), tmp_path)
    x = rand(6, 5)
    for starts, ends, axes, steps in SLICES:
        compiled.check({"x": x, "starts": _ints(*starts), "ends": _ints(*ends),
                        "axes": _ints(*axes), "steps": _ints(*steps)})


def test_slice_without_steps_compiles_once(slice_no_steps: _Compiled) -> None:
    compiled = slice_no_steps
    x = rand(6, 5, 4)
    for starts, ends, axes, _ in [((0, 1), (5, 4), (0, 2), ()), SLICES[2]]:
        compiled.check({"x": x, "starts": _ints(*starts), "ends": _ints(*ends),
                        "axes": _ints(*axes)})
    compiled.check({"x": x, "starts": _ints(-2, 0), "ends": _ints(6, -1),
                    "axes": _ints(2, 1)})


def test_empty_slice_is_refused_naming_the_node(slice_no_steps: _Compiled) -> None:
    feeds = {"x": rand(6, 5, 4), "starts": _ints(3, 0), "ends": _ints(3, 5),
             "axes": _ints(0, 1)}
    with pytest.raises(Exception, match=r"\(Slice, opset 13, output 'y'\): the size 'y_len0'"):
        slice_no_steps.run(feeds)


def test_axes_named_twice_are_refused_naming_the_node(slice_no_steps: _Compiled) -> None:
    feeds = {"x": rand(6, 5, 4), "starts": _ints(1, 0), "ends": _ints(3, 2),
             "axes": _ints(1, -2)}  # axis 1 twice
    with pytest.raises(Exception, match=r"\(Slice, opset 13, output 'y'\): the axes input "
                                        r"must name distinct axes in \[-3, 2\]"):
        slice_no_steps.run(feeds)


def _split_model() -> ModelProto:
    node = helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1)
    return make_model([node], {"x": ("float32", [2, 7]), "split": ("int64", [3])},
                      ["a", "b", "c"], opset=18)


def test_split_sizes_compile_once(split: _Compiled) -> None:
    x = rand(2, 7)
    for sizes in [(2, 4, 1), (5, 1, 1), (1, 1, 5)]:
        split.check({"x": x, "split": _ints(*sizes)})


@pytest.mark.parametrize("sizes", [(2, 4, 2), (3, 4, 0)])
def test_split_sizes_that_do_not_cover_the_axis_are_refused(split: _Compiled,
                                                            sizes: Sequence[int]) -> None:
    with pytest.raises(Exception, match=r"\(Split, opset 18, output 'a'\)"):
        split.run({"x": rand(2, 7), "split": _ints(*sizes)})


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap"])
def test_pads_compile_once(tmp_path: Path, mode: str) -> None:
    names = ["x", "pads"] + (["value"] if mode == "constant" else [])
    node = helper.make_node("Pad", names, ["y"], mode=mode)
    inputs = {"x": ("float32", [3, 4]), "pads": ("int64", [4])}
    inputs |= {"value": ("float32", [])} if mode == "constant" else {}
    compiled = _Compiled(make_model([node], inputs, ["y"], opset=18), tmp_path)
    x = rand(3, 4)
    for k, pads in enumerate([(0, 1, 2, 0), (2, 0, 0, 3), (1, 5, 1, 1)]):
        feeds = {"x": x, "pads": _ints(*pads)}
        feeds |= {"value": np.float32(1.5 * k - 1)} if mode == "constant" else {}
        compiled.check(feeds)


def test_pad_axes_compile_once(tmp_path: Path) -> None:
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"])
    inputs = {"x": ("float32", [2, 3, 4]), "pads": ("int64", [4]), "axes": ("int64", [2])}
    compiled = _Compiled(make_model([node], inputs, ["y"], opset=18), tmp_path)
    x = rand(2, 3, 4)
    for pads, axes in [((1, 0, 2, 1), (0, 2)), ((0, 3, 1, 0), (-1, 1))]:
        compiled.check({"x": x, "pads": _ints(*pads), "axes": _ints(*axes)})


def test_center_crop_pad_compiles_once(tmp_path: Path) -> None:
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[0, 2])
    inputs = {"x": ("float32", [5, 3, 6]), "shape": ("int64", [2])}
    compiled = _Compiled(make_model([node], inputs, ["y"], opset=18), tmp_path)
    x = rand(5, 3, 6)
    for shape in [(2, 9), (8, 3), (5, 6), (1, 1)]:
        compiled.check({"x": x, "shape": _ints(*shape)})
