"""The pass manager: runs graph passes by opt level, timing each and dumping IR on request."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..graph import Graph
from .integer_products import IntegerProducts

GraphPass = Callable[[Graph], Graph]


@dataclass
class PassManager:
    """Runs passes whose ``min_level`` is at most ``opt_level``.

    ``timings`` collects (name, seconds) per pass; ``dump`` (a callable taking the pass
    name and the graph text) sees the IR after each pass.
    """

    opt_level: int = 2
    passes: list[tuple[str, int, GraphPass]] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)
    dump: Callable[[str, str], None] | None = None

    def add(self, name: str, fn: GraphPass, min_level: int = 0) -> PassManager:
        self.passes.append((name, min_level, fn))
        return self

    def run(self, graph: Graph) -> Graph:
        for name, level, fn in self.passes:
            if level > self.opt_level:
                continue
            start = time.perf_counter()
            graph = fn(graph)
            self.timings.append((name, time.perf_counter() - start))
            if self.dump is not None:
                self.dump(name, str(graph))
        return graph


def default_pipeline(opt_level: int = 2, integers: IntegerProducts | None = None
                     ) -> PassManager:
    """The graph passes by opt level; ``integers`` says which products the target
    computes in integers (passes/integer_products.py; None: none)."""
    from .cse import eliminate_common_subexpressions
    from .dce import eliminate_dead_code
    from .fold_constants import fold_constants
    from .integer_products import integer_products
    from .merge_matmuls import merge_parallel_matmuls
    from .simplify import simplify_graph

    pm = PassManager(opt_level)
    if integers is not None:
        # before folding, which would multiply int8 weights by their scales into float32
        pm.add("integer_products", lambda g: integer_products(g, integers), 1)
    pm.add("fold_constants", fold_constants, 1)
    pm.add("simplify", simplify_graph, 2)
    pm.add("fold_constants", fold_constants, 2)
    pm.add("merge_parallel_matmuls", merge_parallel_matmuls, 2)
    pm.add("eliminate_common_subexpressions", eliminate_common_subexpressions, 2)
    pm.add("eliminate_dead_code", eliminate_dead_code, 0)
    return pm
