"""A quotient that is rounded to an integer (a quantize step, ``round(x / s)``) is an
IEEE division; other float divisions keep the fast-math flags (emit.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import tensorsmith.runtime as rt
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


def test_rounded_quotients_are_the_ieee_ones(tmp_path: Path) -> None:
    """``round(x / s)`` compiled equals NumPy's float32 division rounded, bit for bit,
    for 64 divisors ``s`` (one per row, as a quantization scale is one per tensor or
    channel) over a wide range, on values an ulp or two from the ties ``(k + 0.5) s``
    (where a reciprocal's product can round the other way), random values over a wide
    range of magnitudes, and the special ones (infinities, NaN, zeros, subnormals)."""
    g = np.random.default_rng(3)
    rows, n = 64, 1024
    s = (g.choice([-1, 1], rows) * 2.0 ** g.uniform(-60, 60, rows)).astype(np.float32)
    s[:4] = [0.0, np.inf, 3e-39, 0.07932984]
    ties = ((g.integers(-300, 300, (rows, n)) + 0.5) * s[:, None].astype(np.float64))
    ties = ties.astype(np.float32)
    up = np.where(g.random((rows, n)) < 0.5, -np.inf, np.inf).astype(np.float32)
    near = np.nextafter(ties, up)
    wide = (g.standard_normal((rows, n)) * 2.0 ** g.uniform(-100, 100, (rows, n)))
    special = np.tile(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, 1.0],
                               np.float32), (rows, 1))
    x = np.concatenate([ties, near, wide.astype(np.float32), special], axis=1)
    b = GraphBuilder()
    xs, ss = b.input("x", x.shape, "float32"), b.input("s", (rows, 1), "float32")
    q = b.add1("round", [b.add1("div", [xs, ss], name="quotient")], name="q")
    build(b.finish([q]), target="llvm").export_library(tmp_path / "m.so")
    got = rt.load(tmp_path / "m.so", device="cpu").run({"x": x, "s": s[:, None]})[0]
    with np.errstate(all="ignore"):
        want = np.rint(x / s[:, None])
    wrong = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    rows_wrong = np.nonzero(wrong.any(axis=1))[0]
    assert not wrong.any(), (f"{int(wrong.sum())} of {x.size} differ, divisors "
                             f"{s[rows_wrong][:4]}: e.g. {x[wrong][:3]} rounds to "
                             f"{got[wrong][:3]}, not {want[wrong][:3]}")
