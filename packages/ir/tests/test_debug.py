"""tensorsmith.ir.debug.expose: intermediates as extra outputs, the original untouched."""

from __future__ import annotations

import numpy as np

from tensorsmith.ir import GraphBuilder, run_graph
from tensorsmith.ir.debug import expose


def graph():
    b = GraphBuilder()
    x = b.input("x", (2, 3), "float32")
    w = b.constant("w", np.full((2, 3), 2.0, np.float32))
    (m,) = b.add("mul", [x, w], name="scale", out_names=["scaled"])
    (r,) = b.add("relu", [m], name="act", out_names=["activated"])
    (y,) = b.add("add", [r, x], name="skip", out_names=["y"])
    return b.finish([y])


def test_expose_appends_values_in_the_order_asked() -> None:
    g = graph()
    exposed = expose(g, ["activated", "scaled", "no_such_value", "x", "y", "scaled"])
    assert exposed.num_original == 1
    assert exposed.names == ["activated", "scaled", "y"]  # inputs and repeats skipped
    assert exposed.missing == ["no_such_value"]
    assert [v.name for v in exposed.graph.outputs] == ["y", "activated", "scaled", "y"]
    assert [v.name for v in g.outputs] == ["y"] and len(g.nodes) == 3  # original unchanged
    exposed.graph.verify()

    x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
    y, act, scaled, y_again = run_graph(exposed.graph, {"x": x})
    assert np.array_equal(scaled, x * 2) and np.array_equal(act, np.maximum(x * 2, 0))
    assert np.array_equal(y, y_again) and np.array_equal(y, run_graph(g, {"x": x})[0])


def test_constants_only_on_request() -> None:
    g = graph()
    assert expose(g, ["w"]).missing == ["w"]
    exposed = expose(g, ["w"], constants=True)
    assert exposed.names == ["w"] and exposed.graph.outputs[1].is_constant
