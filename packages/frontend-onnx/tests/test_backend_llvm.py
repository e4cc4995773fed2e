"""ONNX's own backend node tests, compiled for the llvm target and run by the runtime.

The record (data/onnx_conformance_llvm.json, written by tools/conformance_report.py and
rendered into docs/onnx-conformance.md) says, per in-scope node case, whether it passes
and why not. Here every in-scope case runs again: a case recorded as passing must pass
(a regression fails CI by name), one recorded as failing is an expected failure (an
XPASS means the record can be regenerated), and the recorded pass rate must stay at or
above MIN_RATE. A case recorded as passing *strictly* (compiled once, the values it
feeds as graph inputs read at run time, none frozen into the model) must stay strict,
and the strict rate must stay at or above MIN_STRICT_RATE. Cases run in a worker
process (conformance.pool.CaseRunner), so a crash or hang fails its case and the session
goes on, with or without pytest-xdist.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx_conformance.cases import load_cases
from onnx_conformance.pool import CaseRunner
from onnx_conformance.scope import exclusion
from onnx_conformance.table import COMMAND, Record, render

pytestmark = pytest.mark.slow

RECORD_PATH = Path(__file__).parent / "data" / "onnx_conformance_llvm.json"
RECORD = Record.load(RECORD_PATH)
MIN_RATE = 0.90
MIN_STRICT_RATE = 0.90
CASE_TIMEOUT = 120.0


def _docs() -> Path | None:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "docs" / "onnx-conformance.md"
        if candidate.is_file():
            return candidate
    return None


def _params() -> Iterator[object]:
    for name, case in sorted(RECORD.cases.items()):
        marks = [] if case.passed else [pytest.mark.xfail(reason=case.reason, strict=False)]
        yield pytest.param(name, id=name, marks=marks)


@pytest.fixture(scope="session")
def case_runner() -> Iterator[CaseRunner]:
    runner = CaseRunner()
    runner.start()
    yield runner
    runner.close()


@pytest.mark.parametrize("name", list(_params()))
def test_node_case(name: str, case_runner: CaseRunner) -> None:
    outcome = case_runner.run(name, timeout=CASE_TIMEOUT)
    assert outcome.passed, f"{name}: {outcome.reason}"
    recorded = RECORD.cases[name]
    if recorded.passed and not recorded.frozen:  # compiled once, values read at run time
        assert not outcome.frozen, (f"{name} passes only specialized on the values of "
                                    f"{', '.join(outcome.frozen)}; it used to read them at "
                                    "run time")


def test_recorded_pass_rate() -> None:
    rate = len(RECORD.passed) / len(RECORD.cases)
    assert rate >= MIN_RATE, (f"{len(RECORD.passed)} of {len(RECORD.cases)} in-scope cases "
                              f"pass ({rate:.1%}), below {MIN_RATE:.0%}")


def test_recorded_strict_pass_rate() -> None:
    """Strictly: each case compiled once, every value it feeds as a graph input read at
    run time (none frozen into the model)."""
    strict = [n for n, c in RECORD.cases.items() if c.passed and not c.frozen]
    rate = len(strict) / len(RECORD.cases)
    assert rate >= MIN_STRICT_RATE, (f"{len(strict)} of {len(RECORD.cases)} in-scope cases "
                                     f"pass strictly ({rate:.1%}), below {MIN_STRICT_RATE:.0%}")


def test_record_matches_this_onnx() -> None:
    """The record covers exactly the in-scope cases of the installed onnx; otherwise it is
    stale (another onnx version, or a changed scope) and must be regenerated."""
    assert onnx.__version__ == RECORD.onnx, (
        f"the record was made with onnx {RECORD.onnx}, this is onnx {onnx.__version__}: "
        f"regenerate it ({COMMAND})")
    cases = load_cases()
    assert len(cases) == RECORD.total
    in_scope = {n for n, c in cases.items() if exclusion(c) is None}
    assert in_scope == set(RECORD.cases), f"regenerate the record ({COMMAND})"
    for reason, names in RECORD.excluded.items():
        assert {exclusion(cases[n]) for n in names} == {reason}


def test_docs_match_record() -> None:
    docs = _docs()
    if docs is None:
        pytest.skip("docs/onnx-conformance.md is not here (not a source checkout)")
    assert docs.read_text() == render(RECORD), (
        f"{docs} differs from what {RECORD_PATH.name} renders to: regenerate both "
        f"({COMMAND})")
