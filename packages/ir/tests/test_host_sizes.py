"""Sizes computed on the host from input values (host_sizes.py): the expressions
converters build, the graph's ``size`` lines (text form before and after), the
interpreter computing and refusing them, and the assumption a reshape to such sizes
records for the run to check."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.host_sizes import (
    RunTimeValueError,
    floor,
    host_max,
    input_value,
    lift,
    where,
)
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.symbolic import symbol
from tensorsmith.ir.text import parse_graph, print_graph
from tensorsmith.runtime.shapes import host_expr


def test_expressions_print_as_the_runtime_reads_them() -> None:
    k = input_value("k", 0)
    e = where(k == -1, 7, host_max(k, symbol("batch")) * 2)
    assert e.inputs == frozenset({"k"})
    assert str(e) == "(7 if (value('k', 0) == (-1)) else (max(value('k', 0), (batch)) * 2))"
    for value, want in ((-1, 7), (3, 10), (9, 18)):
        assert host_expr(str(e))({"batch": 5}, lambda n, i, v=value: v) == want
    scaled = floor(input_value("s", 1, is_float=True) * 3)
    assert host_expr(str(scaled))({}, lambda n, i: [0.0, 2.5][i]) == 7
    assert where(True, 1, 2) == 1 and str(lift(-3)) == "(-3)"


def test_a_run_time_value_refuses_a_compile_time_decision() -> None:
    k = input_value("k", 0)
    with pytest.raises(RunTimeValueError, match="input 'k'") as info:
        bool(k == 0)
    assert info.value.inputs == frozenset({"k"})
    with pytest.raises(RunTimeValueError):
        int(k)
    with pytest.raises(TypeError, match="'//' of a float"):
        _ = input_value("s", 0, is_float=True) // 2


def _graph() -> GraphBuilder:
    b = GraphBuilder()
    x = b.input("x", (2, 6), "float32")
    b.input("shape", (2,), "int64")
    rows = b.size(input_value("shape", 0), "rows", "node 'r' (Reshape, opset 14)")
    cols = b.size(input_value("shape", 1), "cols", "node 'r' (Reshape, opset 14)")
    assert b.size(input_value("shape", 0), "again", "elsewhere") is rows  # one per expression
    assert b.size(4, "four", "") == 4
    b.add1("reshape", [x], {"shape": [rows, cols]}, name="r")
    return b


def test_graph_text_keeps_computed_sizes_and_the_reshape_assumption() -> None:
    b = _graph()
    g = b.finish([b.nodes[-1].outputs[0]])
    text = print_graph(g)
    assert "  size rows = value('shape', 0) \"node 'r' (Reshape, opset 14)\"" in text
    assert "assume cols*rows == 12" in text  # the element count: the run checks it
    assert text.index("size rows") < text.index("= reshape(")
    assert print_graph(parse_graph(text)) == text


def test_interpreter_computes_and_refuses_sizes_below_one() -> None:
    b = _graph()
    g = b.finish([b.nodes[-1].outputs[0]])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (got,) = run_graph(g, {"x": x, "shape": np.array([3, 4])})
    np.testing.assert_array_equal(got, x.reshape(3, 4))
    with pytest.raises(ModelError, match=r"node 'r' \(Reshape, opset 14\): the size 'rows' "
                                         r"= value\('shape', 0\) computed from these inputs "
                                         r"is 0"):
        run_graph(g, {"x": x, "shape": np.array([0, 4])})
    with pytest.raises(ModelError, match="rows"):
        run_graph(g, {"x": x, "shape": np.array([5, 4])})  # breaks the element count
