"""A model quantized by ``tensorsmith quantize``: accuracy against the float model, and
speed of both next to ONNX Runtime's, float and int8, in the same process.

    python bench/quantized.py                                  # ResNet-50, 224x224
    python bench/quantized.py --model resnet18 --calib 8 --eval 16 --repeat 10
    python bench/quantized.py --model mobilenetv3 --quantizer onnxruntime

The float model (bench/models.py, random but fixed weights) is quantized post-training
(int8 per-channel weights, uint8 activations, ranges from ``--method`` on ``--calib``
seeded random images), by ``tensorsmith quantize`` or, with ``--quantizer onnxruntime``,
by ONNX Runtime's own tool (quantize_static, QDQ format: a benchmark dependency only).
``--eval`` other images give the top-1 agreement of the int8 model with the float one,
run by tensorsmith and by ONNX Runtime. Where the output is quantized, the int8 outputs
are compared in quantization steps of it: tensorsmith's, ONNX Runtime's int8 kernels' and
ONNX Runtime's without graph optimizations (ONNX's QDQ semantics), per image; and the
last against itself on inputs moved by one float32 ulp, the model's own sensitivity to
float rounding (bench/quantized_steps.py follows the differences layer by layer). Then
four engines are timed in alternating blocks, 2 threads each: tensorsmith float,
tensorsmith on the QDQ model, ONNX Runtime float, ONNX Runtime on the QDQ model (its int8
kernels). Prints the table, writes bench/results/quantized_<model>_<isa>_<date>.txt.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx

import tensorsmith.runtime as rt
from bench.measure import interleaved
from bench.model_bench import ort_session
from bench.models import MODELS, input_shapes
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build
from tensorsmith.quantize import quantize

RESULTS = Path(__file__).resolve().parent / "results"


def _images(model: onnx.ModelProto, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``count`` seeded random inputs, standard normal (like bench.models.sample_inputs)."""
    rng = np.random.default_rng(seed)
    shapes = input_shapes(model)
    return [{name: rng.standard_normal(shape).astype(np.float32)
             for name, shape in shapes.items()} for _ in range(count)]


def _ort_quantize(source: Path, target: Path, calib: list[dict[str, np.ndarray]],
                  method: str) -> None:
    """ONNX Runtime's post-training quantizer: QDQ, int8 per-channel weights, uint8
    activations, as its documentation recommends for CPU."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    methods = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
               "entropy": CalibrationMethod.Entropy}
    quantize_static(str(source), str(target), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=methods[method])


def _reference_session(model: onnx.ModelProto) -> Any:
    """ONNX Runtime with every graph optimization off: each QuantizeLinear and
    DequantizeLinear run as ONNX defines them, no fused integer kernels."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _output_step(model: onnx.ModelProto) -> float | None:
    """The scale of the DequantizeLinear that gives the first output, if one does."""
    from onnx import numpy_helper

    producer = {o: n for n in model.graph.node for o in n.output}
    node = producer.get(model.graph.output[0].name)
    if node is None or node.op_type != "DequantizeLinear":
        return None
    scales = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    scale = scales.get(node.input[1])
    return None if scale is None or scale.size != 1 else float(scale.reshape(-1)[0])


def _steps(got: list[np.ndarray], want: list[np.ndarray], step: float) -> np.ndarray:
    """Per image, the largest difference of an output element in quantization steps
    (both outputs are dequantized with the same scale, so these are whole numbers)."""
    return np.array([float(np.max(np.abs(g.astype(np.float64) - w))) / step
                     for g, w in zip(got, want)])


def _within(steps: np.ndarray) -> str:
    """``"images within one step/images (the largest difference)"``."""
    return (f"{int(np.sum(steps <= 1.0 + 1e-3))}/{steps.size} "
            f"({steps.max():.2f})")


def sensitivity(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Per image, how many steps ONNX Runtime's reference output moves when every input
    value moves by one float32 ulp (seeded random directions): the model's own
    sensitivity to float rounding, the floor under any step bound of its output."""
    session = _reference_session(model)
    output = model.graph.output[0].name
    step = _output_step(model)
    assert step, "the output is not quantized"
    g = np.random.default_rng(0)
    out = []
    for f in feeds:
        moved = {k: np.nextafter(v, np.where(g.random(v.shape) < 0.5, np.inf, -np.inf)
                                 .astype(v.dtype)) for k, v in f.items()}
        a, b = (session.run([output], x)[0] for x in (f, moved))
        out.append(float(np.max(np.abs(a.astype(np.float64) - b))) / step)
    return np.array(out)


def _compile(model: onnx.ModelProto, path: Path, target: str, threads: int) -> Any:
    graph, params = from_onnx(model, shape=input_shapes(model))
    build(graph, target=target, params=params).export_library(path)
    module = rt.load(path)
    module.set_num_threads(threads)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    parser.add_argument("--method", default="minmax", choices=["minmax", "percentile",
                                                                "entropy"])
    parser.add_argument("--quantizer", default="tensorsmith", choices=["tensorsmith",
                                                                        "onnxruntime"])
    parser.add_argument("--calib", type=int, default=16, help="calibration images")
    parser.add_argument("--eval", type=int, default=32, help="images for top-1 agreement")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", default="llvm",
                        help='tensorsmith\'s target, e.g. "llvm -mcpu=haswell" for AVX2 code '
                        "(without the integer dot products of AVX512-VNNI / AVX-VNNI)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    model = MODELS[args.model](opset=17, batch=1)
    calib = _images(model, args.calib, seed=1)
    evaluation = _images(model, args.eval, seed=2)
    work = Path(tempfile.mkdtemp(prefix="tsm-quantized-"))
    float_path, qdq_path = work / "float.onnx", work / "int8.onnx"
    onnx.save(model, float_path)
    if args.quantizer == "tensorsmith":
        result = quantize(model, calib, method=args.method, evaluate_accuracy=False)
        onnx.save(result.model, qdq_path)
        quantized = len(result.quantized_nodes)
    else:
        _ort_quantize(float_path, qdq_path, calib, args.method)
    qdq = onnx.load(qdq_path)
    if args.quantizer == "onnxruntime":
        quantized = sum(n.op_type == "QuantizeLinear" for n in qdq.graph.node)

    ts_float = _compile(model, work / "float.so", args.target, args.threads)
    ts_int8 = _compile(qdq, work / "int8.so", args.target, args.threads)
    ort_float = ort_session(model, args.threads)
    ort_int8 = ort_session(qdq, args.threads)
    name = model.graph.input[0].name

    def run_all(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [ts_float.run(feeds)[0], ts_int8.run(feeds)[0],
                ort_float.run(None, feeds)[0], ort_int8.run(None, feeds)[0]]

    outputs = [run_all(feeds) for feeds in evaluation]  # [image][engine]
    tops = np.array([[int(np.argmax(o.reshape(-1))) for o in outs] for outs in outputs])
    agree_ts = float(np.mean(tops[:, 1] == tops[:, 0]))
    agree_ort = float(np.mean(tops[:, 3] == tops[:, 2]))
    diffs = outputs[:4]
    rel = max(float(np.max(np.abs(d[1] - d[0])) / np.max(np.abs(d[0]))) for d in diffs)
    step = _output_step(qdq)
    reference = _reference_session(qdq)  # ONNX's QDQ semantics, no integer kernels
    ref = [reference.run(None, f)[0] for f in evaluation]
    steps = steps_ref = steps_ort = None
    if step:  # per image: the largest difference of an output element, in steps
        steps = _steps([d[1] for d in outputs], [d[3] for d in outputs], step)
        steps_ref = _steps([d[1] for d in outputs], ref, step)
        steps_ort = _steps([d[3] for d in outputs], ref, step)
    feeds = evaluation[0]
    stats = interleaved([lambda: ts_float.run(feeds), lambda: ts_int8.run(feeds),
                         lambda: ort_float.run(None, {name: feeds[name]}),
                         lambda: ort_int8.run(None, {name: feeds[name]})], args.repeat)
    env = environment(args.threads)
    rows = [[engine, f"{s.median_ms:.2f} ({s.min_ms:.2f})"] for engine, s in zip(
        ["tensorsmith float32", "tensorsmith int8 (QDQ)", "ONNX Runtime float32",
         "ONNX Runtime int8 (QDQ)"], stats)]
    sizes = {p.name: p.stat().st_size for p in (float_path, qdq_path,
                                                 work / "float.so", work / "int8.so")}
    lines = [
        f"{args.model}, 1x3x224x224, quantized by {args.quantizer} ({args.method}, "
        f"{args.calib} calibration images, seeded random, QDQ): {quantized} "
        + ("nodes quantized" if args.quantizer == "tensorsmith" else "QuantizeLinear nodes"),
        f"host: {env['isa']} ({env['processor'] or env['machine']}), {args.threads} threads "
        f"per engine; tensorsmith target: {args.target}",
        f"top-1 agreement with the float model on {args.eval} other images: tensorsmith "
        f"{agree_ts:.0%}, ONNX Runtime {agree_ort:.0%}; largest relative difference of the "
        f"logits (tensorsmith, 4 images) {rel:.3f}",
        "tensorsmith int8, largest difference in quantization steps of the output (4 images): "
        + (f"{steps_ref[:4].max():.2f} against ONNX Runtime without graph optimizations "
           f"(ONNX's QDQ semantics), {steps[:4].max():.2f} against its optimized int8 kernels "
           f"(which requantize in fixed point); those two differ from each other by "
           f"{steps_ort[:4].max():.2f}"
           if steps is not None and steps_ref is not None and steps_ort is not None
           else "n/a (the output is not quantized)"),
        *([f"over all {args.eval} images, images whose output is within one step (largest "
           f"difference): tensorsmith int8 and ONNX Runtime without optimizations "
           f"{_within(steps_ref)}, tensorsmith int8 and ONNX Runtime int8 {_within(steps)}, "
           f"ONNX Runtime int8 and ONNX Runtime without optimizations {_within(steps_ort)}; "
           f"ONNX Runtime without optimizations and itself on inputs moved by one float32 ulp "
           f"{_within(sensitivity(qdq, evaluation))}"]
          if steps is not None and steps_ref is not None and steps_ort is not None else []),
        f"files: float.onnx {sizes['float.onnx']:,} B, int8.onnx {sizes['int8.onnx']:,} B, "
        f"float.so {sizes['float.so']:,} B, int8.so {sizes['int8.so']:,} B",
        "",
        format_table(["engine", "ms median (min)"], rows),
        "",
        f"time ratios: tensorsmith int8 / tensorsmith float32 "
        f"{stats[1].median_ms / stats[0].median_ms:.2f}; tensorsmith int8 / ONNX Runtime int8 "
        f"{stats[1].median_ms / stats[3].median_ms:.2f} (< 1: tensorsmith faster)",
    ]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    isa = env["isa"]
    by = "" if args.quantizer == "tensorsmith" else f"_{args.quantizer}"
    if args.target != "llvm":  # code for another CPU than this host's
        by += "_" + "".join(c if c.isalnum() else "-" for c in args.target.split(maxsplit=1)[-1])
    out = RESULTS / f"quantized_{args.model}{by}_{isa}_{datetime.date.today()}.txt"
    out.write_text(f"$ python bench/quantized.py {' '.join(argv or sys.argv[1:])}\n\n{text}\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
