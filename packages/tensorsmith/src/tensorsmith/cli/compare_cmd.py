"""``tensorsmith compare``: the first ONNX node whose output differs from ONNX Runtime's.

Exit status 0 when every compared output is within tolerance, 3 when one is not
(``DIVERGED``), and the usual 2 / 1 for user and internal errors. The work is done by
:func:`tensorsmith.cli.compare.compare`; this module parses arguments and prints.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from tensorsmith.cli._common import CliError, existing_file
from tensorsmith.cli.compile_cmd import TARGET_HELP, add_input_shape_argument, input_shapes

DIVERGED = 3
"""Exit status when an output diverges (distinct from 1, a bug, and 2, a user error)."""

EPILOG = """\
examples:
  tensorsmith compare examples/mlp.onnx --input-shape input:1,784
  tensorsmith compare resnet.onnx --target vulkan --inputs image.npz --rtol 1e-3
  tensorsmith compare model.onnx --json > report.json

Both ONNX Runtime (the reference, graph optimizations off) and tensorsmith run the model
on the same inputs (--inputs, a .npz keyed by input name, else random ones from --seed)
with every node's output exposed; the ONNX nodes are then walked in order and the first
output off by more than  atol + rtol * max|reference|  is reported with both tensors'
statistics and its worst element. That node is then compiled and run alone on ONNX
Runtime's values for its inputs: if it still diverges its lowering is wrong, if not it
amplifies small differences of its inputs. Exposing intermediates keeps them out of fused
kernels, so this checks each op's lowering; the final outputs are compared too.

exit status: 0 all outputs match, 3 an output diverged, 2 a user error (a bad file, or
onnxruntime missing: pip install 'tensorsmith[compare]'), 1 an internal error.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        parents=parents,
        help="find the first node whose output differs from ONNX Runtime's",
        description="Run an ONNX model through ONNX Runtime and through tensorsmith with "
        "every intermediate exposed, and report the first node (in topological order) "
        "whose output diverges beyond tolerance.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="the ONNX model file (.onnx)")
    p.add_argument("-t", "--target", default="llvm", help=TARGET_HELP)
    p.add_argument("-d", "--device", help="device to run on (default: the target's own)")
    add_input_shape_argument(p)
    p.add_argument("-i", "--inputs", metavar="NPZ", help=".npz with one array per graph input")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default: 1e-4)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default: 1e-5)")
    p.add_argument(
        "-O", "--opt-level", type=int, choices=range(0, 4), metavar="N", default=2,
        help="optimization level 0-3, as for compile (default: 2)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.set_defaults(func=run)


def _inputs(path: str | None) -> dict[str, np.ndarray] | None:
    if path is None:
        return None
    npz = existing_file(path, "inputs file")
    try:
        with np.load(npz, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise CliError(f"inputs '{path}' must be a .npz keyed by input name")
            return {name: data[name] for name in data.files}
    except (ValueError, OSError) as e:
        raise CliError(f"cannot read inputs '{path}': not a .npz file ({e})") from None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _stats(label: str, s: Any) -> str:
    shape = ",".join(str(d) for d in s.shape)
    return (f"  {label:<12} {s.dtype}[{shape}]  min {_fmt(s.min)}  max {_fmt(s.max)}  "
            f"mean {_fmt(s.mean)}")  # fmt: skip


def format_report(report: Any) -> str:
    """The verdict for a terminal: the first divergence in detail, or a summary."""
    lines = [
        f"compared {len(report.compared)} node outputs of {report.model} "
        f"(target {report.target}, device {report.device}) with ONNX Runtime's",
        f"  tolerance: atol {report.atol:g} + rtol {report.rtol:g} * max|reference|",
    ]
    if report.skipped:
        lines.append(f"  ({len(report.skipped)} outputs not compared: no tensorsmith value of "
                     "their own, e.g. Identity, or folded at import)")  # fmt: skip
    first = report.first_divergence
    if first is None:
        worst = max(report.compared, key=lambda c: c.diff.max_abs_diff / max(
            c.diff.tolerance, 1e-30), default=None)  # fmt: skip
        lines.append("all outputs match")
        if worst is not None:
            lines.append(f"  closest to the tolerance: '{worst.output}' of node '{worst.node}' "
                         f"({worst.op_type}), max abs diff {_fmt(worst.diff.max_abs_diff)} "
                         f"<= {_fmt(worst.diff.tolerance)}")  # fmt: skip
        return "\n".join(lines)
    d = first.diff
    lines += [
        f"FIRST DIVERGENCE at node '{first.node}' ({first.op_type}, node #{first.node_index}), "
        f"output '{first.output}'",
        _stats("ONNX Runtime", first.reference),
        _stats("tensorsmith", first.actual),
    ]
    if d.reason == "shape":
        lines.append("  the shapes differ")
    else:
        where = ",".join(str(i) for i in d.worst_index or ())
        lines.append(f"  max abs diff {_fmt(d.max_abs_diff)} > tolerance {_fmt(d.tolerance)}"
                     + ("  (NaN on one side)" if d.reason == "nan" else ""))  # fmt: skip
        lines.append(f"  worst at [{where}]: ONNX Runtime {_fmt(d.reference_at_worst)}, "
                     f"tensorsmith {_fmt(d.actual_at_worst)}")  # fmt: skip
    lines += _isolation_lines(report.isolation, first.output)
    before = report.compared.index(first)
    lines.append(f"  {before} outputs before it match; {len(report.diverged)} of "
                 f"{len(report.compared)} outputs diverge in all")  # fmt: skip
    return "\n".join(lines)


def _isolation_lines(isolation: Any, output: str) -> list[str]:
    if isolation is None:
        return []
    if isolation.ok is None:
        return [f"  the node could not be run alone ({isolation.error})"]
    d = isolation.diffs[output]
    measured = f"max abs diff {_fmt(d.max_abs_diff)}, tolerance {_fmt(d.tolerance)}"
    if isolation.ok:
        return [
            f"  run alone on ONNX Runtime's inputs, the node matches ({measured}):",
            "  it amplifies differences of its inputs that are within tolerance (an",
            "  ill-conditioned op) rather than computing wrongly; a larger --rtol accepts it",
        ]
    return [
        f"  run alone on ONNX Runtime's inputs, the node still diverges ({measured}):",
        "  its lowering is wrong",
    ]


def run(args: argparse.Namespace) -> int:
    model = existing_file(args.model, "model")
    if args.rtol < 0 or args.atol < 0:
        raise CliError("--rtol and --atol must be >= 0")
    shapes = input_shapes(args.input_shape)
    inputs = _inputs(args.inputs)

    from tensorsmith.cli.compare import compare
    from tensorsmith.cli.onnx_reference import ReferenceUnavailable

    try:
        report = compare(str(model), args.target, input_shapes=shapes or None, inputs=inputs,
                         rtol=args.rtol, atol=args.atol, device=args.device,
                         opt_level=args.opt_level, seed=args.seed)  # fmt: skip
    except ReferenceUnavailable as e:
        raise CliError(str(e)) from None
    print(json.dumps(report.to_json(), indent=2) if args.json else format_report(report))
    return 0 if report.ok else DIVERGED
