"""Composition check (nox -s compose): the compiler without the optional codegens.

Runs in a fresh virtual environment holding only tensorsmith-runtime,
tensorsmith-ir, tensorsmith-frontend-onnx and tensorsmith-codegen-llvm (+ onnx).
Checks that examples/mlp.onnx compiles and runs for llvm, that llvm is the
one target there (its plug-in's entry point and TARGET record are all that
make it exist), that asking for the vulkan target fails with a message naming
the distribution to install (tensorsmith-codegen-spirv), and that each
installed (non-editable) distribution carries its LICENSE and a py.typed marker.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, build
from tensorsmith.ir.targets import installed_kinds
from tensorsmith.runtime.errors import TensorsmithError

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "mlp.onnx"
BATCH = 3


def importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def fail(message: str) -> int:
    print(f"compose check: FAIL: {message}")
    return 1


#: The distributions installed here and the subpackage each ships.
INSTALLED = {"tensorsmith-runtime": "tensorsmith/runtime", "tensorsmith-ir": "tensorsmith/ir",
             "tensorsmith-frontend-onnx": "tensorsmith/frontend/onnx",
             "tensorsmith-codegen-llvm": "tensorsmith/codegen/llvm"}


def packaging_problems() -> list[str]:
    """Each distribution's wheel must carry the license text it declares and py.typed."""
    problems = []
    for dist, sub in INSTALLED.items():
        files = {f.as_posix() for f in importlib.metadata.files(dist) or []}
        if not any(f.endswith(".dist-info/licenses/LICENSE") for f in files):
            problems.append(f"{dist} has no LICENSE in its metadata")
        if f"{sub}/py.typed" not in files:
            problems.append(f"{dist} has no {sub}/py.typed")
    return problems


def main() -> int:
    problems = packaging_problems()
    if problems:
        return fail("; ".join(problems))
    present = [
        name
        for name in (
            "tensorsmith.codegen.spirv",
            "tensorsmith.codegen.opencl",
            "tensorsmith.autotune",
            "tensorsmith.cli",
            "onnxruntime",
            "sklearn",
        )
        if importable(name)
    ]
    if present:
        return fail(f"the environment is not minimal, it can import {', '.join(present)}")

    if installed_kinds() != ["llvm"]:
        return fail(f"installed targets are {installed_kinds()}, expected only llvm")
    info = Target.parse("llvm").info
    if (info.device, info.distribution) != ("cpu", "tensorsmith-codegen-llvm"):
        return fail(f"the llvm plug-in's record is {info}")

    mod, params = from_onnx(str(MODEL), {"input": (BATCH, 784)})
    lib = build(mod, target="llvm", params=params)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.so"
        lib.export_library(str(path))
        module = rt.load(str(path), device="cpu")
        x = np.random.default_rng(0).standard_normal((BATCH, 784)).astype(np.float32)
        (out,) = module.run({"input": x})
    out = np.asarray(out)
    if out.shape != (BATCH, 10):
        return fail(f"llvm output shape {out.shape}, expected {(BATCH, 10)}")
    if not np.all(np.isfinite(out)):
        return fail("llvm output has non-finite values")
    if not np.allclose(out.sum(axis=-1), 1.0, atol=1e-4):
        return fail(f"softmax rows do not sum to 1: {out.sum(axis=-1)}")
    print(f"compose check: llvm OK, output {out.dtype}{list(out.shape)}")

    mod, params = from_onnx(str(MODEL), {"input": (BATCH, 784)})
    try:
        build(mod, target="vulkan", params=params)
    except TensorsmithError as exc:
        if "tensorsmith-codegen-spirv" not in str(exc):
            return fail(f"vulkan error does not name tensorsmith-codegen-spirv: {exc}")
        print(f"compose check: vulkan without its codegen says: {exc}")
    except Exception as exc:
        return fail(f"vulkan without its codegen raised {exc!r}, not a TensorsmithError")
    else:
        return fail("build(target='vulkan') succeeded without tensorsmith-codegen-spirv")

    print("compose check: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
