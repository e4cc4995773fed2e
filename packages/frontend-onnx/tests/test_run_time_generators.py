"""Generators whose operands the run gives: Trilu's k, OneHot's depth, ConstantOfShape's
shape, Range's bounds and the windows' size as graph inputs. Each model is imported and
compiled for the CPU once, then run for several operand values; outputs as
onnxruntime's. Sizes the values decide are computed on the host before each run; values
they only change (k, start, delta) are read by kernels. A float16 bound, which the host
does not read, still needs its value when the model is compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from frontend_onnx_testing import make_model, ort_run
from onnx import TensorProto, helper

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.frontend.onnx.context import ConstantRequiredError
from tensorsmith.ir import build
from tensorsmith.ir.text import print_graph

Feeds = Mapping[str, np.ndarray]


def runs_like_onnxruntime(model: onnx.ModelProto, feeds: Sequence[Feeds], tmp_path: Path,
                          computed: bool = True, atol: float = 1e-6) -> None:
    """One import and one CPU artifact for every feed (an operand frozen into the model
    would fail the import: it is a graph input here); ``computed``: the graph sizes its
    output from the run's values (a ``size`` line), with no fall-back to constants."""
    graph, params = from_onnx(model)
    has_sizes = any(line.startswith("  size ") for line in print_graph(graph).splitlines())
    assert has_sizes == computed, print_graph(graph)
    path = tmp_path / "model.so"
    build(graph, target="llvm", params=params).export_library(path)
    module = rt.load(path, device="cpu")
    for feed in feeds:
        got, want = module.run(dict(feed)), ort_run(model, feed)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), feed
            np.testing.assert_allclose(g, w, rtol=0, atol=atol, err_msg=str(feed))


def scalar(value: float, dtype: str = "int64") -> np.ndarray:
    return np.asarray(value, dtype)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_k(upper: int, tmp_path: Path) -> None:
    model = make_model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
                       {"x": ("float32", [2, 3, 5]), "k": ("int64", [])}, ["y"])
    x = np.arange(30, dtype=np.float32).reshape(2, 3, 5) + 1
    runs_like_onnxruntime(model, [{"x": x, "k": scalar(k)} for k in (0, -1, 2, 7, -4)],
                          tmp_path, computed=False)


def test_one_hot_depth(tmp_path: Path) -> None:
    node = helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=1)
    model = make_model([node], {"i": ("int64", [2, 3]), "depth": ("float32", []),
                                "v": ("float32", [2])}, ["y"], opset=11)
    i = np.array([[0, 3, -1], [5, 1, -4]], np.int64)
    v = np.array([-1.0, 3.0], np.float32)
    runs_like_onnxruntime(model, [{"i": i, "depth": scalar(d, "float32"), "v": v}
                                  for d in (4, 6, 2.5)], tmp_path)


def test_constant_of_shape(tmp_path: Path) -> None:
    """A shape of [3, 2], [1, 4], and one with a 0: an empty fill."""
    node = helper.make_node("ConstantOfShape", ["s"], ["y"],
                            value=helper.make_tensor("v", TensorProto.INT32, [1], [7]))
    model = make_model([node], {"s": ("int64", [2])}, {"y": "int32"})
    runs_like_onnxruntime(model, [{"s": np.array(s, np.int64)}
                                  for s in ([3, 2], [1, 4], [0, 5])], tmp_path)


@pytest.mark.parametrize("dtype,bounds", [
    ("int32", [(10, 6, -3), (0, 5, 1), (-2, 9, 4)]),
    ("float32", [(1, 5, 2), (0.5, 3, 0.25), (2, -1.5, -0.5)]),
])
def test_range(dtype: str, bounds: list[tuple[float, float, float]], tmp_path: Path) -> None:
    model = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                       {n: (dtype, []) for n in "sld"}, {"y": dtype})
    runs_like_onnxruntime(model, [dict(zip("sld", (scalar(b, dtype) for b in bound)))
                                  for bound in bounds], tmp_path)


def test_range_to_a_cast_size(tmp_path: Path) -> None:
    """Range(0, float(n), 1), as ONNX's window functions build it: the limit a Cast of
    the input, followed to the host."""
    nodes = [helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Range", ["zero", "nf", "one"], ["y"])]
    model = make_model(nodes, {"n": ("int32", [])}, ["y"],
                       {"zero": np.float32(0), "one": np.float32(1)})
    runs_like_onnxruntime(model, [{"n": scalar(n, "int32")} for n in (1, 4, 9)], tmp_path)


def test_a_float16_range_still_needs_its_bounds() -> None:
    """The host reads no float16: such bounds are frozen (the backend does it)."""
    model = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                       {n: ("float16", []) for n in "sld"}, {"y": "float16"})
    with pytest.raises(ConstantRequiredError):
        from_onnx(model)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_size(op: str, periodic: int, tmp_path: Path) -> None:
    node = helper.make_node(op, ["n"], ["y"], periodic=periodic)
    model = make_model([node], {"n": ("int64", [])}, ["y"])
    runs_like_onnxruntime(model, [{"n": scalar(n)} for n in (4, 10, 7)], tmp_path, atol=1e-6)
