"""Run ONNX's node test cases on the llvm target and write the conformance record.

Writes packages/frontend-onnx/tests/data/onnx_conformance_llvm.json (what the tests
check against) and docs/onnx-conformance.md (rendered from it). Every in-scope case runs
in an isolated worker process; ``--cases REGEX`` reruns only the matching cases and
keeps the other results of the existing record.

    python packages/frontend-onnx/tools/conformance_report.py --jobs 2
    python packages/frontend-onnx/tools/conformance_report.py --cases '^test_resize'
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import onnx

# the harness lives with the frontend's tests (it is not part of the wheel)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from onnx_conformance.cases import load_cases
from onnx_conformance.pool import Outcome, run_isolated
from onnx_conformance.scope import exclusion
from onnx_conformance.table import CaseResult, Record, render, summary

ROOT = Path(__file__).resolve().parents[3]
RECORD = ROOT / "packages/frontend-onnx/tests/data/onnx_conformance_llvm.json"
DOCS = ROOT / "docs/onnx-conformance.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one case may take (default 120)")
    parser.add_argument("--cases", help="only cases whose name matches this regex; the "
                                        "others keep their recorded result")
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)

    cases = load_cases()
    excluded: dict[str, list[str]] = {}
    excluded_ops: dict[str, str] = {}
    in_scope = []
    for name, case in cases.items():
        reason = exclusion(case)
        if reason is None:
            in_scope.append(name)
        else:
            excluded.setdefault(reason, []).append(name)
            excluded_ops[name] = case.op
    old = Record.load(args.record) if args.cases and args.record.exists() else None
    todo = [n for n in in_scope if not args.cases or re.search(args.cases, n)]
    done = [0]

    def progress(o: Outcome) -> None:
        done[0] += 1
        if not o.passed or done[0] % 100 == 0:
            print(f"[{done[0]}/{len(todo)}] {o.name}: "
                  f"{'passed' if o.passed else o.reason}", flush=True)

    start = time.perf_counter()
    outcomes = run_isolated(todo, jobs=args.jobs, timeout=args.timeout, progress=progress)
    wall = time.perf_counter() - start
    results: dict[str, CaseResult] = {}
    for name in in_scope:
        case = cases[name]
        if name in outcomes:
            o = outcomes[name]
            results[name] = CaseResult(case.op, case.expanded, o.passed, o.reason,
                                       list(o.frozen))
        elif old is not None and name in old.cases:
            results[name] = old.cases[name]
        else:
            results[name] = CaseResult(case.op, case.expanded, False, "not run")
    record = Record(onnx=onnx.__version__, target="llvm", total=len(cases), excluded=excluded,
                    excluded_ops=excluded_ops, cases=results)
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(record.to_json())
    args.docs.write_text(render(record))
    s = summary(record)
    print(f"in scope {s['in_scope']}, excluded {s['excluded']}, passed {s['passed']} "
          f"({100 * s['rate']:.1f}%); ran {len(todo)} cases in {wall:.0f} s; wrote "
          f"{args.record} and {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
