"""``tensorsmith compile``: ONNX model -> one artifact file."""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tensorsmith.cli._common import (
    CliError,
    existing_file,
    kernel_lines,
    named_kernels,
    writable_file,
)
from tensorsmith.cli.dims import add_dim_argument, dim_hints, dim_sizes

EPILOG = """\
examples:
  tensorsmith compile examples/mlp.onnx --target llvm --input-shape input:1,784 -o mlp.so
  tensorsmith compile resnet.onnx --input-shape data:8,3,224,224 --opt-level 3 -o resnet.so
  tensorsmith compile examples/mlp.onnx --input-shape input:1,784 --verbose  # pass times, kernels
  tensorsmith compile bert.onnx --dim batch=1 --dim sequence=128 -o bert.so

Symbolic dimensions of the model's inputs (such as a batch dimension 'N') stay symbolic
unless fixed: --input-shape fixes the whole shape of one input (and every named dimension
in it, for all inputs), --dim one named dimension. A target that needs static shapes
says which ones to give.
"""

TARGET_HELP = (
    "target to compile for, with its options: llvm (CPU), vulkan (SPIR-V), opencl, or any "
    "other target an installed codegen plug-in provides (default: llvm)"
)


def parse_input_shape(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """'NAME:1,3,224,224' -> [('NAME', (1, 3, 224, 224))]. Also tvmc's form, brackets
    around the dims and several inputs in one value: 'a:[1,3,224,224] b:[1,10]'. NAME
    may itself contain ':'."""
    items = re.split(r"(?<=\])\s+", text.strip()) if "]" in text else [text]
    return [_one_input_shape(item, text) for item in items]


def _one_input_shape(item: str, text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = item.rpartition(":")
    name, dims = name.strip(), dims.strip()
    if dims.startswith("[") and dims.endswith("]"):
        dims = dims[1:-1].strip()
    if not sep or not name or "[" in dims or "]" in dims:
        raise argparse.ArgumentTypeError(
            "expected NAME:D1,D2,... or NAME:[D1,D2,...] (for example input:1,3,224,224), "
            f"got '{text}'"
        )
    if not dims:
        return name, ()  # a scalar input
    shape = []
    for part in dims.split(","):
        part = part.strip()
        try:
            value = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"dimension '{part}' of --input-shape {text} is not a whole number"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"dimension {value} of --input-shape {text} must be >= 1"
            )
        shape.append(value)
    return name, tuple(shape)


def add_input_shape_argument(p: argparse.ArgumentParser) -> None:
    """``--input-shape`` (and tvmc's spelling, ``--input-shapes``) of compile, tune and
    compare: repeatable, each value one input or, in tvmc's form, several."""
    p.add_argument(
        "--input-shape",
        "--input-shapes",
        dest="input_shape",
        metavar="NAME:D1,D2,...",
        action="extend",
        type=parse_input_shape,
        default=[],
        help="shape of a graph input, e.g. input:1,3,224,224 (repeatable; tvmc's "
        "'input:[1,3,224,224] mask:[1,10]' works too)",
    )


def input_shapes(pairs: list[tuple[str, tuple[int, ...]]]) -> dict[str, tuple[int, ...]]:
    """The ``--input-shape`` values by input name; one name given two shapes is an error."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in pairs:
        if name in shapes and shapes[name] != shape:
            raise CliError(f"--input-shape given twice for '{name}' with different shapes")
        shapes[name] = shape
    return shapes


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compile",
        parents=parents,
        help="compile an ONNX model into one artifact file",
        description="Compile an ONNX model into one artifact file that tensorsmith-runtime "
        "loads (for the llvm target: a shared library with a C ABI).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="the ONNX model file (.onnx)")
    p.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="artifact to write (default: the model's name with the suffix of its target's "
        "artifacts, e.g. mlp.so for llvm, mlp.vulkan.tsm for vulkan)",
    )
    p.add_argument("-t", "--target", default="llvm", help=TARGET_HELP)
    add_input_shape_argument(p)
    add_dim_argument(p)
    p.add_argument(
        "-O",
        "--opt-level",
        type=int,
        choices=range(0, 4),
        metavar="N",
        help="optimization level 0-3 (default: the compiler's default)",
    )
    p.add_argument(
        "--records",
        metavar="PATH",
        help="tuning records (from 'tensorsmith tune'): the fastest schedule measured for "
        "each kernel replaces the default one",
    )
    p.add_argument(
        "--no-index-checks",
        action="store_true",
        help="do not check run-time indices of Gather, GatherElements, GatherND and the "
        "Scatters: an index out of range then gives an unspecified result (gathers clamp "
        "it) instead of failing the run with an error naming the node; saves one small "
        "pass over each input of indices",
    )
    p.add_argument(
        "--precision",
        metavar="P",
        default="fp32",
        help="fp32 (default), fp16 or bf16: store the weights and the tensors between "
        "kernels of a float32 model as float16 or bfloat16 (half the bytes), with "
        "convolutions and matrix products summing in float32 and softmax, normalizations "
        "and other sensitive ops kept in float32; inputs and outputs stay float32 "
        "(bf16: llvm only)",
    )
    p.set_defaults(func=run)


def _build_kwargs(build: Any, opt_level: int | None) -> dict[str, Any]:
    if opt_level is None:
        return {}
    try:
        params = inspect.signature(build).parameters
    except (TypeError, ValueError):
        params = {}
    accepts = "opt_level" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )
    if not accepts:
        raise CliError(
            "--opt-level is not supported by the installed tensorsmith-ir; "
            "leave it out to use the default optimization level"
        )
    return {"opt_level": opt_level}


def verbose_report(lib: Any, phases: list[tuple[str, float]]) -> str:
    """What --verbose adds: time per phase, per graph pass (and lowering and code
    generation, from ``CompiledModule.timings``), and the fused kernels with their ops."""
    lines = ["time"]
    for phase, seconds in phases:
        lines.append(f"  {phase:<34} {seconds * 1e3:10.3f} ms")
        if phase == "build":
            for name, pass_seconds in getattr(lib, "timings", []) or []:
                lines.append(f"    {name:<32} {pass_seconds * 1e3:10.3f} ms")
    plan = getattr(lib, "plan", None)
    kernels = named_kernels(plan.to_json() if plan is not None else {})
    lines.append(f"kernels ({len(kernels)})")
    lines += kernel_lines(kernels)
    return "\n".join(lines)


@contextmanager
def plain_record_warnings() -> Iterator[None]:
    """Print each skipped tuning record as one ``warning:`` line on stderr: the user
    edits the records file, not tensorsmith's source line that warned."""
    from tensorsmith.ir.records import RecordWarning

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RecordWarning)
            yield
    finally:
        for w in caught:
            if issubclass(w.category, RecordWarning):
                print(f"warning: {w.message}", file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def run(args: argparse.Namespace) -> int:
    model = existing_file(args.model, "model")
    shapes = input_shapes(args.input_shape)
    dims = dim_sizes(args.dim, ranges=True)
    hints = dim_hints(args.dim)
    verbose = bool(getattr(args, "verbose", False))

    # heavy imports only here, so `tensorsmith --help` stays fast
    from tensorsmith.frontend.onnx import from_onnx, require_static
    from tensorsmith.ir import build
    from tensorsmith.ir.symbolic import SymbolicDimError
    from tensorsmith.ir.target import Target

    target = Target.parse(args.target)
    # named by the target's record, so one model's artifacts for two targets never collide
    output = writable_file(args.output or str(model.with_suffix(target.info.suffix)), "artifact")

    t0 = time.perf_counter()
    mod, params = from_onnx(str(model), shapes or None, dims=dims or None)
    t1 = time.perf_counter()
    kwargs = _build_kwargs(build, args.opt_level)
    if args.records:
        kwargs["records"] = str(existing_file(args.records, "records file"))
    if args.no_index_checks:
        kwargs["index_checks"] = False
    if hints:
        kwargs["size_hints"] = hints
    if args.precision != "fp32":  # (checked by build, which names the values it takes)
        kwargs["precision"] = args.precision
    with plain_record_warnings():
        try:
            lib = build(mod, target=target, params=params, **kwargs)
        except SymbolicDimError as e:  # the target needs a size the model leaves open
            require_static(mod, str(model), because=f"for target {args.target}: {e}")
            raise
    t2 = time.perf_counter()
    lib.export_library(str(output))
    t3 = time.perf_counter()

    if verbose:
        print(verbose_report(lib, [("import", t1 - t0), ("build", t2 - t1), ("export", t3 - t2)]))
    size = Path(output).stat().st_size
    print(f"compiled {model} for {args.target} -> {output} ({size:,} bytes) in {t3 - t0:.2f} s")
    return 0
