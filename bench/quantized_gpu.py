"""Integer or float products for quantized models on a GPU target: what decides
``build._integer_products``'s GPU branch, measured.

    python bench/quantized_gpu.py                          # vulkan (lavapipe here)
    python bench/quantized_gpu.py --target opencl --models mlp

A small conv net (ResNet-18 on 32x32 images, ``--image``; or MobileNetV2,
``--models mobilenetv2``) and an MLP (batch 32, 512 -> 1024 -> 1024
-> 10) are quantized by ``tensorsmith quantize`` (QDQ, int8 per-channel weights, uint8
activations). Each QDQ model is compiled for the GPU target with float products (the
dequantized weights, tiled by the GPU rules), as ``build._integer_products`` decides,
and with every product in integers (``qmatmul``/``qconv2d``); the first and last are
forced by replacing the decision for those builds only. On Vulkan the integer ones also
with ``-integer-dot-product=1`` (four-byte dots as one packed instruction where the bytes
allow it). The float model and
ONNX Runtime's CPU float and int8 runs of the same models are timed in the same
alternating blocks. Each integer variant's largest difference from the first, relative
to its largest logit, is printed: they compute the same quantized model. Writes
bench/results/quantized_gpu_<target>_<models>_<isa>_<date>.txt.

For a GPU host without the compiler or ONNX Runtime, ``--save DIR`` writes the compiled
artifacts, their inputs and what each is (``quantized_gpu.json``) instead of timing
them, and ``--run DIR [--device vulkan]`` times those with the runtime alone (no ONNX
Runtime rows).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import itertools
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tensorsmith.runtime as rt
from bench.measure import interleaved
from bench.models import MODELS, input_shapes
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, build
from tensorsmith.ir.passes.integer_products import IntegerProducts
from tensorsmith.quantize import quantize

RESULTS = Path(__file__).resolve().parent / "results"
FLOAT = "tensorsmith QDQ, float products"


def mlp(batch: int = 32) -> onnx.ModelProto:
    """Gemm + Relu twice, then Gemm: 512 -> 1024 -> 1024 -> 10."""
    rng = np.random.default_rng(3)
    sizes = [512, 1024, 1024, 10]
    inits, nodes, x = [], [], "x"
    for layer, (k, n) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{layer}"),
                  numpy_helper.from_array(np.zeros(n, np.float32), f"b{layer}")]
        out = f"h{layer}"
        nodes.append(helper.make_node("Gemm", [x, f"w{layer}", f"b{layer}"], [out], transB=1))
        if layer < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [out], [f"r{layer}"]))
            out = f"r{layer}"
        x = out
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 512])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


BENCH_MODELS = {"convnet": lambda image: MODELS["resnet18"](opset=17, batch=1, image=image),
                "mobilenetv2": lambda image: MODELS["mobilenetv2"](opset=17, batch=1,
                                                                   image=image),
                "mlp": lambda image: mlp()}
#: What ``--save`` keeps (the others repeat these now that the GPU decision is "every
#: product in integers"): small enough to carry to a GPU host.
SAVED = (FLOAT, "tensorsmith QDQ, as build decides",
         "tensorsmith QDQ, as build decides, packed dots")


@contextlib.contextmanager
def integer_products(where: IntegerProducts | None) -> Iterator[None]:
    """``build`` computes the products ``where`` admits in integers (None: none) on every
    target, for the builds inside, whatever ``build._integer_products`` decides: what
    each choice of the GPU branch costs, measured."""
    build_module = importlib.import_module("tensorsmith.ir.build")  # (not the function)
    decide = build_module._integer_products
    build_module._integer_products = lambda tgt, lanes: where  # type: ignore[assignment]
    try:
        yield
    finally:
        build_module._integer_products = decide  # type: ignore[assignment]


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32)
            for name, shape in input_shapes(model).items()}


def _compile(model: onnx.ModelProto, path: Path, target: str) -> tuple[Path, int]:
    """The artifact's path, and how many of its kernels hold an integer product."""
    graph, params = from_onnx(model, shape=input_shapes(model))
    lib = build(graph, target=target, params=params)
    lib.export_library(path)
    funcs = lib.get_source("tir").split("\nfunc ")
    integer = sum("qmatmul" in f or "qconv2d" in f for f in funcs)
    return path, integer


def compile_variants(name: str, target: str, work: Path, image: int
                     ) -> tuple[onnx.ModelProto, onnx.ModelProto, dict[str, np.ndarray],
                                dict[str, tuple[Path, int]]]:
    """The float model, its QDQ model, the inputs, and every variant compiled: label ->
    (artifact, integer kernels), the float-products one (:data:`FLOAT`) second."""
    model = BENCH_MODELS[name](image)
    calib = [_feeds(model, seed) for seed in range(8)]
    qdq = quantize(model, calib, method="minmax", evaluate_accuracy=False).model
    feeds = _feeds(model, 100)
    dot = f"{target} -integer-dot-product=1"
    built: dict[str, tuple[Any, int]] = {}
    built["tensorsmith float32 model"] = _compile(model, work / f"{name}_f.tsm", target)
    with integer_products(None):
        built[FLOAT] = _compile(qdq, work / f"{name}_q.tsm", target)
    built["tensorsmith QDQ, as build decides"] = _compile(qdq, work / f"{name}_b.tsm", target)
    if target.split()[0] == "vulkan":
        built["tensorsmith QDQ, as build decides, packed dots"] = _compile(
            qdq, work / f"{name}_bd.tsm", dot)
    with integer_products(IntegerProducts()):
        built["tensorsmith QDQ, every product in integers"] = _compile(
            qdq, work / f"{name}_i.tsm", target)
        if target.split()[0] == "vulkan":
            built["tensorsmith QDQ, every product in integers, packed dots"] = _compile(
                qdq, work / f"{name}_d.tsm", dot)
    return model, qdq, feeds, built


def bench(name: str, target: str, repeat: int, threads: int, work: Path, image: int
          ) -> list[str]:
    from bench.model_bench import ort_session

    model, qdq, feeds, built = compile_variants(name, target, work, image)
    device = Target.parse(target).info.device
    ort_float, ort_int8 = ort_session(model, threads), ort_session(qdq, threads)
    extra = {"ONNX Runtime float32 (CPU)": lambda: ort_float.run(None, feeds),
             "ONNX Runtime int8 QDQ (CPU)": lambda: ort_int8.run(None, feeds)}
    return [f"{name} ({', '.join(f'{k} {list(v.shape)}' for k, v in feeds.items())}), "
            f"target {target}:", time_variants(built, feeds, device, repeat, extra), ""]


def time_variants(built: dict[str, tuple[Path, int]], feeds: dict[str, np.ndarray],
                  device: str, repeat: int, extra: dict[str, Any] | None = None) -> str:
    """The table: each artifact (and ``extra`` callables) timed in alternating blocks,
    relative to the float-products one, with its largest difference from it, and the
    artifacts' kernel time alone (the device's timestamps: a GPU's copies excluded)."""
    engines = {k: rt.load(path, device=device) for k, (path, _) in built.items()}
    outs = {k: m.run(feeds)[0] for k, m in engines.items()}
    base = outs[FLOAT]
    scale = float(np.max(np.abs(base)))
    diffs = {k: float(np.max(np.abs(v - base))) / scale for k, v in outs.items()}
    fns = [(lambda m=m: m.run(feeds)) for m in engines.values()]
    fns += list((extra or {}).values())
    stats = interleaved(fns, repeat)
    names = [*engines, *(extra or {})]
    floats = stats[list(engines).index(FLOAT)].median_ms
    kernels = {k: sum(step["total_ms"] for step in m.profile(repeat=5)) / 5
               for k, m in engines.items()}
    rows = [[n, f"{s.median_ms:.2f} ({s.min_ms:.2f})", f"{s.median_ms / floats:.2f}",
             f"{kernels[n]:.3f}" if n in kernels else "",
             f"{diffs[n]:.2e}" if n in diffs else "", str(built[n][1]) if n in built else ""]
            for n, s in zip(names, stats)]
    return format_table(["engine", "ms median (min)", "/ float products", "kernels ms",
                         "max diff / max |out|", "integer kernels"], rows)


def save(names: list[str], target: str, folder: Path, image: int) -> None:
    """``--save``: every variant's artifact, inputs and label, for ``--run`` elsewhere."""
    folder.mkdir(parents=True, exist_ok=True)
    index = {}
    for name in names:
        _, _, feeds, built = compile_variants(name, target, folder, image)
        np.savez(folder / f"{name}_inputs.npz", **feeds)
        for label, (path, _) in built.items():
            if label not in SAVED:
                path.unlink()
        index[name] = {"target": target, "inputs": f"{name}_inputs.npz",
                       "variants": {k: [p.name, n] for k, (p, n) in built.items()
                                    if k in SAVED}}
    (folder / "quantized_gpu.json").write_text(json.dumps(index, indent=1) + "\n")


def run_saved(folder: Path, device: str, repeat: int) -> str:
    """``--run``: the saved variants timed on ``device`` with the runtime alone."""
    index = json.loads((folder / "quantized_gpu.json").read_text())
    lines = []
    for name, entry in index.items():
        data = np.load(folder / entry["inputs"])
        feeds = {k: data[k] for k in data.files}
        built = {k: (folder / f, n) for k, (f, n) in entry["variants"].items()}
        lines += [f"{name} ({', '.join(f'{k} {list(v.shape)}' for k, v in feeds.items())}), "
                  f"target {entry['target']}, on {device}:",
                  time_variants(built, feeds, device, repeat), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="vulkan")
    parser.add_argument("--models", default="convnet,mlp")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--image", type=int, default=32, help="the conv net's image size")
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime's threads")
    parser.add_argument("--save", type=Path, help="only compile, into this folder")
    parser.add_argument("--run", type=Path, help="only time what --save wrote there")
    parser.add_argument("--device", default="vulkan", help="the device of --run")
    args = parser.parse_args(argv)
    if args.save is not None:
        save(args.models.split(","), args.target, args.save, args.image)
        return 0
    if args.run is not None:
        print(run_saved(args.run, args.device, args.repeat))
        return 0
    work = Path(tempfile.mkdtemp(prefix="tsm-quantized-gpu-"))
    env = environment(args.threads)
    lines = [f"host: {env['isa']} ({env['processor'] or env['machine']}); ONNX Runtime "
             f"{args.threads} threads; the GPU target runs on its device's driver", ""]
    for name in args.models.split(","):
        lines += bench(name, args.target, args.repeat, args.threads, work, args.image)
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    kind = "".join(c if c.isalnum() else "-" for c in args.target)
    which = args.models.replace(",", "-") + (f"_{args.image}px" if "convnet" in args.models
                                             else "")
    out = RESULTS / f"quantized_gpu_{kind}_{which}_{env['isa']}_{datetime.date.today()}.txt"
    out.write_text(f"$ python bench/quantized_gpu.py {' '.join(argv or sys.argv[1:])}\n\n"
                   f"{text}\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
