"""A quotient that is rounded to an integer (a quantize step, ``round(x / s)``) is an
IEEE division; other float divisions keep the fast-math flags (emit.py)."""

from __future__ import annotations

import re

from tensorsmith.codegen.llvm.emit import emit_module
from tensorsmith.ir import GraphBuilder, build


def _fdivs(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if re.search(r"= fdiv\b", line)]


def test_a_rounded_quotient_is_divided_without_fast_math_flags() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 64), "float32")
    s = b.input("s", (), "float32")
    q = b.add1("round", [b.add1("div", [x, s], name="quotient")], name="q")
    r = b.add1("div", [x, b.add1("exp", [s], name="e")], name="ratio")
    compiled = build(b.finish([q, r]), target="llvm")
    text = str(emit_module(compiled.funcs))
    fdivs = _fdivs(text)
    plain = [d for d in fdivs if "arcp" not in d]
    flagged = [d for d in fdivs if "arcp" in d]
    assert plain and all(re.search(r"= fdiv (<\d+ x )?float", d) for d in plain), fdivs
    assert flagged, "the division that is not rounded lost its fast-math flags"
