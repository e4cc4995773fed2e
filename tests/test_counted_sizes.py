"""Counted sizes (graph.CountedSize): a size that a kernel counts during the run -- the
boxes NonMaxSuppression keeps, the elements NonZero finds -- placed for its bound and
learned after the kernel that counts it, so that the later kernels and the outputs'
shapes use the count. Checked on every target against the graph's interpreter, for
counts from 0 to the bound, from one artifact; a count past its bound is refused in the
same words everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorsmith.runtime as rt
from tensorsmith.ir import build
from tensorsmith.ir.builder import GraphBuilder
from tensorsmith.ir.graph import Graph
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.ir.symbolic import symbol
from tensorsmith.ir.text import parse_graph, print_graph
from tensorsmith.runtime.errors import InputError


def _positives(bound: int, batch: bool = False) -> Graph:
    """y = 2 * x[:count] and s = sum(x[:count]), count = how many of x are positive
    (counted by a reduction, so the kernels before and after it are ordinary ones); with
    ``batch``, x is [batch, 12] and the count is over row 0."""
    b = GraphBuilder("positives")
    x = b.input("x", (symbol("batch"), 12) if batch else (12,), "float32")
    row = b.add1("reshape", [b.add1("slice", [x], {"begin": [0, 0], "end": [1, 12],
                                                  "step": [1, 1]})], {"shape": [12]}) \
        if batch else x
    positive = b.add1("gt", [row, b.constant("zero", np.float32(0))])
    count = b.add1("reduce_sum", [b.add1("cast", [positive], {"dtype": "int64"})],
                   {"axes": [0], "keepdims": False}, name="count")
    n = b.counted_size(b.counted_symbol("found"), count, bound, "node 'count' (test)")
    head = b.add1("slice", [row], {"begin": [0], "end": [n], "step": [1]})
    doubled = b.add1("mul", [head, b.constant("two", np.float32(2))])
    total = b.add1("reduce_sum", [head], {"axes": [0], "keepdims": False})
    return b.finish([doubled, total])


def _compile(graph: Graph, target: str, tmp_path: Path) -> rt.Module:
    path = tmp_path / ("model.so" if target == "llvm" else "model.tsm")
    build(graph, target=target).export_library(path)
    return rt.load(path)


def _with_positives(k: int, seed: int, batch: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.abs(rng.standard_normal((batch or 1, 12)).astype(np.float32)) + 0.5
    x[0, k:] *= -1
    return x if batch else x[0]


def test_the_text_form_keeps_a_counted_size_after_its_count() -> None:
    graph = _positives(12)
    text = print_graph(graph)
    lines = text.splitlines()
    counted = next(i for i, ln in enumerate(lines) if ln.startswith("  counted found = "))
    assert '# count' in lines[counted - 1], "printed right after the node that counts"
    assert "= %count_0 + 1 <= 13" in lines[counted]
    assert "found - 1" in lines[counted + 1]
    assert print_graph(parse_graph(text)) == text


@pytest.mark.parametrize("k", [0, 5, 12, 1])
def test_the_interpreter_learns_the_count(k: int) -> None:
    x = _with_positives(k, seed=k)
    doubled, total = run_graph(_positives(12), {"x": x})
    np.testing.assert_allclose(doubled, 2 * x[:k])
    np.testing.assert_allclose(total, x[:k].sum(), rtol=1e-6)


def test_every_count_from_one_artifact(target: str, tmp_path: Path) -> None:
    graph = _positives(12)
    module = _compile(graph, target, tmp_path)
    for k in (3, 0, 12, 7, 1):
        x = _with_positives(k, seed=k)
        doubled, total = module.run({"x": x})
        want_doubled, want_total = run_graph(graph, {"x": x})
        assert doubled.shape == (k,)
        np.testing.assert_allclose(doubled, want_doubled)
        np.testing.assert_allclose(total, want_total, rtol=1e-6, atol=1e-6)


def test_counts_with_another_size_known_at_run_time(target: str, tmp_path: Path) -> None:
    graph = _positives(12, batch=True)
    module = _compile(graph, target, tmp_path)
    for batch, k in ((2, 4), (5, 11), (1, 0), (2, 9)):
        x = _with_positives(k, seed=batch, batch=batch)
        doubled, _ = module.run({"x": x})
        np.testing.assert_allclose(doubled, 2 * x[0, :k])


def test_a_count_past_its_bound_is_refused_naming_the_node(target: str,
                                                           tmp_path: Path) -> None:
    module = _compile(_positives(4), target, tmp_path)  # a bound the count can break
    with pytest.raises(InputError, match=r"node 'count' \(test\): it counted 9 results, "
                                         r"outside 0\.\.4"):
        module.run({"x": _with_positives(9, seed=0)})
    (doubled, _) = module.run({"x": _with_positives(2, seed=1)})  # and runs again
    assert doubled.shape == (2,)


def test_inspect_lists_the_counted_sizes(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "model.so"
    build(_positives(12), target="llvm").export_library(path)
    shown = subprocess.run([sys.executable, "-m", "tensorsmith.cli.main", "inspect", str(path)],
                           capture_output=True, text=True, check=True).stdout
    assert "counted    1 sizes" in shown, shown
    assert "  found - 1 = the count of node 'count' (test) (step " in shown, shown
    assert "at most 13 - 1" in shown, shown
    assert "symbols    " not in shown, "a counted size is not taken from an input's shape"


def test_a_count_is_an_int64_scalar_a_node_computes() -> None:
    b = GraphBuilder("counts")
    x = b.input("x", (12,), "float32")
    found = b.counted_symbol("found")
    count = b.add1("reduce_sum", [b.add1("cast", [x], {"dtype": "int64"})],
                   {"axes": [0], "keepdims": False})
    with pytest.raises(TypeError, match="a count is an int64 scalar"):
        b.counted_size(found, x, 12, "node 'x'")
    assert str(b.counted_size(found, count, 12, "node 'count'")) == "found - 1"
    assert str(b.counted_symbol("found")) == "found_1", "a counted symbol's name is taken"
