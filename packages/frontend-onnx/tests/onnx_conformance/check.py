"""Run one node case through a backend and say, in one line, whether and why it failed.

The comparison is ONNX's own (``onnx.backend.test.runner.Runner.assert_similar_outputs``:
same output count, shapes, dtypes, then ``assert_allclose`` with the case's tolerances), so
a verdict here is the verdict ``onnx.backend.test.BackendTest`` would give. The one-line
reason names the stage that failed (import, build, run, compare), because that is what
decides which package a fix belongs in.
"""

from __future__ import annotations

import re
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx.backend.base import Backend
from onnx.backend.test.runner import Runner

from .cases import NodeCase

_MAX_REASON = 160
_STAGES = (  # (path fragment of the deepest tensorsmith frame, stage)
    ("/frontend/onnx/backend.py", "backend"),
    ("/frontend/onnx/", "import"),
    ("/codegen/llvm/", "codegen"),
    ("/ir/", "build"),
    ("/runtime/", "run"),
)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str = ""  # one line; empty when passed
    frozen: tuple[str, ...] = ()  # inputs the artifact was specialized on (backend.py)


def run_case(case: NodeCase, backend: type[Backend]) -> Verdict:
    """Prepare, run and compare ``case`` the way ONNX's backend test runner does."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            rep = backend.prepare(case.model, "CPU")
            outputs = rep.run(list(case.inputs))
        frozen = tuple(getattr(rep, "frozen_inputs", ()))
    except NotImplementedError as e:
        return Verdict(False, _one_line(f"not implemented: {e}"))
    except Exception as e:
        return Verdict(False, describe_error(e))
    try:
        Runner.assert_similar_outputs(list(case.outputs), list(outputs), rtol=case.rtol,
                                      atol=case.atol)
    except (AssertionError, TypeError, ValueError) as e:
        return Verdict(False, describe_mismatch(case, outputs, e), frozen)
    return Verdict(True, "", frozen)


def describe_error(e: BaseException) -> str:
    """``stage: Type: first line of the message``, with model-specific names elided."""
    stage = "backend"
    for frame in traceback.extract_tb(e.__traceback__):
        path = frame.filename.replace("\\", "/")
        if "/tensorsmith/" not in path:
            continue
        stage = next((s for fragment, s in _STAGES if fragment in path), stage)
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if type(e).__name__ == "UnsupportedOpError":
        ops = re.search(r"\(([^)]*)\):", text)
        return _one_line(f"unsupported op: {ops.group(1) if ops else text}")
    text = re.sub(r"^<model[^>]*>:?\s*", "", text)
    text = re.sub(r"node '[^']*' \(|node #\d+ \(", "(", text)
    return _one_line(f"{stage}: {type(e).__name__}: {text}")


def describe_mismatch(case: NodeCase, got: Any, e: BaseException) -> str:
    """What differs: output count, shape, dtype, or values (with the largest error)."""
    expected = case.outputs
    got = list(got) if isinstance(got, list | tuple) else [got]
    if len(got) != len(expected):
        return f"compare: {len(got)} outputs, expected {len(expected)}"
    for i, (w, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        w = np.asarray(w)
        if g.shape != w.shape:
            return f"compare: output {i} has shape {list(g.shape)}, expected {list(w.shape)}"
        if g.dtype != w.dtype:
            return f"compare: output {i} is {g.dtype}, expected {w.dtype}"
    for i, (w, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        w = np.asarray(w)
        if w.dtype.kind in "fc":
            bad = ~np.isclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True)
            if bad.any():
                err = np.abs(g.astype(np.float64) - w.astype(np.float64))[bad]
                worst = np.nanmax(err) if np.isfinite(err).any() else float("nan")
                return (f"compare: output {i} values differ ({int(bad.sum())}/{w.size}, "
                        f"max abs err {worst:.3g})")
        elif not np.array_equal(g, w):
            return (f"compare: output {i} values differ "
                    f"({int((g != w).sum())}/{w.size} elements)")
    return _one_line(f"compare: {type(e).__name__}: {e}")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON - 3] + "..."
