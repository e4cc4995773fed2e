"""Run a compiled examples/mlp.onnx artifact and compare it with ONNX Runtime.

Usage: python examples/check_mlp.py ARTIFACT.so [--model examples/mlp.onnx] [--device cpu]

Feeds a seeded random input of the artifact's input shape, prints the max
absolute error against ONNX Runtime (when onnxruntime is installed) and exits 1
when it is above 1e-4.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import tensorsmith.runtime as rt

TOLERANCE = 1e-4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--model", default=str(Path(__file__).with_name("mlp.onnx")))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    module = rt.load(args.artifact, device=args.device)
    rng = np.random.default_rng(args.seed)
    feed = {
        i["name"]: rng.standard_normal(tuple(i["shape"])).astype(i["dtype"])
        for i in module.input_info
    }
    outputs = module.run(feed)
    names = [o["name"] for o in module.output_info]
    for name, value in zip(names, outputs):
        print(f"{name}: {value.dtype}{list(value.shape)} first values {value.reshape(-1)[:5]}")

    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: no comparison (pip install onnxruntime)")
        return 0

    session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    expected = session.run(names, feed)
    for name, got, want in zip(names, outputs, expected):
        if np.shape(got) != np.shape(want):
            print(f"FAIL: output {name} has shape {np.shape(got)}, onnxruntime {np.shape(want)}")
            return 1
    err = max(float(np.max(np.abs(np.asarray(a) - b))) for a, b in zip(outputs, expected))
    verdict = "OK" if err <= TOLERANCE else "FAIL"
    print(f"max abs error vs onnxruntime: {err:.3g} (tolerance {TOLERANCE:g}) {verdict}")
    return 0 if err <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
