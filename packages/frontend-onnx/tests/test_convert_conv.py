"""Conv, MaxPool and AveragePool (1-D and 2-D) onto conv2d / pool2d."""

from __future__ import annotations

import pytest
from frontend_onnx_testing import check, one_node, rand

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError

CONV = [
    {}, {"strides": [2, 2]}, {"pads": [1, 1, 1, 1]}, {"pads": [0, 1, 2, 0], "strides": [2, 1]},
    {"dilations": [2, 2]}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER"}, {"auto_pad": "VALID"},
]


@pytest.mark.parametrize("attrs", CONV)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(attrs: dict[str, object], bias: bool) -> None:
    inits = {"w": rand(4, 3, 3, 3, seed=1)}
    if bias:
        inits["b"] = rand(4, seed=2)
    m = one_node("Conv", {"x": ("float32", [2, 3, 7, 6])}, ["y"], inits, opset=11, **attrs)
    check(m, {"x": rand(2, 3, 7, 6)})


@pytest.mark.parametrize("group", [2, 4])
def test_grouped_and_depthwise_conv(group: int) -> None:
    m = one_node("Conv", {"x": ("float32", [1, 4, 5, 5])}, ["y"],
                 {"w": rand(4, 4 // group, 3, 3, seed=1), "b": rand(4, seed=2)},
                 group=group, pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    check(m, {"x": rand(1, 4, 5, 5)})


@pytest.mark.parametrize("attrs", [{}, {"strides": [2], "pads": [1, 2]},
                                   {"auto_pad": "SAME_UPPER"}, {"dilations": [2]}])
def test_conv1d(attrs: dict[str, object]) -> None:
    m = one_node("Conv", {"x": ("float32", [2, 3, 9])}, ["y"], {"w": rand(5, 3, 3, seed=1)},
                 **attrs)
    check(m, {"x": rand(2, 3, 9)})


@pytest.mark.parametrize("kernel,x_shape,bias", [([2, 2], [2, 6, 5, 4], True),
                                                 ([3, 2], [1, 6, 4, 5], False),
                                                 ([2], [1, 6, 7], True)])
def test_conv_transpose_with_strides_equal_to_its_kernel(kernel: list[int],
                                                        x_shape: list[int], bias: bool) -> None:
    """Strides equal to the kernel: a 1x1 convolution to one output tile per pixel and a
    depth-to-space transpose, with no zeros spread into the input."""
    inits = {"w": rand(6, 3, *kernel, seed=1)}
    if bias:
        inits["b"] = rand(3, seed=2)
    m = one_node("ConvTranspose", {"x": ("float32", x_shape)}, ["y"], inits, strides=kernel)
    graph = check(m, {"x": rand(*x_shape)})
    assert not [n for n in graph.nodes if n.op == "pad"]
    assert [n.attrs["strides"] for n in graph.nodes if n.op == "conv2d"] == [[1, 1]]


def test_conv3d_is_refused() -> None:
    m = one_node("Conv", {"x": ("float32", [1, 1, 3, 3, 3])}, ["y"],
                 {"w": rand(1, 1, 2, 2, 2)})
    with pytest.raises(ModelError, match=r"node 'n' \(Conv, opset 17\): only 1-D and 2-D Conv"):
        from_onnx(m)


POOL = [
    {"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
]


@pytest.mark.parametrize("attrs", POOL)
def test_max_pool(attrs: dict[str, object]) -> None:
    m = one_node("MaxPool", {"x": ("float32", [2, 3, 7, 6])}, ["y"], **attrs)
    check(m, {"x": rand(2, 3, 7, 6)})


@pytest.mark.parametrize("attrs", POOL)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(attrs: dict[str, object], include_pad: int) -> None:
    m = one_node("AveragePool", {"x": ("float32", [2, 3, 7, 6])}, ["y"],
                 count_include_pad=include_pad, **attrs)
    check(m, {"x": rand(2, 3, 7, 6)})


def test_max_pool_dilated_and_1d() -> None:
    m = one_node("MaxPool", {"x": ("float32", [1, 2, 10])}, ["y"], kernel_shape=[3],
                 dilations=[2], strides=[2])
    check(m, {"x": rand(1, 2, 10)})


def test_max_pool_indices_are_refused() -> None:
    m = one_node("MaxPool", {"x": ("float32", [1, 1, 4, 4])}, {"y": "float32", "i": "int64"},
                 kernel_shape=[2, 2])
    with pytest.raises(ModelError, match=r"output 1 \('i'\) is not supported"):
        from_onnx(m)
