"""The node cases of the installed onnx, named and attributed to the operator they test.

onnx >= 1.23 ships no test data files: ``onnx.backend.test.loader`` builds the cases in
memory (about 10 s), so this module loads them once per process. Every single-op case
has one node; an ``*_expanded`` case (the op's function body inlined into primitive
ops) counts for the operator of the case it expands, as ONNX's own reports do.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass(frozen=True)
class NodeCase:
    """One node test case: its model, first data set and tolerances."""

    name: str  # "test_abs", as onnx names it (pytest ids add "_cpu")
    op: str  # "Abs", "ai.onnx.ml.LabelEncoder"
    expanded: bool
    model: onnx.ModelProto
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    rtol: float
    atol: float


def qualified_op(node: onnx.NodeProto) -> str:
    domain = node.domain if node.domain not in ("", "ai.onnx") else ""
    return f"{domain}.{node.op_type}" if domain else node.op_type


def _array(tensor: Any) -> Any:
    """Some cases hold TensorProtos: the runner converts them too (``_normalize_tensor``)."""
    return onnx.numpy_helper.to_array(tensor) if isinstance(tensor, onnx.TensorProto) else tensor


@functools.cache
def load_cases() -> dict[str, NodeCase]:
    """All node cases with data, by name, in onnx's order."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = [c for c in load_model_tests(kind="node") if c.data_sets]
    base_op = {c.name: qualified_op(c.model.graph.node[0]) for c in raw
               if not _EXPANDED.search(c.name) and len(c.model.graph.node) == 1}
    cases: dict[str, NodeCase] = {}
    for c in raw:
        base = _EXPANDED.sub("", c.name)
        op = base_op.get(base) or qualified_op(c.model.graph.node[-1])
        inputs, outputs = c.data_sets[0]
        cases[c.name] = NodeCase(c.name, op, base != c.name, c.model,
                                 tuple(_array(t) for t in inputs),
                                 tuple(_array(t) for t in outputs), float(c.rtol), float(c.atol))
    return cases
