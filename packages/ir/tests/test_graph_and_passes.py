"""Graph IR text form, the interpreter, and each pass run before/after through it."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, ShapeError, parse_graph, run_graph
from tensorsmith.ir.passes import eliminate_dead_code, fold_constants, fuse_ops, plan_memory

rng = np.random.default_rng(1)


def mlp(dead: bool = False):  # noqa: ANN201
    b = GraphBuilder()
    x = b.input("x", (2, 8), "float32")
    w = b.constant("w", rng.standard_normal((4, 8)).astype("float32"))
    wt = b.add1("transpose", [w], {"perm": [1, 0]}, name="wt")  # foldable
    h = b.add1("matmul", [x, wt], name="mm")
    bias = b.constant("bias", np.ones(4, "float32"))
    h = b.add1("add", [h, bias], name="add")
    h = b.add1("relu", [h], name="relu")
    if dead:
        b.add1("exp", [h], name="unused")
    y = b.add1("softmax", [h], {"axis": -1}, name="sm")
    return b.finish([y])


def test_text_round_trip() -> None:
    g = mlp()
    text = str(g)
    consts = {c.name: c.data for c in g.constants()}
    again = parse_graph(text, consts)
    assert str(again) == text
    x = rng.standard_normal((2, 8)).astype("float32")
    np.testing.assert_array_equal(run_graph(g, {"x": x})[0], run_graph(again, {"x": x})[0])


def test_fold_constants_keeps_results() -> None:
    g = mlp()
    x = rng.standard_normal((2, 8)).astype("float32")
    before = run_graph(g, {"x": x})[0]
    folded = fold_constants(g.copy())
    assert "transpose" not in [n.op for n in folded.nodes]
    np.testing.assert_allclose(run_graph(folded, {"x": x})[0], before, rtol=1e-6)


def test_dce_removes_unused() -> None:
    g = mlp(dead=True)
    x = rng.standard_normal((2, 8)).astype("float32")
    before = run_graph(g, {"x": x})[0]
    pruned = eliminate_dead_code(g.copy())
    assert "exp" not in [n.op for n in pruned.nodes]
    np.testing.assert_array_equal(run_graph(pruned, {"x": x})[0], before)


def test_fusion_groups_epilogue_into_matmul() -> None:
    g = fold_constants(mlp())
    groups = fuse_ops(g)
    assert [[n.op for n in grp.nodes] for grp in groups] == [["matmul", "add", "relu"],
                                                              ["softmax"]]
    # Boundaries: the matmul group reads x and two weights, writes one value.
    assert len(groups[0].outputs) == 1 and len(groups[0].inputs) == 3


def test_fusion_keeps_values_with_outside_readers() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    e = b.add1("exp", [x], name="e")
    r = b.add1("relu", [e], name="r")
    g = b.finish([e, r])
    groups = fuse_ops(g)
    assert len(groups) == 2  # e is a graph output, so relu may not swallow it


def test_memory_plan_reuses_dead_buffers() -> None:
    sizes = {"a": 1000, "b": 1000, "c": 1000}
    first = {"a": 0, "b": 1, "c": 2}
    last = {"a": 1, "b": 2, "c": 3}
    plan = plan_memory(sizes, first, last)
    assert plan.offsets["c"] == plan.offsets["a"]  # a is dead once c is written
    assert plan.offsets["b"] != plan.offsets["a"]
    assert plan.workspace_bytes < plan.naive_bytes


def test_shape_error_names_node() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3), "float32")
    w = b.constant("w", np.zeros((4, 5), "float32"))
    with pytest.raises(ShapeError, match=r"node 'fc' \(matmul\).*inner dimensions"):
        b.add1("matmul", [x, w], name="fc")


def _run(g, feeds):  # noqa: ANN001, ANN202
    return run_graph(g, feeds)


def test_cse_merges_identical_nodes() -> None:
    from tensorsmith.ir.passes import eliminate_common_subexpressions

    b = GraphBuilder()
    x = b.input("x", (3,), "float32")
    e1 = b.add1("exp", [x], name="e1")
    e2 = b.add1("exp", [x], name="e2")
    g = b.finish([b.add1("add", [e1, e2], name="s")])
    feeds = {"x": rng.standard_normal(3).astype("float32")}
    before = _run(g, feeds)[0]
    after = eliminate_common_subexpressions(g.copy())
    assert [n.op for n in after.nodes] == ["exp", "add"]
    np.testing.assert_array_equal(_run(after, feeds)[0], before)


def test_cse_stores_equal_constants_once() -> None:
    """Equal contents (an RNN's weights merged again at every unrolled step) become one
    constant, and the products reading them one node; other contents stay apart."""
    from tensorsmith.ir.passes import eliminate_common_subexpressions

    w = rng.standard_normal((4, 6)).astype("float32")
    b = GraphBuilder()
    x = b.input("x", (2, 4), "float32")
    y1 = b.add1("matmul", [x, b.constant("w_step1", w)], name="step1")
    y2 = b.add1("matmul", [x, b.constant("w_step2", w.copy())], name="step2")
    y3 = b.add1("matmul", [x, b.constant("w_other", w + 1)], name="other")
    g = b.finish([b.add1("add", [b.add1("add", [y1, y2], name="s"), y3], name="t")])
    feeds = {"x": rng.standard_normal((2, 4)).astype("float32")}
    before = _run(g, feeds)[0]
    after = eliminate_common_subexpressions(g.copy())
    assert len(after.constants()) == 2
    assert [n.op for n in after.nodes].count("matmul") == 2
    np.testing.assert_array_equal(_run(after, feeds)[0], before)


def _projections(biases: tuple[bool, ...], widths: tuple[int, ...] = (6, 6, 10)):  # noqa: ANN202
    """Three products of one activation (query/key/value style), each with or without a
    constant bias, each read by its own transpose."""
    b = GraphBuilder()
    x = b.input("x", (1, 5, 8), "float32")
    outs = []
    for i, (bias, n) in enumerate(zip(biases, widths)):
        w = b.constant(f"w{i}", rng.standard_normal((8, n)).astype("float32"))
        y = b.add1("matmul", [x, w], name=f"mm{i}")
        if bias:
            y = b.add1("add", [y, b.constant(f"b{i}", rng.standard_normal(n).astype(
                "float32"))], name=f"bias{i}")
        outs.append(b.add1("transpose", [y], {"perm": [0, 2, 1]}, name=f"t{i}"))
    return b.finish(outs)


@pytest.mark.parametrize("biases", [(True, True, True), (False, False, False),
                                    (True, False, True)])
def test_products_of_one_activation_merge_into_one(biases: tuple[bool, ...]) -> None:
    from tensorsmith.ir.passes.merge_matmuls import merge_parallel_matmuls

    g = _projections(biases)
    feeds = {"x": rng.standard_normal((1, 5, 8)).astype("float32")}
    before = _run(g, feeds)
    after = merge_parallel_matmuls(g.copy())
    after.verify()
    ops = [n.op for n in after.nodes]
    assert ops.count("matmul") == 1 and ops.count("slice") == 3
    # biases merge only when every product has one; otherwise each stays on its slice
    assert ops.count("add") == (1 if all(biases) else sum(biases))
    merged = next(n for n in after.nodes if n.op == "matmul")
    assert merged.outputs[0].shape == (1, 5, 22)
    for got, want in zip(_run(after, feeds), before, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    groups = fuse_ops(after)  # the bias rides the product; each slice joins its transpose
    assert sorted(len(gr.nodes) for gr in groups) == sorted(
        [2 if all(biases) else 1] + [3 if b and not all(biases) else 2 for b in biases])


def test_products_of_different_activations_or_weights_stay_apart() -> None:
    from tensorsmith.ir.passes.merge_matmuls import merge_parallel_matmuls

    b = GraphBuilder()
    x = b.input("x", (4, 8), "float32")
    y = b.input("y", (4, 8), "float32")
    v = b.input("v", (8, 3), "float32")
    w = b.constant("w", rng.standard_normal((8, 3)).astype("float32"))
    g = b.finish([b.add1("matmul", [x, w], name="a"), b.add1("matmul", [y, w], name="b"),
                  b.add1("matmul", [x, v], name="c")])
    after = merge_parallel_matmuls(g.copy())
    assert [n.op for n in after.nodes] == ["matmul"] * 3


def test_simplify_collapses_chains_and_folds_channel_scale() -> None:
    from tensorsmith.ir.passes import simplify_graph

    b = GraphBuilder()
    x = b.input("x", (1, 3, 8, 8), "float32")
    w = b.constant("w", rng.standard_normal((4, 3, 3, 3)).astype("float32"))
    y = b.add1("conv2d", [x, w], {"pads": [1, 1, 1, 1]}, name="conv")
    s = b.constant("s", rng.uniform(0.5, 2, (4, 1, 1)).astype("float32"))
    y = b.add1("mul", [y, s], name="bn_scale")
    t = b.constant("t", rng.standard_normal((4, 1, 1)).astype("float32"))
    y = b.add1("add", [y, t], name="bn_shift")
    y = b.add1("transpose", [y], {"perm": [0, 2, 3, 1]}, name="t1")
    y = b.add1("transpose", [y], {"perm": [0, 3, 1, 2]}, name="t2")
    y = b.add1("reshape", [y], {"shape": [1, 4, 64]}, name="r1")
    y = b.add1("reshape", [y], {"shape": [4, 64]}, name="r2")
    g = b.finish([y])
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype("float32")}
    before = _run(g, feeds)[0]
    after = eliminate_dead_code(simplify_graph(g.copy()))
    assert [n.op for n in after.nodes] == ["conv2d", "add", "reshape"]
    np.testing.assert_allclose(_run(after, feeds)[0], before, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("power", "products"), [(3.0, 2), (2.0, 1), (2.5, 0)])
def test_simplify_writes_small_constant_powers_as_products(power: float, products: int) -> None:
    """A float ``pow`` by a constant 2 or 3 (GPT-2's tanh GELU) becomes multiplications of
    its base, which vectorize, where ``pow`` is a libm call per element; another exponent
    stays a ``pow``. The graph's text shows the rewrite; the interpreter, that the values
    agree."""
    from tensorsmith.ir.passes import simplify_graph

    b = GraphBuilder()
    x = b.input("x", (4, 6), "float32")
    e = b.constant("e", np.array(power, "float32"))
    g = b.finish([b.add1("pow", [x, e], name="cube")])
    feeds = {"x": rng.uniform(-3, 3, (4, 6)).astype("float32")}
    before = _run(g, feeds)[0]
    after = eliminate_dead_code(simplify_graph(g.copy()))
    text = str(after)
    assert text.count(" mul(") == products and (" pow(" in text) == (products == 0)
    if products:
        assert "%x, %x" in text  # the square of the base
    np.testing.assert_allclose(_run(after, feeds)[0], before, rtol=1e-6, atol=1e-6)


def test_pass_manager_times_and_dumps() -> None:
    from tensorsmith.ir.passes import default_pipeline

    dumps: list[str] = []
    pm = default_pipeline(2)
    pm.dump = lambda name, text: dumps.append(name)
    pm.run(mlp())
    assert [t[0] for t in pm.timings] == dumps
    assert "fold_constants" in dumps and all(t[1] >= 0 for t in pm.timings)
    low = default_pipeline(0)
    low.run(mlp())
    assert [t[0] for t in low.timings] == ["eliminate_dead_code"]


def test_fused_groups_come_in_dependency_order() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), "float32")
    r = b.add1("relu", [x], name="r")
    n = b.add1("neg", [x], name="n")
    g = b.finish([b.add1("mul", [r, n], name="m")])
    groups = fuse_ops(g)
    produced: set[int] = set()
    for grp in groups:
        assert all(v.uid in produced or v.producer is None for v in grp.inputs)
        produced.update(v.uid for v in grp.outputs)


def test_text_round_trip_keeps_scalars_and_exported_names() -> None:
    b = GraphBuilder()
    x = b.input("onnx::Input_1", (2,), "float32")
    two = b.constant("two", np.float32(2.0))
    g = b.finish([b.add1("mul", [x, two], name="onnx::Mul_3")])
    assert g.constants()[0].shape == ()
    again = parse_graph(str(g))
    assert str(again) == str(g)


def test_a_diamond_closes_into_its_anchor_group() -> None:
    """x * sigmoid(x) after a product is one group (the activation at the product's
    write-back); a diamond whose side reads another input stays apart."""
    b = GraphBuilder()
    x = b.input("x", (4, 8), "float32")
    other = b.input("other", (4, 8), "float32")
    h = b.add1("matmul", [x, b.constant("w", rng.standard_normal((8, 8)).astype("float32"))])
    h = b.add1("add", [h, b.constant("bias", np.ones(8, "float32"))])
    y = b.add1("mul", [h, b.add1("sigmoid", [h], name="gate")], name="silu")
    z = b.add1("mul", [y, b.add1("add", [y, other], name="side")], name="outside")
    g = b.finish([z])
    groups = fuse_ops(g)
    assert [[n.op for n in grp.nodes] for grp in groups] == [
        ["matmul", "add", "sigmoid", "mul"], ["add", "mul"]]
    feeds = {"x": rng.standard_normal((4, 8)).astype("float32"),
             "other": rng.standard_normal((4, 8)).astype("float32")}
    assert np.isfinite(run_graph(g, feeds)[0]).all()


def test_a_diamond_of_two_side_groups_closes_into_the_group_feeding_both() -> None:
    """The tanh GELU, ``(x * 0.5) * (1 + tanh(c * (x + k * x^3)))`` after a product: both
    factors are groups of their own (x has several readers), and the last multiply reads
    only them, not the product. It still joins the product's group, with both sides: one
    kernel. The same diamond on a graph input, which no group produces, stays apart."""
    def gelu(b: GraphBuilder, h):  # noqa: ANN001, ANN202
        def c(name: str, v: float):  # noqa: ANN202
            return b.constant(name, np.array(v, "float32"))
        cube = b.add1("mul", [b.add1("mul", [h, h], name="sq"), h], name="cube")
        inner = b.add1("mul", [b.add1("add", [h, b.add1("mul", [cube, c("k", 0.044715)])]),
                               c("c", 0.79788456)])
        one_plus = b.add1("add", [b.add1("tanh", [inner]), c("one", 1.0)], name="one_plus")
        return b.add1("mul", [b.add1("mul", [h, c("half", 0.5)], name="half_x"), one_plus],
                      name="gelu")

    b = GraphBuilder()
    x = b.input("x", (4, 8), "float32")
    h = b.add1("matmul", [x, b.constant("w", rng.standard_normal((8, 8)).astype("float32"))])
    g = b.finish([gelu(b, h)])
    groups = fuse_ops(g)
    assert len(groups) == 1 and groups[0].nodes[0].op == "matmul"
    assert [n.name for n in groups[0].nodes][-1] == "gelu"

    b = GraphBuilder()
    g = b.finish([gelu(b, b.input("x", (4, 8), "float32"))])
    assert len(fuse_ops(g)) == 2
