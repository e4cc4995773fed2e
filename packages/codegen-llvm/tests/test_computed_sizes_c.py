"""Computed sizes (ir/host_sizes.py) as plan.c computes them: every expression the
language has, compiled by plan_c's generator and run as C, gives what the Python runtimes
compute (runtime/shapes.host_expr) for the same input values, including floor division
of negatives, float arithmetic read from float inputs, and overflow (refused by both)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tensorsmith.codegen.llvm.link import csrc_dir
from tensorsmith.codegen.llvm.plan_c import computed_source
from tensorsmith.runtime.plan import ComputedSize, Plan, Tensor
from tensorsmith.runtime.shapes import host_expr

INPUTS = {"k": np.array([-7, 3, 0, 5], np.int64), "s": np.array([1.5, -2.25], np.float32),
          "n": np.array([4], np.int32)}
EXPRESSIONS = [
    "value('k', 0) // value('k', 1)",  # -7 // 3 = -3: toward minus infinity
    "value('k', 0) % value('k', 1)",
    "floor(value('s', 0) * batch)",
    "ceil(value('s', 1) * 3)",
    "(value('k', 3) if value('k', 2) == 0 else 9) + batch",
    "max(value('n', 0), batch) - min(value('k', 1), 2)",
    "floor(value('k', 3) / 2)",
    "(value('k', 0) < 0) + (value('s', 1) <= -2.25) * 10",
    "-value('k', 0) * 1000000",
    "value('k', 1) * 4611686018427387904",  # 3 * 2**62 leaves int64: refused
]


def _cc() -> str:
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.fail("no C compiler (cc or gcc): install gcc")
    return found


def _python(text: str, batch: int) -> int | None:
    value = host_expr(text)({"batch": batch}, lambda n, k: INPUTS[n][k].item())
    return int(value) if -(2**63) <= value < 2**63 else None


def test_plan_c_computes_what_the_runtime_computes(tmp_path: Path) -> None:
    inputs = tuple(Tensor(n, tuple(a.shape), str(a.dtype), i) for i, (n, a) in
                   enumerate(INPUTS.items()))
    names = [f"c{j}" for j in range(len(EXPRESSIONS))]
    plan = Plan(symbols=("batch", *names), inputs=inputs,
                computed=tuple(ComputedSize(n, e, "node") for n, e in zip(names, EXPRESSIONS)))
    index = {"batch": 0, **{n: j + 1 for j, n in enumerate(names)}}
    source = "\n".join(computed_source(plan, index))
    # one function per expression, so a refused one does not hide the next
    arrays = "\n".join(
        f"static const {ctype} in{i}[] = {{{', '.join(repr(v.item()) for v in a)}}};"
        for i, (a, ctype) in enumerate(zip(INPUTS.values(), ("int64_t", "float", "int32_t"))))
    main = ["int main(void) {", "  const void *in[] = {in0, in1, in2};",
            "  int64_t s[16] = {5};"]
    for j, line in enumerate(_assignments(source)):
        main += ["  { int flag = 0; int *bad = &flag;", f"    {line.strip()}",
                 f'    if (flag) printf("bad\\n"); '
                 f'else printf("%lld\\n", (long long)s[{j + 1}]); }}']
    main += ["  return 0;", "}"]
    program = tmp_path / "sizes.c"
    program.write_text("#include <stdio.h>\n#include <stdint.h>\n#include \"tsm_plan.h\"\n"
                       + arrays + "\n" + "\n".join(main) + "\n")
    exe = tmp_path / "sizes"
    subprocess.run([_cc(), "-std=c11", "-Wall", "-Werror", "-I", str(csrc_dir()),
                    str(program), "-o", str(exe)], check=True, capture_output=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    want = [_python(e, 5) for e in EXPRESSIONS]
    assert got == ["bad" if w is None else str(w) for w in want]


def _assignments(source: str) -> list[str]:
    """The ``s[k] = ...;`` lines of compute_values, in order."""
    return [ln for ln in source.splitlines() if ln.strip().startswith("s[")]
