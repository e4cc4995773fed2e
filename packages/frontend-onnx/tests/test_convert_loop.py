"""Loop, unrolled for a trip count and conditions known at import, against onnxruntime:
loop-carried values with a scan output, an early exit on a condition the body computes
from the iteration number, a loop driven by its condition alone, a zero trip count, and
the refusals (a trip count or a condition known only at run time)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, rand
from onnx import TensorProto, helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.frontend.onnx.context import ConstantRequiredError
from tensorsmith.ir.errors import ModelError


def _vi(name: str, elem: int = TensorProto.FLOAT, shape: list[int] | None = None) -> object:
    return helper.make_tensor_value_info(name, elem, shape)


def _header() -> list[object]:
    return [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, [])]


def _const(name: str, elem: int, value: object) -> object:
    return helper.make_node("Constant", [], [name],
                            value=helper.make_tensor(f"{name}_v", elem, [], [value]))


def counter_body(stop: int | None = None) -> object:
    """(i, c_in, acc) -> (c_out, acc + x * i, acc + x * i): a counter accumulating into a
    carried value, with a scan output; c_out is i + 1 < stop (constant per iteration), or
    the incoming condition."""
    nodes = [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "i_f"], ["xi"]),
             helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
             helper.make_node("Identity", ["acc_out"], ["y"])]
    if stop is None:
        nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        nodes += [_const("one", TensorProto.INT64, 1), _const("stop", TensorProto.INT64, stop),
                  helper.make_node("Add", ["i", "one"], ["next"]),
                  helper.make_node("Less", ["next", "stop"], ["c_out"])]
    return helper.make_graph(
        nodes, "body", [*_header(), _vi("acc_in", shape=[3])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("acc_out", shape=[3]), _vi("y", shape=[3])])


def _loop_model(m: int | None, cond: bool | None, body: object,
                outputs: list[str] | None = None) -> object:
    inits: dict[str, np.ndarray] = {}
    if m is not None:
        inits["M"] = np.array(m, np.int64)
    if cond is not None:
        inits["cond"] = np.array(cond)
    loop = helper.make_node("Loop", ["M" if m is not None else "",
                                     "cond" if cond is not None else "", "init"],
                            outputs or ["final", "ys"], name="loop", body=body)
    return make_model([loop], {"init": ("float32", [3]), "x": ("float32", [3])},
                      outputs or ["final", "ys"], inits=inits)


def _drop_producer(body: object, name: str) -> None:
    index = next(k for k, n in enumerate(body.node) if name in n.output)
    del body.node[index]


FEEDS = {"init": rand(3, seed=1), "x": rand(3, seed=2)}


def test_counter_with_carried_state_and_scan_output():
    graph = check(_loop_model(4, True, counter_body()), FEEDS)
    assert graph.outputs[1].shape == (4, 3)


def test_trip_count_without_cond_still_stops_on_the_body_condition():
    # onnxruntime (and ONNX's reference) stop on the body's condition without a cond input
    graph = check(_loop_model(3, None, counter_body(stop=1)), FEEDS)
    assert graph.outputs[1].shape == (1, 3)
    graph = check(_loop_model(3, None, counter_body()), FEEDS)
    assert graph.outputs[1].shape == (3, 3)


def test_neither_trip_count_nor_cond_runs_on_the_body_condition():
    graph = check(_loop_model(None, None, counter_body(stop=2)), FEEDS)
    assert graph.outputs[1].shape == (2, 3)


def test_early_exit_on_a_condition_from_the_iteration_number():
    graph = check(_loop_model(10, True, counter_body(stop=3)), FEEDS)
    assert graph.outputs[1].shape == (3, 3)


def test_condition_alone_without_a_trip_count():
    graph = check(_loop_model(None, True, counter_body(stop=5)), FEEDS)
    assert graph.outputs[1].shape == (5, 3)


def test_zero_trip_count_without_scan_outputs():
    body = counter_body()
    del body.output[2]
    _drop_producer(body, "y")
    for m, cond in [(0, True), (5, False)]:
        check(_loop_model(m, cond, body, ["final"]), FEEDS)


def test_zero_iterations_with_scan_outputs_is_refused():
    with pytest.raises(ModelError, match=r"node 'loop' \(Loop.*no iterations.*1 scan output"):
        from_onnx(_loop_model(0, True, counter_body()))


def test_run_time_trip_count_is_refused():
    loop = helper.make_node("Loop", ["M", "", "init"], ["final", "ys"], name="loop",
                            body=counter_body())
    model = make_model([loop], {"M": ("int64", []), "init": ("float32", [3]),
                                "x": ("float32", [3])}, ["final", "ys"])
    with pytest.raises(ConstantRequiredError, match=r"node 'loop' \(Loop.*trip count M") as e:
        from_onnx(model)
    assert e.value.value_name == "M"


def test_run_time_condition_is_refused():
    body = counter_body()  # continues while max(acc) < limit: known only at run time
    _drop_producer(body, "c_out")
    body.node.extend([helper.make_node("ReduceMax", ["acc_out"], ["top"], keepdims=0),
                      helper.make_node("Less", ["top", "limit"], ["c_out"])])
    loop = helper.make_node("Loop", ["M", "cond", "init"], ["final", "ys"], name="loop",
                            body=body)
    model = make_model([loop], {"init": ("float32", [3]), "x": ("float32", [3])},
                       ["final", "ys"], inits={"M": np.array(4, np.int64),
                                               "cond": np.array(True),
                                               "limit": np.array(5.0, np.float32)})
    with pytest.raises(ModelError, match=r"node 'loop' \(Loop.*condition.*known only at run"):
        from_onnx(model)


def test_too_many_iterations_are_refused():
    for m, cond in [(5000, None), (None, True)]:
        with pytest.raises(ModelError, match=r"more than 4096 iterations.*beyond 4096"):
            from_onnx(_loop_model(m, cond, counter_body()))
