"""Convolution layers of the benchmark models, one at a time, tensorsmith vs ONNX Runtime.

    python bench/conv_layers.py                         # every layer below
    python bench/conv_layers.py --layers mb_dw112s2,r_3x3_7 --repeat 100
    python bench/conv_layers.py --in-model --layers r_3x3_56  # input laid out as in a model

Each layer is a Conv (bias folded in, as in the benchmark models) followed by ReLU6 (as
in MobileNetV2), at batch 1. Both engines run it interleaved in one process (see
bench/measure.py); the table gives median (min) ms, GFLOP/s at the min, and ORT / tsm.
Whole-model numbers hide which layer shape is slow; this is what to look at when a
schedule rule changes. On a shared machine compare the min columns.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.layers import conv_bn, relu6  # noqa: E402
from bench.measure import interleaved, relative_error  # noqa: E402
from bench.model_bench import ort_session  # noqa: E402
from bench.onnx_graph import GraphBuilder  # noqa: E402

# name: (input channels, output channels, kernel, stride, groups, input height = width)
LAYERS: dict[str, tuple[int, int, int, int, int, int]] = {
    "mb_stem": (3, 32, 3, 2, 1, 224),
    "mb_dw112": (32, 32, 3, 1, 32, 112),
    "mb_dw112s2": (96, 96, 3, 2, 96, 112),
    "mb_dw56": (144, 144, 3, 1, 144, 56),
    "mb_dw56s2": (144, 144, 3, 2, 144, 56),
    "mb_dw14": (384, 384, 3, 1, 384, 14),
    "mb_dw7": (960, 960, 3, 1, 960, 7),
    "mb_pw112": (16, 96, 1, 1, 1, 112),
    "mb_pw56": (24, 144, 1, 1, 1, 56),
    "mb_pwl56": (144, 24, 1, 1, 1, 56),
    "mb_pw28": (32, 192, 1, 1, 1, 28),
    "mb_pw14": (96, 576, 1, 1, 1, 14),
    "mb_pw7": (320, 1280, 1, 1, 1, 7),
    "r_stem": (3, 64, 7, 2, 1, 224),
    "r_3x3_56": (64, 64, 3, 1, 1, 56),
    "r_3x3_56s2": (64, 128, 3, 2, 1, 56),
    "r_3x3_14": (256, 256, 3, 1, 1, 14),
    "r_3x3_14s2": (256, 512, 3, 2, 1, 14),
    "r_3x3_7": (512, 512, 3, 1, 1, 7),
    "r_1x1_28s2": (256, 512, 1, 2, 1, 28),
    "r50_1x1_56": (256, 64, 1, 1, 1, 56),
    "r50_1x1_28": (512, 128, 1, 1, 1, 28),
    "r50_1x1_28e": (128, 512, 1, 1, 1, 28),
    "r50_1x1_14": (1024, 256, 1, 1, 1, 14),
    "r50_1x1_7": (512, 2048, 1, 1, 1, 7),
}


def layer_model(cin: int, cout: int, kernel: int, stride: int, groups: int, size: int,
                in_model: bool = False) -> tuple[object, int]:
    """The ONNX model of one layer and its multiply-add count x 2. ``in_model`` puts a
    1x1 depthwise layer first, so the layer reads its input in the layout a model gives
    it (channel blocks on a CPU target) instead of the graph input's NCHW."""
    g = GraphBuilder("layer", 17, 0)
    x = g.input("input", [1, cin, size, size])
    if in_model:
        x = conv_bn(g, x, cin, cin, 1, 1, cin, bn=False)
    y = relu6(g, conv_bn(g, x, cin, cout, kernel, stride, groups, bn=False))
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    g.output(y, [1, cout, out, out], name="out")
    flops = 2 * cout * (cin // groups) * kernel * kernel * out * out
    return g.model(f"conv layer {cin}->{cout} k{kernel} s{stride} g{groups} at {size}"), flops


def _conv_kernel_ms(module: object, feeds: dict[str, np.ndarray]) -> float:
    """The layer's own kernel (its step ends in the ReLU6 clip), best of 5 x 20 runs."""
    best = float("inf")
    for _ in range(5):
        for row in module.profile(feeds, repeat=20):  # type: ignore[attr-defined]
            if row["name"].endswith("clip"):
                best = min(best, row["mean_ms"])
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default=",".join(LAYERS), help="comma-separated layer names")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--in-model", action="store_true",
                   help="a 1x1 depthwise layer first (both engines), and a column with "
                        "tensorsmith's convolution kernel alone (min ms of m.profile())")
    args = p.parse_args(argv)

    import tensorsmith.runtime as rt
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import build

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, "
          f"{args.threads} threads")
    print(f"{'layer':12s} | {'tsm ms':>15s} | {'ORT ms':>15s} | tsm GF/s | ORT GF/s | ratio")
    with tempfile.TemporaryDirectory(prefix="tsm-layers-") as tmp:
        for name in args.layers.split(","):
            model, flops = layer_model(*LAYERS[name], in_model=args.in_model)
            cin, size = LAYERS[name][0], LAYERS[name][5]
            feeds = {"input": np.random.default_rng(0).standard_normal(
                (1, cin, size, size)).astype(np.float32)}
            session = ort_session(model, args.threads)  # type: ignore[arg-type]
            mod, params = from_onnx(model, shape={"input": (1, cin, size, size)})
            path = Path(tmp) / f"{name}.so"
            build(mod, target="llvm", params=params).export_library(path)
            module = rt.load(path, device="cpu", num_threads=args.threads)
            err = relative_error(module.run(feeds)[0], session.run(None, feeds)[0])
            tsm, ort = interleaved([lambda m=module, f=feeds: m.run(f),
                                    lambda s=session, f=feeds: s.run(None, f)],
                                   repeat=args.repeat, warmup=5)
            note = "" if err < 1e-4 else f"  WRONG (rel err {err:.1e})"
            if args.in_model:
                note += f"  kernel {_conv_kernel_ms(module, feeds):.3f} ms"
            print(f"{name:12s} | {tsm.median_ms:7.3f} ({tsm.min_ms:5.3f}) | "
                  f"{ort.median_ms:7.3f} ({ort.min_ms:5.3f}) | {flops / tsm.min_ms / 1e6:8.1f} | "
                  f"{flops / ort.min_ms / 1e6:8.1f} | {ort.median_ms / tsm.median_ms:5.2f}{note}",
                  flush=True)
            module.close()
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
