"""The conformance record: one JSON file of per-case results, and the Markdown table
(docs/onnx-conformance.md) rendered from it and nothing else.

The JSON is what the test suite checks against (every case it lists as passing must
still pass); the Markdown is for people. Rendering is a pure function of the JSON, so a
test can tell that the two agree without running anything.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .causes import cause
from .scope import REASONS

COMMAND = ("python packages/frontend-onnx/tools/conformance_report.py "
           "--jobs 2  # about 4 minutes on 2 cores")
STRICT = ("ai.onnx.ml", "preview", "random", "image-decode")
"""Exclusions beyond the issue's list (training, sequence/optional/map, string,
float8/bfloat16): the headline also gives the pass rate with these counted as failures."""


@dataclass
class CaseResult:
    op: str
    expanded: bool
    passed: bool
    reason: str = ""
    frozen: list[str] = field(default_factory=list)


@dataclass
class Record:
    onnx: str
    target: str
    total: int
    excluded: dict[str, list[str]]  # reason -> case names
    excluded_ops: dict[str, str]  # case name -> op (for the per-operator table)
    cases: dict[str, CaseResult]  # in-scope cases

    @property
    def passed(self) -> list[str]:
        return [n for n, c in self.cases.items() if c.passed]

    def to_json(self) -> str:
        data = asdict(self)
        data["cases"] = {n: asdict(c) for n, c in sorted(self.cases.items())}
        data["excluded"] = {k: sorted(v) for k, v in sorted(self.excluded.items())}
        data["excluded_ops"] = dict(sorted(self.excluded_ops.items()))
        return json.dumps(data, indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Record:
        data = json.loads(text)
        data["cases"] = {n: CaseResult(**c) for n, c in data["cases"].items()}
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> Record:
        return cls.from_json(Path(path).read_text())


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "n/a"


def render(rec: Record) -> str:
    """docs/onnx-conformance.md."""
    in_scope = len(rec.cases)
    passed = len(rec.passed)
    failed = in_scope - passed
    excluded = sum(len(v) for v in rec.excluded.values())
    expanded = sum(c.expanded for c in rec.cases.values())
    frozen = sorted(n for n, c in rec.cases.items() if c.passed and c.frozen)
    strict_extra = sum(len(rec.excluded.get(r, [])) for r in STRICT)
    lines = [
        f"# ONNX node-test conformance: `{rec.target}` target",
        "",
        "<!-- Generated: do not edit. Regenerate with the command below; "
        "packages/frontend-onnx/tests/test_backend_llvm.py checks that this file matches "
        "packages/frontend-onnx/tests/data/onnx_conformance_llvm.json and that every case "
        "listed as passing still passes. -->",
        "",
        f"ONNX's own backend node tests (onnx {rec.onnx}: `onnx.backend.test`, built in "
        "memory) run through `tensorsmith.frontend.onnx.backend.TensorsmithBackend`: "
        "import, build for `llvm`, export the shared library, load it with "
        "`tensorsmith.runtime`, run, and compare with ONNX's own check (shapes, dtypes, "
        "the case's rtol/atol). Each case runs in a worker process, so a crash or a hang "
        "fails that case only.",
        "",
        "```sh",
        COMMAND,
        "```",
        "",
        "## Headline",
        "",
        f"* Node cases in onnx {rec.onnx}: **{rec.total}**; excluded as out of scope: "
        f"**{excluded}** (below); in scope: **{in_scope}** ({in_scope - expanded} single-op "
        f"+ {expanded} `_expanded`).",
        f"* Passing on `{rec.target}`: **{passed} / {in_scope} = {_pct(passed, in_scope)}** "
        f"of the in-scope cases; failing: {failed} (each with its reason below).",
        f"* Counting also the {strict_extra} cases of the extra exclusions "
        f"({', '.join(STRICT)}) as in scope and failing: {passed} / {in_scope + strict_extra}"
        f" = {_pct(passed, in_scope + strict_extra)}.",
        f"* **Strictly** (every value a case feeds as a graph input read at run time, the "
        f"artifact compiled once without freezing any): **{passed - len(frozen)} / "
        f"{in_scope} = {_pct(passed - len(frozen), in_scope)}**. Operands that decide a "
        "shape (a Reshape's shape, a ReduceSum's axes, TopK's k) become sizes the "
        "runtime computes from the input's values before each run (`size` lines of the "
        "graph, the plan's `computed` list).",
        f"* {len(frozen)} of the passing cases still need such an operand frozen: the "
        "backend compiles them specialized on the given values (the inputs are frozen into "
        "the model, as when freezing parameters). They are listed at the end.",
        "",
        "## Excluded cases",
        "",
        "| reason | cases | what |",
        "|---|---|---|",
    ]
    for reason, what in REASONS.items():
        lines.append(f"| {reason} | {len(rec.excluded.get(reason, []))} | {what} |")
    lines += [f"| **total** | **{excluded}** | |", "", "## Per operator", "",
              "`_expanded` cases count for the operator they expand.", "",
              "| operator | in scope | passed | failed | excluded |", "|---|---|---|---|---|"]
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    for c in rec.cases.values():
        per_op[c.op]["in"] += 1
        per_op[c.op]["passed" if c.passed else "failed"] += 1
    for op in rec.excluded_ops.values():
        per_op[op]["excluded"] += 1
    for op in sorted(per_op, key=str.lower):
        n = per_op[op]
        lines.append(f"| {op} | {n['in']} | {n['passed']} | {n['failed']} | "
                     f"{n['excluded']} |")
    failures = {n: c for n, c in rec.cases.items() if not c.passed}
    by_cause = Counter(cause(n, c.reason) for n, c in failures.items())
    lines += ["", "## Failures by cause", "", "| cause | cases |", "|---|---|"]
    lines += [f"| {why} | {count} |" for why, count in by_cause.most_common()]
    lines += ["", "## Failures", "", "| operator | case | cause | verdict |",
              "|---|---|---|---|"]
    for name, c in sorted(failures.items(), key=lambda kv: (kv[1].op.lower(), kv[0])):
        reason = c.reason.replace("|", "\\|")
        lines.append(f"| {c.op} | `{name}` | {cause(name, c.reason)} | {reason} |")
    lines += ["", "## Passing with specialized inputs", "",
              "| case | inputs frozen into the model |", "|---|---|"]
    for name in frozen:
        lines.append(f"| `{name}` | {', '.join(rec.cases[name].frozen)} |")
    return "\n".join(lines) + "\n"


def summary(rec: Record) -> dict[str, Any]:
    """Headline numbers (for the report tool's output)."""
    in_scope = len(rec.cases)
    return {"total": rec.total, "excluded": sum(len(v) for v in rec.excluded.values()),
            "in_scope": in_scope, "passed": len(rec.passed),
            "rate": len(rec.passed) / in_scope if in_scope else 0.0}
