"""Whole models built with each default set of Winograd transforms, next to ONNX Runtime.

    python bench/conv_algorithms.py                        # resnet18 and resnet50
    python bench/conv_algorithms.py --models resnet50 --repeat 60
    python bench/conv_algorithms.py --models path/to/unet.onnx

The CPU's default algorithm for a 3x3 convolution (ir/schedules/cpu_algorithms.py) is
one decision for the whole model; a layer timed alone hides what it does to the layers
around it (caches, the workspace). So each variant is a whole build with
``DEFAULT_TRANSFORMS`` set to: none (the direct loop nest), F(2x2) only, F(4x4) then
F(2x2) (the default). All variants and ONNX Runtime run in one process, in alternating
blocks (bench/measure.py), 2 threads each; the table gives median (min) ms and ORT /
this at the median. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tensorsmith.ir.schedules.cpu_algorithms as algorithms  # noqa: E402
import tensorsmith.runtime as rt  # noqa: E402
from bench.measure import interleaved  # noqa: E402
from bench.model_bench import ort_session  # noqa: E402
from bench.models import MODELS, sample_inputs  # noqa: E402
from tensorsmith.frontend.onnx import from_onnx  # noqa: E402
from tensorsmith.ir import build  # noqa: E402

VARIANTS = {
    "direct": (),
    "F(2x2)": ("winograd_f2_3",),
    "F(4x4)+F(2x2)": ("winograd_f4_3", "winograd_f2_3"),
}


def load(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A bench model by name, or an ONNX file (random float32 inputs, dynamic dims 1)."""
    if not name.endswith(".onnx"):
        model = MODELS[name]()
        return model, sample_inputs(model)
    model = onnx.load(name)
    rng = np.random.default_rng(0)
    inputs = {i.name: rng.standard_normal([d.dim_value or 1 for d in
                                           i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    return model, inputs


def compare(name: str, repeat: int, threads: int, out_dir: str) -> None:
    model, inputs = load(name)
    fns, labels = [], []
    chosen = algorithms.DEFAULT_TRANSFORMS
    try:
        for label, transforms in VARIANTS.items():
            algorithms.DEFAULT_TRANSFORMS = transforms
            mod, params = from_onnx(model)
            path = os.path.join(out_dir, f"{len(fns)}.so")
            build(mod, target="llvm", params=params).export_library(path)
            m = rt.load(path, num_threads=threads)
            fns.append(lambda m=m: m.run(inputs))
            labels.append(label)
    finally:
        algorithms.DEFAULT_TRANSFORMS = chosen
    sess = ort_session(model, threads)
    fns.append(lambda: sess.run(None, inputs))
    labels.append("ONNX Runtime")
    stats = interleaved(fns, repeat)
    ort_median = stats[-1].median_ms
    print(f"\n{Path(name).stem}: median (min) ms, ORT / this")
    for label, s in zip(labels, stats, strict=True):
        ratio = ort_median / s.median_ms
        print(f"  {label:14s} {s.median_ms:8.2f} ({s.min_ms:7.2f})  {ratio:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,resnet50",
                        help="bench model names or .onnx paths, comma-separated")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        for name in args.models.split(","):
            compare(name, args.repeat, args.threads, out_dir)


if __name__ == "__main__":
    main()
