"""Device side of the runtime-only check (nox -s runtime_only).

Usage: VENV/bin/python tests/runtime_only/check_runtime_only.py OUTDIR [ARTIFACT DEVICE]

Runs in a fresh virtual environment holding only the tensorsmith-runtime wheel
(with its `vulkan` extra for the Vulkan pass) and numpy. Checks that no part of the
compiler is importable, loads OUTDIR/ARTIFACT (default mlp.so on cpu) with
tensorsmith.runtime, runs it on OUTDIR/inputs.npz and
compares with OUTDIR/expected.npz (ONNX Runtime's outputs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

TOLERANCE = 1e-4
MUST_BE_ABSENT = [
    "onnx",
    "onnxruntime",
    "llvmlite",
    "sklearn",
    "tensorsmith.ir",
    "tensorsmith.frontend",
    "tensorsmith.codegen",
    "tensorsmith.autotune",
    "tensorsmith.cli",
]


def importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def fail(message: str) -> int:
    print(f"runtime-only check: FAIL: {message}")
    return 1


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 2
    outdir = Path(argv[1])
    artifact, device = (argv[2], argv[3]) if len(argv) == 4 else ("mlp.so", "cpu")

    present = [name for name in MUST_BE_ABSENT if importable(name)]
    if present:
        return fail(f"the runtime-only environment can import {', '.join(present)}")

    import tensorsmith.runtime as rt

    module = rt.load(str(outdir / artifact), device=device)

    with np.load(outdir / "inputs.npz") as data:
        feed = {name: data[name] for name in data.files}
    with np.load(outdir / "expected.npz") as data:
        expected = {name: data[name] for name in data.files}

    outputs = module.run(feed)
    names = [o["name"] for o in module.output_info]
    if sorted(names) != sorted(expected):
        return fail(f"artifact outputs {names}, expected {sorted(expected)}")

    worst = 0.0
    for name, got in zip(names, outputs):
        got = np.asarray(got)
        want = expected[name]
        if got.shape != want.shape:
            return fail(f"output {name} has shape {got.shape}, expected {want.shape}")
        worst = max(worst, float(np.max(np.abs(got - want))))

    compiler_prefixes = ("onnx", "llvmlite", "sklearn", "tensorsmith.ir", "tensorsmith.codegen")
    loaded_compiler = [m for m in sys.modules if m.startswith(compiler_prefixes)]
    if loaded_compiler:
        return fail(f"loading and running imported compiler modules: {sorted(loaded_compiler)}")
    if worst > TOLERANCE:
        return fail(f"max abs error {worst:.3g} > {TOLERANCE:g}")

    version = getattr(rt, "__version__", "?")
    print(
        f"runtime-only check: PASS (tensorsmith-runtime {version} alone ran {artifact} on "
        f"{device}; "
        f"max abs error vs onnxruntime {worst:.3g} <= {TOLERANCE:g})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
