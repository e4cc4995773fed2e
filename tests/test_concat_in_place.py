"""Concat in place (ir/passes/concat_views.py): which Concats become views and where that
puts their inputs, and, compiled for the CPU, results equal to the interpreter's with no
kernel run for them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.build import fused_groups
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.passes import concat_views

rng = np.random.default_rng(5)


def dense_block(layers: int = 3, growth: int = 2) -> Graph:
    """DenseNet's pattern: before each layer, a Concat of every earlier feature map."""
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6), "float32")
    feats = [b.add1("relu", [x], name="stem")]
    for k in range(layers):
        cat = b.add1("concat", feats, {"axis": 1}, name=f"cat{k}") if len(feats) > 1 \
            else feats[0]
        h = b.add1("sigmoid", [cat], name=f"act{k}")
        w = b.constant(f"w{k}", rng.standard_normal((growth, cat.shape[1], 3, 3)).astype(
            "float32"))
        feats.append(b.add1("conv2d", [h, w], {"pads": [1, 1, 1, 1]}, name=f"conv{k}"))
    out = b.add1("concat", feats, {"axis": 1}, name="cat_out")
    return b.finish([b.add1("relu", [out], name="out")])


def _by_name(graph: Graph) -> dict[str, int]:
    return {n.name: n.outputs[0].uid for n in graph.nodes}


def test_every_concat_of_a_dense_block_is_a_prefix_of_the_widest() -> None:
    g = dense_block()
    found = concat_views(g)
    cats = [n for n in g.nodes if n.op == "concat"]
    assert {id(n) for n in cats} == found.nodes
    widest = cats[-1].outputs[0]
    uid = _by_name(g)
    for name, offset_channels in [("stem", 0), ("conv0", 3), ("conv1", 5), ("conv2", 7)]:
        view = found.views[uid[name]]
        assert view.root is widest and view.offset == offset_channels * 36 * 4
    for cat in cats[:-1]:  # the narrower ones start where the stem does
        assert found.views[cat.outputs[0].uid].root is widest
        assert found.views[cat.outputs[0].uid].offset == 0


def test_concats_in_place_run_no_kernel_on_cpu_only() -> None:
    g = dense_block()
    _, cpu_groups, homes = fused_groups(g, target="llvm")
    assert not any(n.op == "concat" for grp in cpu_groups for n in grp.nodes)
    assert len(homes) >= 4
    _, gpu_groups, _ = fused_groups(g, target="vulkan")
    assert sum(n.op == "concat" for grp in gpu_groups for n in grp.nodes) == 3


def test_a_concat_copies_where_an_input_cannot_be_placed() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4), "float32")
    y = b.add1("relu", [x], name="y")
    w = b.constant("w", np.ones((1, 3, 4), "float32"))
    rows = b.input("rows", (2, 3), "float32")
    outs = [
        b.add1("concat", [x, y], {"axis": 1}, name="graph_input"),  # x is the user's buffer
        b.add1("concat", [y, y], {"axis": 1}, name="twice"),
        b.add1("concat", [y, w], {"axis": 1}, name="weight"),
        b.add1("concat", [b.add1("neg", [rows], name="n"), rows], {"axis": 1},
               name="not_contiguous"),  # along axis 1 of a 2-row matrix: interleaved
    ]
    g = b.finish([b.add1("exp", [o], name=f"e{i}") for i, o in enumerate(outs)])
    assert concat_views(g).nodes == set()


def test_a_value_two_concats_want_is_placed_by_one() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4), "float32")
    shared = b.add1("relu", [x], name="shared")
    left = b.add1("concat", [shared, b.add1("neg", [x], name="n")], {"axis": 1}, name="left")
    right = b.add1("concat", [shared, b.add1("exp", [x], name="e")], {"axis": 1}, name="right")
    g = b.finish([b.add1("abs", [left], name="a"), b.add1("abs", [right], name="b")])
    found = concat_views(g)
    assert len(found.nodes) == 1
    assert found.views[shared.uid].root is right  # the later one is visited first


def check(graph, inputs: dict[str, np.ndarray], tmp_path: Path) -> dict:  # noqa: ANN001
    lib = build(graph, target="llvm")
    lib.export_library(tmp_path / "m.so")
    got = rt.load(tmp_path / "m.so", device="cpu").run(inputs)
    for g, w in zip(got, run_graph(graph, inputs), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return json.loads(json.dumps(lib.plan.to_json()))


def test_dense_block_writes_each_feature_once(tmp_path: Path) -> None:
    plan = check(dense_block(layers=4), {"x": rng.standard_normal((1, 3, 6, 6)).astype(
        "float32")}, tmp_path)
    assert not any(name.startswith("cat") for s in plan["steps"] for name in s["nodes"])


def test_unet_skip_and_upsampled_halves_share_the_buffer(tmp_path: Path) -> None:
    """Both halves are single-use: without the view, the Concat would fuse into one of
    their kernels and copy the other."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8), "float32")
    w = b.constant("w", rng.standard_normal((4, 4, 3, 3)).astype("float32"))
    skip = b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="skip")
    up = b.add1("tanh", [x], name="up")
    cat = b.add1("concat", [skip, up], {"axis": 1}, name="cat")
    w2 = b.constant("w2", rng.standard_normal((2, 8, 1, 1)).astype("float32"))
    g = b.finish([b.add1("conv2d", [cat, w2], {}, name="head")])
    plan = check(g, {"x": rng.standard_normal((1, 4, 8, 8)).astype("float32")}, tmp_path)
    assert len(plan["steps"]) == 3


def test_parts_read_elsewhere_and_a_concat_that_is_an_output(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 5, 7), "float32")
    a = b.add1("relu", [x], name="a")
    c = b.add1("sigmoid", [x], name="c")
    cat = b.add1("concat", [a, c], {"axis": 1}, name="cat")
    other = b.add1("concat", [a, b.add1("neg", [x], name="n")], {"axis": 1}, name="other")
    g = b.finish([cat, b.add1("exp", [a], name="reads_a"), b.add1("abs", [other], name="o")])
    check(g, {"x": rng.standard_normal((1, 5, 7)).astype("float32")}, tmp_path)


def test_a_diamond_after_a_concat_in_place_runs_apart(tmp_path: Path) -> None:
    """``c * sigmoid(c)`` of a Concat done in place: the Concat's group runs no kernel,
    so the diamond does not close into it."""
    b = GraphBuilder()
    x = b.input("x", (1, 2, 3, 3), "float32")
    c = b.add1("concat", [b.add1("relu", [x], name="r"), b.add1("neg", [x], name="n")],
               {"axis": 1}, name="cat")
    g = b.finish([b.add1("mul", [c, b.add1("sigmoid", [c], name="gate")], name="silu")])
    plan = check(g, {"x": rng.standard_normal((1, 2, 3, 3)).astype("float32")}, tmp_path)
    assert not any("cat" in s["nodes"] for s in plan["steps"])
