"""Build side of the runtime-only check (nox -s runtime_only).

Usage: python tests/runtime_only/make_artifacts.py OUTDIR

With the full compiler installed: compiles examples/mlp.onnx for llvm into
OUTDIR/mlp.so and for vulkan into OUTDIR/mlp-vulkan.tsm, and writes
OUTDIR/inputs.npz (a seeded random input) and OUTDIR/expected.npz (ONNX Runtime's
outputs for it), keyed by graph input and output names. check_runtime_only.py then
runs the artifacts where only tensorsmith-runtime is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "mlp.onnx"
BATCH = 2


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)

    mod, params = from_onnx(str(MODEL), {"input": (BATCH, 784)})
    artifact = outdir / "mlp.so"
    build(mod, target="llvm", params=params).export_library(str(artifact))
    # The same model for Vulkan, run by the runtime with its `vulkan` extra alone.
    build(mod, target="vulkan", params=params).export_library(str(outdir / "mlp-vulkan.tsm"))

    x = np.random.default_rng(0).standard_normal((BATCH, 784)).astype(np.float32)
    session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = session.run(names, {"input": x})
    np.savez(outdir / "inputs.npz", input=x)
    np.savez(outdir / "expected.npz", **dict(zip(names, expected)))
    print(f"wrote {artifact} ({artifact.stat().st_size:,} bytes), inputs.npz, expected.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
