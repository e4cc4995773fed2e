"""Resize and Upsample whose scales, sizes or roi the run gives: one import (and one
artifact) for every value, the output sizes computed on the host before each run, the
taps and weights by kernels; outputs as onnxruntime's. Antialiasing still needs the
values when the model is compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from frontend_onnx_testing import make_model, ort_run
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.frontend.onnx.context import ConstantRequiredError
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.text import print_graph

X = np.arange(1, 1 + 2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) ** 0.5


def resize_model(operands: Sequence[str], opset: int = 19, x: np.ndarray = X,
                 **attrs: Any) -> Any:
    """Resize of ``x`` with ``operands`` (roi, scales, sizes) as graph inputs."""
    specs = {"x": ("float32", list(x.shape))}
    names = ["x", "", "", ""]
    count = len(attrs.get("axes", range(4)))
    for name in operands:
        at = ("roi", "scales", "sizes").index(name) + 1
        names[at] = name
        dtype = "int64" if name == "sizes" else "float32"
        specs[name] = (dtype, [2 * count if name == "roi" else count])
    while not names[-1]:
        names.pop()
    node = helper.make_node("Resize", names, ["y"], **attrs)
    return make_model([node], specs, ["y"], opset=opset)


def computes_sizes(graph: Graph) -> None:
    """The graph sizes its output from the run's values (no fall-back to constants)."""
    assert any(line.startswith("  size ") for line in print_graph(graph).splitlines())


def runs_like_onnxruntime(model: Any, feeds: Sequence[Mapping[str, np.ndarray]],
                          atol: float = 1e-5, x: np.ndarray = X) -> None:
    graph, _ = from_onnx(model)
    computes_sizes(graph)
    for feed in feeds:
        (got,), (want,) = run_graph(graph, {"x": x, **feed}), ort_run(model, {"x": x, **feed})
        assert got.shape == want.shape, (feed, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=atol)


def scales(*values: float) -> dict[str, np.ndarray]:
    return {"scales": np.asarray(values, np.float32)}


def sizes(*values: int) -> dict[str, np.ndarray]:
    return {"sizes": np.asarray(values, np.int64)}


@pytest.mark.parametrize("transform,nearest", [
    ("half_pixel", "round_prefer_floor"), ("asymmetric", "floor"),
    ("align_corners", "round_prefer_ceil"), ("pytorch_half_pixel", "ceil")])
def test_nearest_scales(transform: str, nearest: str) -> None:
    model = resize_model(["scales"], mode="nearest", coordinate_transformation_mode=transform,
                         nearest_mode=nearest)
    runs_like_onnxruntime(model, [scales(1, 1, 2, 2), scales(1, 2, 0.5, 0.6),
                                  scales(2, 1, 1.5, 3)])


@pytest.mark.parametrize("transform", ["half_pixel", "align_corners", "asymmetric",
                                       "pytorch_half_pixel", "half_pixel_symmetric"])
def test_linear_sizes(transform: str) -> None:
    model = resize_model(["sizes"], mode="linear", coordinate_transformation_mode=transform)
    runs_like_onnxruntime(model, [sizes(2, 3, 8, 10), sizes(2, 3, 3, 2), sizes(2, 3, 1, 7)])


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_kept_aspect_ratio(policy: str) -> None:
    model = resize_model(["sizes"], mode="nearest", axes=[2, 3],
                         keep_aspect_ratio_policy=policy)
    runs_like_onnxruntime(model, [sizes(8, 7), sizes(3, 9), sizes(2, 2)])


@pytest.mark.parametrize("mode,exclude", [("nearest", 0), ("linear", 0), ("cubic", 0),
                                           ("cubic", 1)])
def test_axes_of_one_position(mode: str, exclude: int) -> None:
    """An axis of size 1: every output copies its one input."""
    x = X[:1, :2, :1, :3]
    model = resize_model(["scales"], x=x, mode=mode, exclude_outside=exclude, axes=[2, 3],
                         coordinate_transformation_mode="asymmetric", nearest_mode="ceil")
    runs_like_onnxruntime(model, [scales(3, 2), scales(1, 0.7)], x=x)


def test_cubic_exclude_outside() -> None:
    model = resize_model(["scales"], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)
    runs_like_onnxruntime(model, [scales(1, 1, 2, 2), scales(1, 1, 0.6, 1.7)], atol=1e-4)


def test_tf_crop_and_resize() -> None:
    model = resize_model(["roi", "sizes"], mode="linear", axes=[3, 2],
                         coordinate_transformation_mode="tf_crop_and_resize",
                         extrapolation_value=10.0)
    roi = {"roi": np.asarray([0.2, 0.4, 0.8, 1.2], np.float32)}
    runs_like_onnxruntime(model, [{**roi, **sizes(3, 3)}, {**roi, **sizes(6, 1)},
                                  {"roi": np.asarray([-0.5, 0, 1.5, 0.5], np.float32),
                                   **sizes(4, 5)}])


def test_upsample() -> None:
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    model = make_model([node], {"x": ("float32", list(X.shape)), "scales": ("float32", [4])},
                       ["y"], opset=9)
    runs_like_onnxruntime(model, [scales(1, 1, 2, 3), scales(1, 2, 1, 2)])


def test_constant_scales_stay_constant() -> None:
    """With constant scales the weights are constants, as before: nothing computed on the
    host."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    model = make_model([node], {"x": ("float32", list(X.shape))}, ["y"], opset=19,
                       inits={"scales": np.asarray([1, 1, 2, 2], np.float32)})
    graph, _ = from_onnx(model)
    assert "  size " not in print_graph(graph)
    assert graph.outputs[0].shape == (2, 3, 8, 10)


def test_antialias_needs_the_values() -> None:
    """Antialiased filters widen with the scale: left to the values known at compile time."""
    model = resize_model(["scales"], mode="linear", antialias=1)
    with pytest.raises(ConstantRequiredError):
        from_onnx(model)


def test_one_artifact(tmp_path: Path) -> None:
    """Compiled once for the llvm target; each run sizes the output from its scales."""
    import tensorsmith.runtime as rt
    from tensorsmith.ir import build

    model = resize_model(["scales"], mode="linear", axes=[2, 3])
    graph, params = from_onnx(model)
    path = tmp_path / "resize.so"
    build(graph, target="llvm", params=params).export_library(str(path))
    m = rt.load(str(path), device="cpu")
    for feed in (scales(2, 2), scales(0.5, 0.8), scales(1.5, 3)):
        (got,) = m.run({"x": X, **feed})
        (want,) = ort_run(model, {"x": X, **feed})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
