"""bench/quantized_steps.py's bookkeeping: which output elements of a convolution read a
differing input (a difference there is not *fresh*), and its exact float64 value at an
element, against brute force and ONNX's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from bench.quantized_steps import _conv_windows, _exact


def _conv(group: int, pads: list[int], strides: list[int], dilations: list[int]
          ) -> helper.NodeProto:
    return helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, pads=pads,
                            strides=strides, dilations=dilations)


CASES = [(1, [1, 1, 1, 1], [1, 1], [1, 1]), (4, [1, 0, 2, 1], [2, 1], [1, 1]),
         (1, [0, 0, 0, 0], [2, 2], [2, 1])]


@pytest.mark.parametrize(("group", "pads", "strides", "dilations"), CASES)
def test_conv_windows_are_the_elements_that_read_a_marked_input(
        group: int, pads: list[int], strides: list[int], dilations: list[int]) -> None:
    node = _conv(group, pads, strides, dilations)
    g = np.random.default_rng(1)
    x = g.standard_normal((1, 4, 9, 8))
    w = g.standard_normal((4, 4 // group, 3, 3))
    b = np.zeros(4)
    inputs = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, None) for n in "xwb"]
    output = helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)
    run = ReferenceEvaluator(helper.make_graph([node], "c", inputs, [output]),
                             opsets={"": 17})
    base = run.run(None, {"x": x, "w": w, "b": b})[0]
    mask = np.zeros(x.shape, bool)
    mask[0, 2, 4, 3] = True
    # brute force: the outputs that move when the marked input moves
    moved = run.run(None, {"x": x + mask * 1.0, "w": w, "b": b})[0]
    want = moved != base
    got = _conv_windows(node, mask, base.shape, w)
    assert np.array_equal(got, want)
    where = np.argwhere(np.ones(base.shape, bool))
    exact = _exact(node, [x, w, b], base.shape, where)
    assert exact is not None
    np.testing.assert_allclose(exact, base.reshape(-1), rtol=1e-12, atol=1e-12)
