"""Channel-blocked activations (ir/passes/blocked_layout.py): which ops the pass moves to
``[N, C / b, H, W, b]`` and where it converts back (the IR as text), that the graph
computes the same before and after (the interpreter, several block sizes), and, compiled
for this CPU, results equal to the interpreter's for every blocked window the CPU rules
schedule: dense convolutions from plain and blocked inputs, depthwise ones at strides 1
and 2, pooling, and the ops the layout flows through."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import GraphBuilder, build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.passes.blocked_layout import block_layouts

rng = np.random.default_rng(7)


def weight(b: GraphBuilder, name: str, shape: tuple[int, ...]):  # noqa: ANN201
    return b.constant(name, (rng.standard_normal(shape) * 0.3).astype("float32"))


def mobile_block() -> Graph:
    """A stem from three channels, an inverted residual (expand with SiLU, depthwise stride
    1 and 2, project, residual add), a max pool, a Squeeze-Excite scale and a classifier
    head."""
    b = GraphBuilder()
    x = b.input("x", (1, 3, 12, 12), "float32")
    h = b.add1("conv2d", [x, weight(b, "w_stem", (16, 3, 3, 3))],
               {"pads": [1, 1, 1, 1], "strides": [1, 1]}, name="stem")
    h = b.add1("add", [h, weight(b, "bias", (16, 1, 1))], name="stem_bias")
    h = b.add1("clip", [h], {"min": 0.0, "max": 6.0}, name="stem_act")
    e = b.add1("conv2d", [h, weight(b, "w_exp", (32, 16, 1, 1))], name="expand")
    e = b.add1("mul", [e, b.add1("sigmoid", [e], name="expand_gate")], name="expand_act")
    d = b.add1("conv2d", [e, weight(b, "w_dw", (32, 1, 3, 3))],
               {"pads": [1, 1, 1, 1], "groups": 32}, name="dw")
    p = b.add1("conv2d", [d, weight(b, "w_proj", (16, 32, 1, 1))], name="project")
    r = b.add1("add", [p, h], name="residual")
    s2 = b.add1("conv2d", [r, weight(b, "w_dw2", (16, 1, 3, 3))],
                {"pads": [1, 1, 1, 1], "groups": 16, "strides": [2, 2]}, name="dw_s2")
    m = b.add1("pool2d", [s2], {"mode": "max", "kernel": [3, 3], "pads": [1, 1, 1, 1],
                                "strides": [1, 1]}, name="pool")
    squeeze = b.add1("reduce_mean", [m], {"axes": [2, 3], "keepdims": True}, name="squeeze")
    gate = b.add1("sigmoid", [b.add1("conv2d", [squeeze, weight(b, "w_se", (16, 16, 1, 1))],
                                     name="se")], name="gate")
    scaled = b.add1("mul", [m, gate], name="excite")
    pooled = b.add1("reduce_mean", [scaled], {"axes": [2, 3], "keepdims": True}, name="gap")
    flat = b.add1("reshape", [pooled], {"shape": [1, 16]}, name="flat")
    return b.finish([flat, b.add1("mul", [m, b.constant("half", np.float32(0.5))], name="m2")])


def test_the_layout_flows_from_the_first_convolution_to_the_edges() -> None:
    before = mobile_block()
    names = [v.name for v in before.outputs]
    g = block_layouts(before, 8)
    ops = [(n.name, n.op, len(n.outputs[0].shape)) for n in g.nodes]
    blocked = {name for name, _, rank in ops if rank == 5}
    # every convolution, the ops between them and the pooling windows run blocked
    assert {"stem", "stem_bias", "stem_act", "expand", "expand_gate", "expand_act", "dw",
            "project",
            "residual", "dw_s2", "pool", "squeeze", "se", "gate", "excite", "gap",
            "m2"} <= blocked
    # the stem reads the three-channel image as it is; only the reshape into the
    # classifier and the second output convert back
    assert not any(name.endswith("/to_blocked") for name, _, _ in ops)
    back = [name for name, _, _ in ops if name.endswith("/from_blocked")]
    assert len(back) == 2
    assert [v.shape for v in g.outputs] == [(1, 16), (1, 16, 6, 6)]
    assert [v.name for v in g.outputs] == names  # outputs keep their names


def test_ir_text_of_a_depthwise_layer() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 8, 5, 6), "float32")
    d = b.add1("conv2d", [x, b.constant("w", np.ones((8, 1, 3, 3), "float32"))],
               {"pads": [1, 1, 1, 1], "groups": 8}, name="dw")
    y = b.add1("relu", [d], name="act")
    text = str(block_layouts(b.finish([y]), 4))
    body = [line.strip() for line in text.splitlines()[1:-1] if "const" not in line]
    d, y = d.name, y.name
    assert body == [
        '%x_reshaped: float32[1, 2, 4, 5, 6] = reshape(%x) {"shape": [1, 2, 4, 5, 6]}'
        '  # x/reshape',
        '%x_blocked: float32[1, 2, 5, 6, 4] = transpose(%x_reshaped) '
        '{"perm": [0, 1, 3, 4, 2]}  # x/to_blocked',
        f'%{d}_blocked: float32[1, 2, 5, 6, 4] = conv2d(%x_blocked, %w) {{"block": 4, '
        '"groups": 8, "pads": [1, 1, 1, 1]}  # dw',
        f'%{y}_blocked: float32[1, 2, 5, 6, 4] = relu(%{d}_blocked)  # act',
        f'%{y}_unblocking: float32[1, 2, 4, 5, 6] = transpose(%{y}_blocked) '
        f'{{"perm": [0, 1, 4, 2, 3]}}  # {y}/from_blocked',
        f'%{y}: float32[1, 8, 5, 6] = reshape(%{y}_unblocking) '
        f'{{"shape": [1, 8, 5, 6]}}  # {y}/from_blocked_reshape',
        f'return %{y}',
    ], text


def test_what_stays_nchw() -> None:
    """Output channels that are not whole blocks, a grouped (not depthwise) convolution
    and a softmax over channels keep NCHW; nothing converts when no convolution
    qualifies."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 5, 5), "float32")
    odd = b.add1("conv2d", [x, weight(b, "w_odd", (6, 8, 1, 1))], name="odd")
    grouped = b.add1("conv2d", [x, weight(b, "w_g", (8, 4, 3, 3))],
                     {"groups": 2, "pads": [1, 1, 1, 1]}, name="grouped")
    g = b.finish([odd, grouped])
    assert block_layouts(g, 8) is g
    b = GraphBuilder()
    x = b.input("x", (1, 8, 5, 5), "float32")
    c = b.add1("conv2d", [x, weight(b, "w", (8, 8, 1, 1))], name="conv")
    s = b.add1("softmax", [c], {"axis": 1}, name="sm")
    out = block_layouts(b.finish([s]), 8)
    assert [n.op for n in out.nodes] == ["conv2d", "transpose", "reshape", "softmax"]


def residual_and_concat() -> Graph:
    """Per-channel constants of several ranks, a one-channel map broadcast over the
    channels, a non-constant per-channel operand, Concat of channels, average pooling
    with and without the padding counted, and a grouped convolution (blocked where its
    groups are whole blocks)."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 7, 7), "float32")
    attn = b.input("attn", (1, 1, 7, 7), "float32")
    scale = b.input("scale", (8, 1, 1), "float32")
    a = b.add1("conv2d", [x, weight(b, "wa", (8, 8, 3, 3))], {"pads": [1, 1, 1, 1]}, name="a")
    a = b.add1("mul", [a, weight(b, "bn", (1, 8, 1, 1))], name="bn")
    a = b.add1("add", [a, weight(b, "shift", (8, 1, 1))], name="shift")
    a = b.add1("mul", [a, attn], name="spatial")
    a = b.add1("mul", [a, scale], name="scaled")
    c = b.add1("conv2d", [a, weight(b, "wc", (8, 8, 1, 1))], name="c")
    cat = b.add1("concat", [a, c], {"axis": 1}, name="cat")
    avg = b.add1("pool2d", [cat], {"mode": "avg", "kernel": [3, 3], "pads": [1, 1, 1, 1],
                                   "strides": [2, 2]}, name="avg")
    avg_pad = b.add1("pool2d", [cat], {"mode": "avg", "kernel": [2, 2], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1], "count_include_pad": True},
                     name="avg_pad")
    d = b.add1("conv2d", [avg, weight(b, "wd", (16, 1, 5, 5))],
               {"pads": [2, 2, 2, 2], "groups": 16}, name="dw5")
    grouped = b.add1("conv2d", [cat, weight(b, "wg", (16, 8, 3, 3))],
                     {"pads": [1, 1, 1, 1], "groups": 2}, name="grouped")
    return b.finish([d, avg_pad, b.add1("add", [x, a], name="skip"), grouped])


def inputs_of(g: Graph) -> dict[str, np.ndarray]:
    return {v.name: rng.standard_normal(v.shape).astype("float32") for v in g.inputs}


@pytest.mark.parametrize("make", [mobile_block, residual_and_concat])
@pytest.mark.parametrize("block", [4, 8, 16])
def test_the_interpreter_computes_the_same_blocked(make, block: int) -> None:  # noqa: ANN001
    g = make()
    feeds = inputs_of(g)
    want = run_graph(g, feeds)
    got = run_graph(block_layouts(g.copy(), block), feeds)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [mobile_block, residual_and_concat])
def test_compiled_for_the_cpu_equals_the_interpreter(make, tmp_path: Path) -> None:  # noqa: ANN001
    g = make()
    feeds = inputs_of(g)
    want = run_graph(g, feeds)
    lib = build(g, target="llvm")
    assert any(len(v.shape) == 5 for n in lib.graph.nodes for v in n.outputs)  # it did block
    lib.export_library(tmp_path / "m.so")
    got = rt.load(tmp_path / "m.so", device="cpu", num_threads=2).run(feeds)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-4)


def test_the_target_can_keep_nchw() -> None:
    from tensorsmith.ir.build import fused_groups
    from tensorsmith.ir.errors import TargetError

    _, groups, _ = fused_groups(mobile_block(), target="llvm -layout=nchw")
    assert all(len(v.shape) <= 4 for g in groups for n in g.nodes for v in n.outputs)
    with pytest.raises(TargetError, match=r"unknown layout 'nhwc'.*blocked, nchw"):
        fused_groups(mobile_block(), target="llvm -layout=nhwc")
