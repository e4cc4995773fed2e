"""``tensorsmith quantize``: post-training quantization of an ONNX model to QDQ ONNX.

The work is done by :func:`tensorsmith.quantize.quantize`; this module parses arguments,
turns the quantizer's errors into ``error: ...`` lines, writes the model and prints what
was quantized and the accuracy report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tensorsmith.cli._common import CliError, existing_file, positive_int, writable_file

EPILOG = """\
examples:
  tensorsmith quantize model.onnx --calib calib.npz -o model.int8.onnx
  tensorsmith quantize model.onnx --calib calib.npz --method entropy --eval val.npz -o q.onnx
  tensorsmith quantize model.onnx --calib calib.npz --method percentile --percentile 99.9 \\
      --activation-type int8 -o q.onnx

--calib (and --eval) is a .npz (numpy.savez) with one array per graph input, named after
it, whose leading axis counts the samples: [S, 1, 3, 224, 224] for S images of a
[1, 3, 224, 224] input ([S, 3, 224, 224] works too when the batch axis is 1 or symbolic).

The result is a QDQ model (QuantizeLinear/DequantizeLinear pairs) that ONNX Runtime and
tensorsmith run: Conv, MatMul and Gemm get int8 weights per output channel, int32 biases
and per-tensor activations (uint8 asymmetric by default). Calibration runs the float model
compiled by tensorsmith (llvm); afterwards both models run on the --eval samples (default:
the calibration ones) and the change in accuracy is printed: per output the largest
absolute and relative error, and for [N, classes] outputs how often the top-1 class agrees.
"""


# the quantizer's own lists (tensorsmith.quantize.METHODS, ACTIVATION_TYPES), written
# out so that `tensorsmith --help` does not import onnx; a test keeps them in step
METHODS = ("minmax", "percentile", "entropy")
ACTIVATION_TYPES = ("uint8", "int8")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "quantize",
        parents=parents,
        help="quantize an ONNX model to int8 (QDQ ONNX) with calibration data",
        description="Post-training quantization: calibrate activation ranges on sample "
        "inputs and write a QDQ ONNX model with int8 weights.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="the float ONNX model (.onnx)")
    p.add_argument("--calib", required=True, metavar="NPZ", help="calibration samples (.npz)")
    p.add_argument("-o", "--output", required=True, help="where to write the quantized model")
    p.add_argument("--method", choices=METHODS, default="minmax",
                   help="how activation ranges are chosen (default: minmax)")
    p.add_argument("--percentile", type=float, default=99.99,
                   help="the percentile kept by --method percentile (default: 99.99)")
    p.add_argument("--activation-type", choices=ACTIVATION_TYPES, default="uint8",
                   help="integer type of the activations (default: uint8, asymmetric)")
    p.add_argument("--quantize-outputs", action="store_true",
                   help="also quantize the outputs of Conv, MatMul and Gemm")
    p.add_argument("--eval", metavar="NPZ",
                   help="samples for the accuracy report (default: the calibration ones)")
    p.add_argument("--no-report", action="store_true", help="skip the accuracy report")
    p.add_argument("--max-samples", type=positive_int, metavar="N",
                   help="use at most N samples of each file")
    p.add_argument("-t", "--target", default="llvm",
                   help="target that compiles the models for calibration (default: llvm)")
    p.add_argument("--json", action="store_true", help="print the summary and report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    model = existing_file(args.model, "model")
    existing_file(args.calib, "calibration file")
    if args.eval is not None:
        existing_file(args.eval, "evaluation file")
    output = writable_file(args.output, "the quantized model")

    import onnx

    from tensorsmith.quantize import QuantizeError, format_report, quantize, terminal_progress

    try:
        result = quantize(
            str(model), args.calib, method=args.method, percentile=args.percentile,
            activation_type=args.activation_type, quantize_outputs=args.quantize_outputs,
            evaluation=args.eval, evaluate_accuracy=not args.no_report,
            max_samples=args.max_samples, target=args.target,
            progress=None if args.quiet or args.json else terminal_progress,
        )  # fmt: skip
    except QuantizeError as e:
        raise CliError(str(e)) from None
    onnx.save(result.model, str(output))
    if args.json:
        print(json.dumps(_summary_json(result, model, output), indent=2))
        return 0
    counts = ", ".join(f"{op} x{n}" for op, n in sorted(result.counts().items()))
    before, after = Path(model).stat().st_size, output.stat().st_size
    print(f"quantized {len(result.quantized_nodes)} nodes ({counts}): int8 weights per "
          f"channel, {args.activation_type} activations, {args.method} calibration")
    for node, why in result.skipped:
        print(f"  left float: {node} ({why})")
    print(f"wrote {output} ({_size(after)}; the float model is {_size(before)})")
    if result.report is not None:
        print(format_report(result.report))
    sys.stdout.flush()
    return 0


def _summary_json(result: Any, model: Path, output: Path) -> dict[str, Any]:
    return {
        "model": str(model), "output": str(output),
        "quantized": [{"node": n, "op_type": op} for n, op in result.quantized_nodes],
        "skipped": [{"node": n, "why": why} for n, why in result.skipped],
        "ranges": {name: list(r) for name, r in result.ranges.items()},
        "report": None if result.report is None else result.report.to_json(),
    }  # fmt: skip


def _size(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 1e5 else f"{count / 1e3:.1f} kB"
