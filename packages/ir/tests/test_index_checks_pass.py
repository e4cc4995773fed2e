"""passes/index_checks.py: each indexing node with run-time indices gains a flag that the
executors test after a run (the text form shows it as a ``check`` line, and parses back),
and constant indices are checked once, at compile time."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, parse_graph
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.passes import fuse_ops
from tensorsmith.ir.passes.index_checks import add_index_checks


def gather_graph(indices: np.ndarray | None = None, dtype: str = "int64"):
    b = GraphBuilder()
    table = b.constant("table", np.zeros((10, 4), np.float32))
    ids = b.input("ids", (3,), dtype) if indices is None else b.constant("ids", indices)
    y = b.add1("gather", [table, ids], {"axis": 0}, name="lookup")
    return b.finish([y])


MESSAGE = ("node 'lookup' (gather): an index in 'ids' is out of range (ONNX allows [-10, 9] "
           "for axis 0 of 'table' float32[10, 4]); check the values given to the model "
           "(--no-index-checks, or build(index_checks=False), leaves this check out)")
CHECK = "%lookup_index_check"


def test_run_time_indices_gain_a_check() -> None:
    g = gather_graph()
    assert str(g) == (
        "graph main(%ids: int64[3]) {\n"
        "  %table: float32[10, 4] = const <elided>\n"
        '  %lookup_0: float32[3, 4] = gather(%table, %ids) {"axis": 0}  # lookup\n'
        "  return %lookup_0\n}\n")
    after = str(add_index_checks(g))
    assert after == (
        "graph main(%ids: int64[3]) {\n"
        "  %table: float32[10, 4] = const <elided>\n"
        f"  {CHECK}_lowest: int64[] = const -10\n"
        f"  {CHECK}_end: int64[] = const 10\n"
        '  %lookup_0: float32[3, 4] = gather(%table, %ids) {"axis": 0}  # lookup\n'
        f"  {CHECK}_below: bool[3] = lt(%ids, {CHECK}_lowest)  # {CHECK[1:]}_below\n"
        f"  {CHECK}_above: bool[3] = ge(%ids, {CHECK}_end)  # {CHECK[1:]}_above\n"
        f"  {CHECK}_outside: bool[3] = or({CHECK}_below, {CHECK}_above)"
        f"  # {CHECK[1:]}_outside\n"
        f'  {CHECK}_int: int32[3] = cast({CHECK}_outside) {{"dtype": "int32"}}'
        f"  # {CHECK[1:]}_int\n"
        f'  {CHECK}_any: int32[] = reduce_max({CHECK}_int) {{"keepdims": false}}'
        f"  # {CHECK[1:]}_any\n"
        f'  check {CHECK}_any "{MESSAGE}"\n'
        "  return %lookup_0\n}\n")
    again = parse_graph(after, {c.name: c.data for c in g.constants()})
    assert str(again) == after and len(again.checks) == 1
    assert str(g.copy()) == after


def test_the_flag_is_a_result_of_its_own_kernel() -> None:
    g = add_index_checks(gather_graph())
    groups = fuse_ops(g)
    flag = g.checks[0].flag
    assert any(flag in grp.outputs for grp in groups)
    assert [n.op for grp in groups for n in grp.nodes].count("reduce_max") == 1


def test_constant_indices_are_checked_at_compile_time() -> None:
    add_index_checks(g := gather_graph(np.array([0, -10, 9])))
    assert g.checks == []
    with pytest.raises(ModelError, match=r"node 'lookup' \(gather\).*\[-10, 9\] for axis 0"):
        add_index_checks(gather_graph(np.array([0, 10, 1])))


def test_int32_indices_into_an_axis_longer_than_their_range_need_no_check() -> None:
    b = GraphBuilder()
    table = b.input("table", (2**31 + 5, 1), "float32")  # shapes only: nothing is allocated
    ids = b.input("ids", (3,), "int32")
    g = b.finish([b.add1("gather", [table, ids], {"axis": 0}, name="lookup")])
    assert add_index_checks(g).checks == []
