"""Scan, unrolled over a sequence length known at import, against onnxruntime: states,
several scan inputs and outputs, reverse directions, scan axes other than 0, opset 8's
batch axis, and the refusals (a sequence length known only at run time, a too long one)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, rand
from onnx import TensorProto, helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.errors import ModelError


def _vi(name: str, shape: list[int] | None = None) -> object:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def cumsum_body(width: int = 3) -> object:
    """state, x -> (state + x, (state + x) * 2)."""
    return helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "two"], ["y_t"])],
        "body", [_vi("s_in", [width]), _vi("x_t", [width])],
        [_vi("s_out", [width]), _vi("y_t", [width])])


def _with_two(nodes: list[object]) -> list[object]:
    two = helper.make_node("Constant", [], ["two"],
                           value=helper.make_tensor("two_v", TensorProto.FLOAT, [], [2.0]))
    return [two, *nodes]


def test_cumulative_sum_with_state():
    scan = helper.make_node("Scan", ["init", "x"], ["final", "ys"], name="scan",
                            body=cumsum_body(), num_scan_inputs=1)
    model = make_model(_with_two([scan]), {"init": ("float32", [3]), "x": ("float32", [5, 3])},
                       ["final", "ys"])
    graph = check(model, {"init": rand(3, seed=1), "x": rand(5, 3, seed=2)})
    assert len({v.name for n in graph.nodes for v in n.outputs}) == sum(
        len(n.outputs) for n in graph.nodes)


def test_two_scan_inputs_reverse_and_two_outputs():
    body = helper.make_graph(
        [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]),
         helper.make_node("Add", ["s_in", "ab"], ["s_out"]),
         helper.make_node("Sub", ["a_t", "b_t"], ["d_t"]),
         helper.make_node("Identity", ["s_out"], ["c_t"])],
        "body", [_vi("s_in", [2]), _vi("a_t", [2]), _vi("b_t", [2])],
        [_vi("s_out", [2]), _vi("c_t", [2]), _vi("d_t", [2])])
    scan = helper.make_node("Scan", ["init", "a", "b"], ["final", "cs", "ds"], name="scan",
                            body=body, num_scan_inputs=2, scan_input_directions=[0, 1],
                            scan_output_directions=[1, 0])
    model = make_model([scan], {"init": ("float32", [2]), "a": ("float32", [4, 2]),
                                "b": ("float32", [4, 2])}, ["final", "cs", "ds"])
    check(model, {"init": rand(2, seed=1), "a": rand(4, 2, seed=2), "b": rand(4, 2, seed=3)})


def test_scan_axes_and_output_axis():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Add", ["s_out", "z_t"], ["y_t"])],
        "body", [_vi("s_in", [2, 3]), _vi("x_t", [2, 3]), _vi("z_t", [2, 3])],
        [_vi("s_out", [2, 3]), _vi("y_t", [2, 3]), _vi("w_t", [2, 3])])
    body.node.append(helper.make_node("Neg", ["x_t"], ["w_t"]))
    scan = helper.make_node("Scan", ["init", "x", "z"], ["final", "ys", "ws"], name="scan",
                            body=body, num_scan_inputs=2, scan_input_axes=[1, -1],
                            scan_output_axes=[1, -1], scan_output_directions=[1, 0])
    model = make_model([scan], {"init": ("float32", [2, 3]), "x": ("float32", [2, 4, 3]),
                                "z": ("float32", [2, 3, 4])}, ["final", "ys", "ws"])
    check(model, {"init": rand(2, 3, seed=1), "x": rand(2, 4, 3, seed=2),
                  "z": rand(2, 3, 4, seed=3)})


def test_body_reads_outer_values_and_no_state():
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "w"], ["y_t"])],
        "body", [_vi("x_t", [3])], [_vi("y_t", [3])])
    scan = helper.make_node("Scan", ["x"], ["ys"], name="scan", body=body, num_scan_inputs=1)
    after = helper.make_node("Add", ["ys", "x"], ["out"])
    model = make_model([scan, after], {"x": ("float32", [4, 3]), "w": ("float32", [3])},
                       ["out"])
    check(model, {"x": rand(4, 3, seed=1), "w": rand(3, seed=2)})


def test_two_scans_share_a_body_shape():
    nodes = [helper.make_node("Scan", ["init", "x"], ["f1", "y1"], name="s1",
                              body=cumsum_body(), num_scan_inputs=1),
             helper.make_node("Scan", ["f1", "y1"], ["f2", "y2"], name="s2",
                              body=cumsum_body(), num_scan_inputs=1,
                              scan_input_directions=[1])]
    model = make_model(_with_two(nodes), {"init": ("float32", [3]),
                                          "x": ("float32", [3, 3])}, ["f2", "y2"])
    check(model, {"init": rand(3, seed=1), "x": rand(3, 3, seed=2)})


def test_opset8_batch_axis():
    scan = helper.make_node("Scan", ["", "init", "x"], ["final", "ys"], name="scan",
                            body=cumsum_body(), num_scan_inputs=1, directions=[1])
    model = make_model(_with_two([scan]), {"init": ("float32", [2, 3]),
                                           "x": ("float32", [2, 4, 3])},
                       ["final", "ys"], opset=8)
    check(model, {"init": rand(2, 3, seed=1), "x": rand(2, 4, 3, seed=2)})


def test_symbolic_sequence_length_is_refused():
    scan = helper.make_node("Scan", ["init", "x"], ["final", "ys"], name="scan",
                            body=cumsum_body(), num_scan_inputs=1)
    model = make_model(_with_two([scan]), {"init": ("float32", [3]),
                                           "x": ("float32", ["seq", 3])}, ["final", "ys"])
    with pytest.raises(ModelError, match=r"node 'scan' \(Scan.*'x' is seq, known only at run"):
        from_onnx(model)
    graph, _ = from_onnx(model, dims={"seq": 2})  # fixed, it unrolls
    assert graph.outputs[1].shape == (2, 3)


def test_too_long_sequence_is_refused():
    scan = helper.make_node("Scan", ["init", "x"], ["final", "ys"], name="scan",
                            body=cumsum_body(), num_scan_inputs=1)
    model = make_model(_with_two([scan]), {"init": ("float32", [3]),
                                           "x": ("float32", [5000, 3])}, ["final", "ys"])
    with pytest.raises(ModelError, match=r"5000 steps.*beyond 4096"):
        from_onnx(model)


def test_wrong_sequence_lens_is_refused():
    scan = helper.make_node("Scan", ["lens", "init", "x"], ["final", "ys"], name="scan",
                            body=cumsum_body(), num_scan_inputs=1)
    model = make_model(_with_two([scan]), {"init": ("float32", [2, 3]),
                                           "x": ("float32", [2, 4, 3])},
                       ["final", "ys"], inits={"lens": np.array([4, 2], np.int64)}, opset=8)
    with pytest.raises(ModelError, match="sequence_lens"):
        from_onnx(model)
