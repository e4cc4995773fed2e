"""Where an int8 QDQ model's outputs part from ONNX Runtime's, layer by layer.

    python bench/quantized_steps.py --model mobilenetv3 --images 4

The model is quantized as bench/quantized.py does it (``--quantizer``), then every
activation's DequantizeLinear output is made a graph output, so that each quantized
tensor can be compared, in steps of its own scale, between ONNX Runtime without graph
optimizations (ONNX's QDQ semantics: the reference), tensorsmith's compiled artifact
and, with ``--interpreter``, tensorsmith's NumPy interpreter on the imported graph.

A difference in a layer either comes in with its inputs (some input element it reads
already differs) or is *fresh*: all that the element reads is equal, yet it quantizes to
another integer. A fresh difference is a rounding decision taken differently: the
pre-quantization values differ by float rounding (summation order, fused multiply-adds)
and straddle a tie. For each fresh one the value is also computed exactly (float64, from
the same float32 dequantized inputs); the table counts how often each engine rounds as
the exact value does. Fresh differences where the reference is on the wrong side of the
tie are its float32 rounding, not a difference of semantics; a systematic difference
(a formula, a rounding mode) shows as fresh differences on the wrong side in tensorsmith.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx
from onnx import helper, numpy_helper

from bench.models import MODELS, input_shapes
from bench.quantized import (
    RESULTS,
    _compile,
    _images,
    _ort_quantize,
    _reference_session,
    _steps,
    _within,
    sensitivity,
)
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.interpreter import run_graph
from tensorsmith.quantize import quantize

Arrays = dict[str, np.ndarray]


@dataclass
class Layer:
    """One activation's QuantizeLinear/DequantizeLinear pair and the node it quantizes."""

    name: str  # the DequantizeLinear's output
    node: onnx.NodeProto  # the node whose output is quantized
    scale: float
    counts: dict[str, np.ndarray] = field(default_factory=dict)  # engine -> [1, 2, 3+ steps]
    fresh: dict[str, int] = field(default_factory=dict)
    exact: dict[str, int] = field(default_factory=dict)  # fresh ones the engine rounds exactly
    worst: dict[str, int] = field(default_factory=dict)  # the largest fresh one, in steps
    reference_exact: dict[str, int] = field(default_factory=dict)


def _layers(model: onnx.ModelProto) -> list[Layer]:
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    out = []
    for dq in model.graph.node:
        if dq.op_type != "DequantizeLinear" or dq.input[0] in init:
            continue
        ql = producer.get(dq.input[0])
        node = producer.get(ql.input[0]) if ql is not None else None
        if node is None:  # the graph input's own quantize step
            continue
        out.append(Layer(dq.output[0], node, float(init[dq.input[1]].reshape(-1)[0])))
    return out


def _exposed(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every dequantized activation (the graph input's too) a graph output
    as well."""
    inferred = onnx.shape_inference.infer_shapes(model)
    info = {v.name: v for v in inferred.graph.value_info}
    constants = {t.name for t in model.graph.initializer}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {o.name for o in out.graph.output}
    out.graph.output.extend(info[n.output[0]] for n in model.graph.node
                            if n.op_type == "DequantizeLinear" and n.input[0] not in constants
                            and n.output[0] not in have)
    return out


def _dequantized_weights(model: onnx.ModelProto) -> Arrays:
    """Each DequantizeLinear of a constant, as ONNX defines it (float32), in float64."""
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out: Arrays = {}
    for n in model.graph.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in init:
            continue
        q = init[n.input[0]].astype(np.float32)
        scale = init[n.input[1]].astype(np.float32)
        zero = init[n.input[2]].astype(np.float32) if len(n.input) > 2 else np.float32(0)
        if scale.size > 1:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % q.ndim
            shape = [-1 if d == axis else 1 for d in range(q.ndim)]
            scale = scale.reshape(shape)
            zero = zero.reshape(shape) if np.size(zero) > 1 else zero
        out[n.output[0]] = ((q - zero) * scale).astype(np.float64)
    return out


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _conv_windows(node: onnx.NodeProto, mask: np.ndarray, out_shape: tuple[int, ...],
                  weight: np.ndarray) -> np.ndarray:
    """Which output elements of a convolution read a True input element."""
    a = _attrs(node)
    group, (kh, kw) = int(a.get("group", 1)), weight.shape[2:]
    strides, dil = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    pads = a.get("pads", [0, 0, 0, 0])
    n, _, oh, ow = out_shape
    if group == 1:
        mask = mask.any(axis=1, keepdims=True)
    elif group != mask.shape[1]:
        return np.broadcast_to(mask.any(), out_shape)
    padded = np.pad(mask, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    hit = np.zeros((n, mask.shape[1], oh, ow), bool)
    for dy in range(kh):
        for dx in range(kw):
            y0, x0 = dy * dil[0], dx * dil[1]
            hit |= padded[:, :, y0:y0 + strides[0] * (oh - 1) + 1:strides[0],
                          x0:x0 + strides[1] * (ow - 1) + 1:strides[1]]
    return np.broadcast_to(hit, out_shape)


def _tainted(node: onnx.NodeProto, masks: list[np.ndarray | None], out_shape: tuple[int, ...],
             weights: Arrays) -> np.ndarray:
    """Which output elements of ``node`` read an input element that differs (``masks``:
    per input, None for a constant)."""
    given = [m for m in masks if m is not None]
    if not given:
        return np.zeros(out_shape, bool)
    op = node.op_type
    if op == "Conv":
        return _conv_windows(node, given[0], out_shape, weights[node.input[1]])
    if op in ("HardSwish", "HardSigmoid", "Relu", "Clip", "Add", "Mul", "Sub"):
        hit = np.zeros(out_shape, bool)
        for m in given:
            hit = hit | np.broadcast_to(m, out_shape)
        return hit
    if op in ("GlobalAveragePool", "ReduceMean"):
        return np.broadcast_to(given[0].any(axis=(2, 3), keepdims=True), out_shape)
    if op in ("Flatten", "Reshape"):
        return given[0].reshape(out_shape)
    return np.broadcast_to(any(m.any() for m in given), out_shape)


def _conv_at(node: onnx.NodeProto, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
             index: tuple[int, ...]) -> float:
    a = _attrs(node)
    group, strides = int(a.get("group", 1)), a.get("strides", [1, 1])
    pads, dil = a.get("pads", [0, 0, 0, 0]), a.get("dilations", [1, 1])
    n, o, y, z = index
    kh, kw = w.shape[2:]
    first = (o // (w.shape[0] // group)) * w.shape[1]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    top, left = y * strides[0], z * strides[1]
    patch = xp[n, first:first + w.shape[1], top:top + dil[0] * (kh - 1) + 1:dil[0],
               left:left + dil[1] * (kw - 1) + 1:dil[1]]
    return float((patch * w[o]).sum() + (bias[o] if bias is not None else 0.0))


_ELEMENTWISE: dict[str, Callable[[list[np.ndarray], dict], np.ndarray]] = {
    "HardSwish": lambda v, a: v[0] * np.clip(v[0] / 6 + 0.5, 0, 1),
    "HardSigmoid": lambda v, a: np.clip(float(a.get("alpha", 0.2)) * v[0]
                                        + float(a.get("beta", 0.5)), 0, 1),
    "Relu": lambda v, a: np.maximum(v[0], 0),
    "Add": lambda v, a: v[0] + v[1],
    "Sub": lambda v, a: v[0] - v[1],
    "Mul": lambda v, a: v[0] * v[1],
    "GlobalAveragePool": lambda v, a: v[0].mean(axis=(2, 3), keepdims=True),
}


def _exact(node: onnx.NodeProto, inputs: list[np.ndarray], out_shape: tuple[int, ...],
           where: np.ndarray) -> np.ndarray | None:
    """``node``'s output in float64 at the indices ``where`` (None: not known here)."""
    if node.op_type == "Conv":
        bias = inputs[2] if len(inputs) > 2 else None
        return np.array([_conv_at(node, inputs[0], inputs[1], bias, tuple(i)) for i in where])
    if node.op_type == "Gemm":
        a = _attrs(node)
        x = inputs[0].T if a.get("transA") else inputs[0]
        w = inputs[1].T if a.get("transB") else inputs[1]
        y = float(a.get("alpha", 1.0)) * (x @ w)
        if len(inputs) > 2:
            y = y + float(a.get("beta", 1.0)) * inputs[2]
        full = y
    elif node.op_type in _ELEMENTWISE:
        full = _ELEMENTWISE[node.op_type](inputs, _attrs(node))
    else:
        return None
    full = np.broadcast_to(full, out_shape)
    return np.array([full[tuple(i)] for i in where])


def compare(model: onnx.ModelProto, feeds: list[Arrays], engines: dict[str, list[Arrays]],
            reference: list[Arrays], layers: list[Layer]) -> None:
    """Fill each layer's counts: ``engines[name][image]`` and ``reference[image]`` map
    every exposed output to its array."""
    weights = _dequantized_weights(model)
    for name, runs in engines.items():
        for layer in layers:
            layer.counts[name] = np.zeros(3, np.int64)
            layer.fresh[name] = layer.exact[name] = layer.reference_exact[name] = 0
            layer.worst[name] = 0
        for got, ref in zip(runs, reference):
            for layer in layers:
                _compare_layer(layer, name, got, ref, weights)


def _compare_layer(layer: Layer, engine: str, got: Arrays, ref: Arrays,
                   weights: Arrays) -> None:
    steps = np.rint(np.abs(got[layer.name].astype(np.float64) - ref[layer.name])
                    / layer.scale).astype(np.int64)
    layer.counts[engine] += [np.sum(steps == 1), np.sum(steps == 2), np.sum(steps >= 3)]
    differ = steps > 0
    if not differ.any():
        return
    node = layer.node
    # an input is a constant (None) or an exposed dequantized activation: equal floats
    # are equal quantized integers
    masks = [None if i in weights or i not in ref else got[i] != ref[i] for i in node.input]
    fresh = differ & ~_tainted(node, masks, differ.shape, weights)
    where = np.argwhere(fresh)
    layer.fresh[engine] += len(where)
    if not len(where):
        return
    layer.worst[engine] = max(layer.worst[engine], int(steps[fresh].max()))
    inputs = [weights[i] if i in weights else ref[i].astype(np.float64) for i in node.input]
    exact = _exact(node, inputs, differ.shape, where)
    if exact is None:
        return
    mine = np.array([got[layer.name][tuple(i)] for i in where], np.float64)
    theirs = np.array([ref[layer.name][tuple(i)] for i in where], np.float64)
    # the dequantized values are (q - zp) * scale: equal quantized integers, equal values
    truth = np.rint(exact / layer.scale) * layer.scale
    layer.exact[engine] += int(np.sum(np.abs(mine - truth) < layer.scale / 2))
    layer.reference_exact[engine] += int(np.sum(np.abs(theirs - truth) < layer.scale / 2))


def _engines(model: onnx.ModelProto, qdq: onnx.ModelProto, path: Path,
             args: argparse.Namespace) -> dict[str, Callable[[Arrays], list[np.ndarray]]]:
    """tensorsmith's compiled ``model`` and, with ``--interpreter``, its interpreter."""
    module = _compile(model, path, args.target, 2)
    runs: dict[str, Callable[[Arrays], list[np.ndarray]]] = {"tensorsmith": module.run}
    if args.interpreter:
        graph, _ = from_onnx(model, shape=input_shapes(qdq))
        runs["interpreter"] = lambda f: run_graph(graph, f)  # type: ignore[return-value]
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mobilenetv3", choices=sorted(MODELS))
    parser.add_argument("--quantizer", default="onnxruntime", choices=["tensorsmith",
                                                                        "onnxruntime"])
    parser.add_argument("--calib", type=int, default=16, help="calibration images")
    parser.add_argument("--images", type=int, default=4, help="images compared")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--outputs", type=int, default=32,
                        help="images whose outputs only are compared (and the reference's "
                        "sensitivity to one ulp measured): bench/quantized.py's --eval ones")
    parser.add_argument("--interpreter", action="store_true",
                        help="also compare tensorsmith's NumPy interpreter")
    args = parser.parse_args(argv)

    model = MODELS[args.model](opset=17, batch=1)
    calib = _images(model, args.calib, seed=1)
    work = Path(tempfile.mkdtemp(prefix="tsm-steps-"))
    if args.quantizer == "tensorsmith":
        qdq = quantize(model, calib, method="minmax", evaluate_accuracy=False).model
    else:
        onnx.save(model, work / "float.onnx")
        _ort_quantize(work / "float.onnx", work / "int8.onnx", calib, "minmax")
        qdq = onnx.load(work / "int8.onnx")
    layers = _layers(qdq)
    exposed = _exposed(qdq)
    names = [o.name for o in exposed.graph.output]
    feeds = _images(qdq, 4, seed=2)[:args.images]  # bench/quantized.py's first images
    reference = _reference_session(exposed)
    ref = [dict(zip(names, reference.run(None, f))) for f in feeds]
    runs = _engines(exposed, qdq, work / "exposed.so", args)
    engines = {name: [dict(zip(names, run(f))) for f in feeds] for name, run in runs.items()}
    compare(qdq, feeds, engines, ref, layers)
    # the outputs alone, over more images, of the model as it is (no outputs added, so
    # the artifact is the one bench/quantized.py times): each engine's, and the
    # reference's own sensitivity to float rounding
    many = _images(qdq, args.outputs, seed=2)
    step = next(layer.scale for layer in layers if layer.name == names[0])
    want = [reference.run(names[:1], f)[0] for f in many]
    outputs = {name: _steps([run(f)[0] for f in many], want, step)
               for name, run in _engines(qdq, qdq, work / "int8.so", args).items()}
    outputs["ONNX Runtime's reference itself, every input value moved by one ulp"] = (
        sensitivity(qdq, many))
    text = _report(args, qdq, layers, engines, ref, outputs)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    env = environment(2)
    by = "" if args.target == "llvm" else "_" + "".join(
        c if c.isalnum() else "-" for c in args.target.split(maxsplit=1)[-1])
    out = RESULTS / (f"quantized_steps_{args.model}_{args.quantizer}{by}_{env['isa']}_"
                     f"{datetime.date.today()}.txt")
    out.write_text(f"$ python bench/quantized_steps.py {' '.join(argv or sys.argv[1:])}\n\n"
                   f"{text}\n")
    print(f"\nwritten to {out}")
    return 0


def _report(args: argparse.Namespace, qdq: onnx.ModelProto, layers: list[Layer],
            engines: dict[str, list[Arrays]], ref: list[Arrays],
            outputs: dict[str, np.ndarray]) -> str:
    output = qdq.graph.output[0].name
    last = next(layer for layer in layers if layer.name == output)
    finals = {name: max(float(np.max(np.abs(r[output] - f[output]))) / last.scale
                        for r, f in zip(runs, ref)) for name, runs in engines.items()}
    rows = []
    for layer in layers:
        if not any(c.any() for c in layer.counts.values()):
            continue
        cells = []
        for name in engines:
            c = layer.counts[name]
            cells += [f"{c[0]}/{c[1]}/{c[2]}",
                      f"{layer.fresh[name]} ({layer.exact[name]}:{layer.reference_exact[name]})"]
        rows.append([layer.name.removesuffix("_DequantizeLinear_Output"), layer.node.op_type,
                     *cells])
    header = ["layer", "op"]
    for name in engines:
        header += [f"{name}: 1/2/3+ steps", f"fresh (exact: {name}:ORT)"]
    totals = {name: sum(layer.fresh[name] for layer in layers) for name in engines}
    on_side = {name: sum(layer.exact[name] for layer in layers) for name in engines}
    ref_side = {name: sum(layer.reference_exact[name] for layer in layers) for name in engines}
    values = sum(r[layer.name].size for r in ref for layer in layers)
    worst = {name: max(layer.worst[name] for layer in layers) for name in engines}
    lines = [
        f"{args.model}, quantized by {args.quantizer} (minmax, {args.calib} calibration "
        f"images, QDQ), {args.images} images; tensorsmith target: {args.target}; host ISA: "
        f"{environment(2)['isa']}",
        "every activation's quantized value against ONNX Runtime without graph "
        "optimizations (ONNX's QDQ semantics), in steps of its own scale; summed over the "
        "images; only layers with a difference are listed",
        *(f"{name}: output {finals[name]:.2f} steps at most; of {values:,} quantized values, "
          f"{totals[name]} fresh differences ({worst[name]} step at most), of which {name} "
          f"rounds as the exact value does in "
          f"{on_side[name]}, ONNX Runtime in {ref_side[name]}" for name in engines),
        f"outputs of {args.outputs} images within one step of the reference's (the largest "
        f"difference): " + ", ".join(f"{name} {_within(steps)}"
                                     for name, steps in outputs.items()),
        "",
        format_table(header, rows),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
