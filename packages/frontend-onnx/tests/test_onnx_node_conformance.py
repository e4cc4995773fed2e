"""ONNX's own node test cases (onnx.backend.test), through ``from_onnx`` and the
interpreter, for every case whose operators all have converters.

Node cases feed operands such as Reshape's shape or Slice's bounds as graph inputs;
the compiler needs those at import time, so such inputs are turned into initializers
(what freezing a model's parameters does). A case whose model uses a feature the
frontend refuses by design (a dtype outside the supported set, 3-D pooling, training
mode, opsets below 7) is counted as refused, not failed; every other case must match the
expected outputs within the case's own tolerances. Opsets above 21 are let through here:
the node cases only exist at each operator's newest version.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tensorsmith.frontend.onnx import from_onnx, loader
from tensorsmith.frontend.onnx.registry import canonical_domain, lookup
from tensorsmith.ir.errors import ModelError
from tensorsmith.ir.interpreter import run_graph

pytestmark = pytest.mark.slow

_RUNTIME_ONLY = re.compile(r"but '([^']+)' is only known at run time")
MIN_PASSED = 820  # onnx 1.23.2: 828 pass; a drop means a converter regressed


def _supported(model: onnx.ModelProto) -> bool:
    opsets = {canonical_domain(o.domain): o.version for o in model.opset_import}
    return all(lookup(n.op_type, n.domain, opsets.get(canonical_domain(n.domain), 1))
               for n in model.graph.node)


def _import(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
            ) -> tuple[object, dict[str, np.ndarray]]:
    """Import, freezing inputs the converters need as constants, one at a time."""
    frozen: set[str] = set()
    while True:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        m.graph.initializer.extend(numpy_helper.from_array(feeds[n], n) for n in frozen)
        runtime = {n: v for n, v in feeds.items() if n not in frozen}
        try:
            graph, _ = from_onnx(m, {n: v.shape for n, v in runtime.items()})
            return graph, runtime
        except ModelError as e:
            found = _RUNTIME_ONLY.search(str(e))
            if not found or found.group(1) not in feeds or found.group(1) in frozen:
                raise
            frozen.add(found.group(1))


def _run_case(case: object) -> str:
    model = case.model  # type: ignore[attr-defined]
    inputs, expected = case.data_sets[0]  # type: ignore[attr-defined]
    initialized = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initialized]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs)}
    try:
        graph, runtime = _import(model, feeds)
    except ModelError as e:
        return f"refused: {e}"
    got = run_graph(graph, runtime)
    for g, w in zip(got, expected):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"failed: {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        ok = (np.allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True)  # type: ignore[attr-defined]
              if w.dtype.kind == "f" else np.array_equal(g, w))
        if not ok:
            return "failed: values differ"
    return "passed"


def test_node_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnx.backend.test.loader as cases_loader

    monkeypatch.setattr(loader, "MAX_OPSET", 10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in cases_loader.load_model_tests(kind="node")
                 if c.data_sets and _supported(c.model)]
        with np.errstate(all="ignore"):
            results = {c.name: _run_case(c) for c in cases}
    counts = Counter(r.split(":")[0] for r in results.values())
    failed = {name: r for name, r in results.items() if r.startswith("failed")}
    assert not failed, f"{len(failed)} node cases fail: {failed}"
    assert counts["passed"] >= MIN_PASSED, f"only {counts['passed']} node cases pass ({counts})"
