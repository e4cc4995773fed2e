"""Debugging helpers: make intermediate values observable in a compiled model.

``build`` compiles what a graph returns and nothing more: intermediates live in planned,
reused workspace memory and are gone after the kernel that reads them last. To find where
a compiled model first goes wrong (``tensorsmith compare``), the intermediates must be
outputs. :func:`expose` returns a copy of a graph that also returns the values asked for,
so the ordinary pipeline compiles them like any output: each gets its own buffer, and
fusion and the simplifications that would erase it (folding a scale into a weight,
merging it into a fused kernel) leave it alone. The copy therefore fuses less than the
original; what it checks is the lowering of each op, not the fusion of the original.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .graph import Graph


@dataclass
class Exposed:
    """A graph that returns extra values: ``graph.outputs`` is the original outputs, then
    the value of each of ``names`` in that order (``names[i]`` is output
    ``num_original + i``). Passes may rename values, so match the outputs by position."""

    graph: Graph
    names: list[str]
    num_original: int
    missing: list[str]


def expose(graph: Graph, names: Iterable[str], *, constants: bool = False) -> Exposed:
    """A copy of ``graph`` that also returns the values called ``names``.

    Names of no value (an ONNX name the frontend passed through without a value of its
    own, a typo) are listed in ``missing``. Graph inputs are never exposed (they are known);
    constants are only with ``constants=True`` (the compiled model then copies them out of
    its weights). The original graph is not changed.
    """
    copy = graph.copy()
    by_name = {v.name: v for n in copy.nodes for v in n.outputs}
    if constants:
        for c in copy.constants():
            by_name.setdefault(c.name, c)
        for n in copy.nodes:
            for v in n.inputs:
                if v.is_constant:
                    by_name.setdefault(v.name, v)
    input_names = {v.name for v in copy.inputs}
    exposed: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()
    num_original = len(copy.outputs)
    for name in names:
        if name in seen or name in input_names:
            continue
        seen.add(name)
        value = by_name.get(name)
        if value is None:
            missing.append(name)
            continue
        copy.outputs.append(value)
        exposed.append(name)
    return Exposed(copy, exposed, num_original, missing)
