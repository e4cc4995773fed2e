"""Ops added for ONNX conformance, against onnxruntime, with every compute definition
evaluated against its NumPy reference (frontend_onnx_testing.check): indexing and
scatters, running sums, TopK, Mod, bit shifts, Einsum, Resize, GridSample, DFT, Det."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, one_node, rand


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis: int) -> None:
    idx = np.random.default_rng(0).integers(-3, 3, (2, 3, 3)).astype(np.int64)
    m = one_node("GatherElements", {"x": ("float32", [3, 3, 3]), "i": ("int64", [2, 3, 3])},
                 ["y"], axis=axis)
    check(m, {"x": rand(3, 3, 3), "i": idx})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims: int) -> None:
    m = one_node("GatherND", {"x": ("float32", [2, 3, 4]), "i": ("int64", [2, 1, 2])},
                 ["y"], batch_dims=batch_dims)
    check(m, {"x": rand(2, 3, 4), "i": np.array([[[1, 2]], [[0, 3]]]) % [[[2, 3]]]})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction: str) -> None:
    m = one_node("ScatterElements", {"x": ("float32", [3, 4]), "i": ("int64", [2, 3]),
                                     "u": ("float32", [2, 3])}, ["y"], axis=1,
                 reduction=reduction, opset=18)
    idx = np.array([[0, 3, 1], [2, -1, 0]], np.int64)
    if reduction == "none":
        idx = np.array([[0, 3, 1], [2, 1, 0]], np.int64)  # no duplicates: order-free
    check(m, {"x": rand(3, 4), "i": idx, "u": rand(2, 3, seed=1)})


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd(reduction: str) -> None:
    m = one_node("ScatterND", {"x": ("float32", [4, 3]), "i": ("int64", [2, 1]),
                               "u": ("float32", [2, 3])}, ["y"], reduction=reduction,
                 opset=18)
    check(m, {"x": rand(4, 3), "i": np.array([[3], [1]]), "u": rand(2, 3, seed=1)})


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(exclusive: int, reverse: int) -> None:
    m = one_node("CumSum", {"x": ("float32", [3, 5])}, ["y"], {"axis": np.int64(1)},
                 exclusive=exclusive, reverse=reverse)
    check(m, {"x": rand(3, 5)})


@pytest.mark.parametrize("largest", [0, 1])
def test_topk(largest: int) -> None:
    x = np.array([[3, 1, 3, 2, 5], [0, 0, 1, 1, 0]], np.float32)
    m = one_node("TopK", {"x": ("float32", [2, 5])}, {"v": "float32", "i": "int64"},
                 {"k": np.array([3], np.int64)}, largest=largest)
    check(m, {"x": x})


@pytest.mark.parametrize("dtype,fmod,opset", [("int32", 0, 13), ("int32", 1, 13),
                                              ("float32", 1, 13), ("float32", 0, 28)])
def test_mod_at_run_time(dtype: str, fmod: int, opset: int) -> None:
    m = one_node("Mod", {"a": (dtype, [6]), "b": (dtype, [6])}, {"y": dtype}, fmod=fmod,
                 opset=opset)
    a = np.array([7, -7, 7, -7, 5, 0], dtype)
    b = np.array([3, 3, -3, -3, 2, 4], dtype)
    check(m, {"a": a, "b": b})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(direction: str) -> None:
    m = one_node("BitShift", {"a": ("uint8", [4]), "b": ("uint8", [4])}, {"y": "uint8"},
                 direction=direction)
    check(m, {"a": np.array([16, 4, 1, 255], np.uint8), "b": np.array([1, 2, 3, 7], np.uint8)})


@pytest.mark.parametrize("equation,shapes", [("ij,jk->ik", [[2, 3], [3, 4]]),
                                             ("...ii->...i", [[2, 3, 3]]),
                                             ("bij,bjk->bik", [[2, 2, 3], [2, 3, 2]]),
                                             ("i,i", [[5], [5]])])
def test_einsum(equation: str, shapes: list[list[int]]) -> None:
    inputs = {f"x{i}": ("float32", s) for i, s in enumerate(shapes)}
    m = one_node("Einsum", inputs, ["y"], equation=equation)
    check(m, {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)})


@pytest.mark.parametrize("mode,transform", [("nearest", "asymmetric"),
                                            ("linear", "half_pixel"),
                                            ("cubic", "align_corners")])
def test_resize(mode: str, transform: str) -> None:
    m = one_node("Resize", {"x": ("float32", [1, 2, 4, 5])}, ["y"],
                 {"roi": np.zeros(0, np.float32),
                  "scales": np.array([1, 1, 1.5, 0.8], np.float32)},
                 mode=mode, coordinate_transformation_mode=transform)
    check(m, {"x": rand(1, 2, 4, 5)})


@pytest.mark.parametrize("mode,padding", [
    (m, p) for m in ("bilinear", "nearest", "bicubic")
    for p in ("zeros", "border", "reflection")
    # bicubic + border: onnxruntime clamps each tap, ONNX's reference (which tensorsmith
    # follows) first clamps the coordinate; they differ near the border
    if (m, p) != ("bicubic", "border")])
def test_grid_sample(mode: str, padding: str) -> None:
    m = one_node("GridSample", {"x": ("float32", [1, 2, 3, 4]), "g": ("float32", [1, 2, 3, 2])},
                 ["y"], mode=mode, padding_mode=padding, opset=16)
    check(m, {"x": rand(1, 2, 3, 4), "g": rand(1, 2, 3, 2, low=-1.3, high=1.3, seed=1)})


def test_dft_real_input() -> None:
    m = one_node("DFT", {"x": ("float32", [2, 8, 1])}, ["y"], axis=1, opset=17)
    check(m, {"x": rand(2, 8, 1)}, atol=1e-4)


def test_det() -> None:
    m = one_node("Det", {"x": ("float32", [4, 3, 3])}, ["y"])
    check(m, {"x": rand(4, 3, 3)}, atol=1e-4)


def test_uint32_arithmetic() -> None:
    m = one_node("Add", {"a": ("uint32", [3]), "b": ("uint32", [3])}, {"y": "uint32"})
    check(m, {"a": np.array([1, 2, 4_000_000_000], np.uint32),
              "b": np.array([3, 4, 5], np.uint32)})


def test_quantize_dequantize_round_trip() -> None:
    m = one_node("QuantizeLinear", {"x": ("float32", [6])}, {"y": "uint8"},
                 {"s": np.float32(0.5), "z": np.uint8(10)}, opset=13)
    check(m, {"x": np.array([-5.2, -1.25, 0, 1.25, 2.5, 200], np.float32)})


