"""The execution plan of a graph with symbolic sizes (build._make_plan): the plan's symbols,
the inputs' and outputs' shapes as text, the buffers left to the runtime with their sizes
and lifetimes, one buffer of symbol values per distinct tuple of the kernels' symbols
passed last to their steps, and the errors for a symbol no input gives and for a value
that would live inside a buffer of symbolic size. The kernels are stand-ins (the plan only
reads their names, scratch and attrs), so this does not depend on symbolic lowering."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, ModelError
from tensorsmith.ir.build import _make_plan, fused_groups, plan_symbols
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.passes import View
from tensorsmith.ir.symbolic import symbol
from tensorsmith.ir.target import Target
from tensorsmith.ir.te.stmt import Buffer as TeBuffer
from tensorsmith.ir.te.stmt import PrimFunc, Seq
from tensorsmith.runtime.plan import Plan, Tensor

batch, seq = symbol("batch"), symbol("seq")


def mlp_graph() -> Graph:
    """x[batch, 16] -> relu(x @ w) = h[batch, 8]; outputs h as [batch, 2, 4] (a reshape:
    h's own bytes) and sum(h, axis 1); z[seq] -> z * 2."""
    b = GraphBuilder()
    x = b.input("x", (batch, 16), "float32")
    z = b.input("z", (seq,), "float32")
    h = b.add1("relu", [b.add1("matmul", [x, b.constant("w", np.ones((16, 8), np.float32))])])
    r = b.add1("reshape", [h], {"shape": [-1, 2, 4]})
    s = b.add1("reduce_sum", [h], {"axes": [1], "keepdims": False})
    z2 = b.add1("mul", [z, b.constant("two", np.array(2, np.float32))])
    return b.finish([r, s, z2])


def stub(name: str, group, symbols: tuple[str, ...] = (), scratch: int = 0) -> PrimFunc:  # noqa: ANN001
    """A kernel as the plan sees it: name, parameters (the scratch ones count) and attrs."""
    params = [TeBuffer(f"p{i}", (1,), "float32") for i in range(len(group.inputs)
                                                                  + len(group.outputs))]
    params += [TeBuffer(f"scratch{k}", (16,), "float32") for k in range(scratch)]
    attrs = {"workload": f"w{name}", **({"symbols": symbols} if symbols else {})}
    return PrimFunc(name, params, Seq([]), len(group.inputs), len(group.outputs), attrs)


def plan_of(graph: Graph, symbols: list[tuple[str, ...]], edit_homes=None) -> Plan:  # noqa: ANN001
    """The plan of ``graph``; kernel i uses ``symbols[i]`` (the first one has a scratch
    buffer); ``edit_homes(groups, homes)`` may change where values live."""
    graph, groups, homes = fused_groups(graph, target="llvm")
    if edit_homes is not None:
        homes = edit_homes(groups, homes)
    funcs = [stub(f"tsm_kernel_{i}", g, s, scratch=1 if i == 0 else 0)
             for i, (g, s) in enumerate(zip(groups, symbols, strict=True))]
    plan, _ = _make_plan(graph, groups, funcs, Target.parse("llvm"), homes)
    return plan


def test_the_plan_of_a_symbolic_graph() -> None:
    plan = plan_of(mlp_graph(), [("batch",), ("batch",), ("seq",)])
    assert plan.symbols == ("batch", "seq")
    assert plan.inputs == (Tensor("x", ("batch", 16), "float32", plan.inputs[0].buffer),
                           Tensor("z", ("seq",), "float32", plan.inputs[1].buffer))
    assert [o.shape for o in plan.outputs] == [("batch", 2, 4), ("batch",), ("seq",)]
    b = plan.buffers
    # the reshape's output is h itself, which lives to the end: it is returned
    h = b[plan.outputs[0].buffer]
    assert (h.symbolic_nbytes, h.first_step, h.last_step) == ("32*batch", 0, 3)
    assert (b[plan.inputs[0].buffer].symbolic_nbytes, b[plan.inputs[0].buffer].first_step,
            b[plan.inputs[0].buffer].last_step) == ("64*batch", 0, 3)
    assert (b[plan.outputs[1].buffer].symbolic_nbytes, b[plan.outputs[1].buffer].first_step) \
        == ("4*batch", 1)
    assert all(x.offset == 0 and x.nbytes == 0 for x in b if x.is_symbolic)
    # one static buffer of values per tuple, passed after the buffers and the scratch
    by_symbols = {x.symbols: i for i, x in enumerate(b) if x.symbols}
    assert set(by_symbols) == {("batch",), ("seq",)}
    assert b[by_symbols["batch",]].nbytes == 8 and b[by_symbols["seq",]].kind == "workspace"
    assert [s.args[-1] for s in plan.steps] == [by_symbols["batch",], by_symbols["batch",],
                                                by_symbols["seq",]]
    scratch = b[plan.steps[0].args[-2]]
    assert (scratch.nbytes, scratch.symbolic_nbytes) == (64, None)  # static, planned as ever
    static = [x for x in b if x.kind == "workspace" and not x.is_symbolic]
    assert all(x.offset + x.nbytes <= plan.workspace_bytes for x in static)
    assert len({x.offset for x in static}) == len(static)  # symbol buffers are pinned
    # written and read back as JSON unchanged
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.to_json()["buffers"][plan.outputs[0].buffer] == {
        "kind": "workspace", "offset": 0, "nbytes": 0, "symbolic_nbytes": "32*batch",
        "first_step": 0, "last_step": 3}


def test_a_static_graph_has_a_static_plan() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 16), "float32")
    graph = b.finish([b.add1("relu", [x])])
    plan = plan_of(graph, [()])
    assert plan.symbols == () and "symbols" not in plan.to_json()
    assert not any(x.is_symbolic or x.symbols for x in plan.buffers)
    assert [x.to_json() for x in plan.buffers] == [
        {"kind": "workspace", "offset": 0, "nbytes": 128},
        {"kind": "workspace", "offset": 128, "nbytes": 128},
        {"kind": "workspace", "offset": 256, "nbytes": 64}]


def test_a_symbol_no_input_gives_is_a_model_error() -> None:
    b = GraphBuilder()
    x = b.input("x", (seq + 1, 4), "float32")
    y = b.input("y", (batch,), "float32")
    graph = b.finish([b.add1("relu", [x]), b.add1("relu", [y])])
    with pytest.raises(ModelError, match=r"the size 'seq' is known only at run time, but no "
                                         r"input has it as the size of an axis"):
        plan_symbols(graph)
    with pytest.raises(ModelError, match="'seq'"):
        plan_of(graph, [(), ()])


def test_a_value_inside_a_symbolic_buffer_is_refused() -> None:
    """The runtime places a symbolic buffer whole; a part at an offset has no place."""
    def sum_inside_h(groups, homes):  # noqa: ANN001, ANN202
        h, total = groups[0].outputs[0], groups[1].outputs[0]
        return {**homes, total.uid: View(h, 64)}

    with pytest.raises(ModelError, match=r"'reduce_sum_0' would live inside 'relu_0', whose "
                                         r"size is known only at run time"):
        plan_of(mlp_graph(), [("batch",), ("batch",), ("seq",)], sum_inside_h)
