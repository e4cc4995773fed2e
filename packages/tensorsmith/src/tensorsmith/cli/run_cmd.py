"""``tensorsmith run``: load an artifact and run it once or many times."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tensorsmith.cli._common import (
    CliError,
    describe,
    existing_file,
    positive_int,
    summarize,
    writable_file,
)
from tensorsmith.cli.dims import add_dim_argument, dim_sizes, sized_shape

EPILOG = """\
examples:
  tensorsmith run mlp.so                                   # random inputs, print outputs
  tensorsmith run mlp.so --device cpu --repeat 20          # and time 20 runs
  tensorsmith run mlp.so --inputs in.npz --outputs out.npz
  tensorsmith run resnet.so --profile --repeat 50 --trace resnet.trace.json

--inputs is a .npz file (numpy.savez) keyed by graph input name; --outputs is written
the same way, keyed by graph output name. Without --inputs, random inputs of the right
shapes and dtypes are used (seeded by --seed, so runs are reproducible).

--profile times each kernel over --repeat runs (default 10) after one warm-up and prints a
table, slowest first: the kernel, its calls, total and mean time, its share of all kernel
time, and the fused ops and model nodes it holds (from the artifact's metadata). --trace
also writes the runs as a Chrome trace, one event per kernel call: open it in
chrome://tracing or https://ui.perfetto.dev.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run",
        parents=parents,
        help="run a compiled artifact",
        description="Load an artifact with tensorsmith-runtime, run it, and print a summary of "
        "its outputs (and latencies with --repeat).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("artifact", help="artifact written by 'tensorsmith compile'")
    p.add_argument(
        "-d",
        "--device",
        default=None,
        help="device to run on: cpu, vulkan or opencl, or kind:N for the N-th of a kind "
        "(default: the first device of the kind the artifact was compiled for)",
    )
    p.add_argument(
        "-i",
        "--inputs",
        metavar="NPZ",
        help=".npz with one array per graph input (default: random inputs)",
    )
    p.add_argument(
        "-o",
        "--outputs",
        metavar="NPZ",
        help="write the outputs to this .npz, keyed by output name",
    )
    p.add_argument(
        "-r",
        "--repeat",
        type=positive_int,
        metavar="N",
        help="time N runs after one warm-up; print median and min latency",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    add_dim_argument(p, help="size of a symbolic dimension for the random inputs, e.g. "
                     "batch=8 (repeatable; a model with dynamic shapes needs its sizes)")
    p.add_argument(
        "--profile",
        action="store_true",
        help="time each kernel over --repeat runs (default 10) and print a per-kernel table",
    )
    p.add_argument(
        "--trace",
        metavar="JSON",
        help="with --profile: write a Chrome trace (one event per kernel call) to this file",
    )
    p.set_defaults(func=run)


def _expected(module: Any) -> list[dict]:
    return list(module.input_info)


def random_inputs(infos: list[dict], seed: int, sizes: dict[str, int] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded random inputs; ``sizes`` gives the symbolic dimensions theirs (--dim)."""
    rng = np.random.default_rng(seed)
    feed: dict[str, np.ndarray] = {}
    for info in infos:
        shape = sized_shape(list(info["shape"]), sizes or {}, f"input '{info['name']}'")
        dtype = np.dtype(info["dtype"])
        if dtype.kind == "f":
            feed[info["name"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feed[info["name"]] = rng.integers(0, 10, size=shape).astype(dtype)
        elif dtype.kind == "b":
            feed[info["name"]] = rng.random(shape) < 0.5
        else:
            raise CliError(f"cannot make random values for input {describe(info)}; pass --inputs")
    return feed


def load_inputs(path: Path, infos: list[dict]) -> dict[str, np.ndarray]:
    expected_list = ", ".join(describe(i) for i in infos) or "(none)"
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise CliError(f"cannot read inputs '{path}': not a .npz file ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise CliError(
            f"inputs '{path}' is a single .npy array; save the inputs with "
            f"numpy.savez(path, NAME=array, ...) keyed by input name: {expected_list}"
        )
    with data:
        given = {name: data[name] for name in data.files}
    names = [i["name"] for i in infos]
    missing = [n for n in names if n not in given]
    unknown = [n for n in given if n not in names]
    if missing or unknown:
        problems = []
        if missing:
            problems.append("missing " + ", ".join(repr(n) for n in missing))
        if unknown:
            problems.append("unknown " + ", ".join(repr(n) for n in unknown))
        raise CliError(
            f"inputs '{path}' do not match the model: {'; '.join(problems)}. "
            f"The model's inputs are: {expected_list}"
        )
    feed: dict[str, np.ndarray] = {}
    for info in infos:
        name = info["name"]
        array = given[name]
        dtype = np.dtype(info["dtype"])
        shape = tuple(info["shape"])
        if tuple(array.shape) != shape and all(isinstance(d, int | np.integer) for d in shape):
            raise CliError(
                f"input '{name}' in '{path}' has shape {list(array.shape)}, "
                f"the model expects {describe(info)}"
            )
        if array.dtype != dtype:
            if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                raise CliError(
                    f"input '{name}' in '{path}' is {array.dtype}, the model expects "
                    f"{describe(info)}"
                )
            print(f"note: converting input '{name}' from {array.dtype} to {dtype}", file=sys.stderr)
            array = array.astype(dtype)
        feed[name] = np.ascontiguousarray(array)
    return feed


def run(args: argparse.Namespace) -> int:
    artifact = existing_file(args.artifact, "artifact")
    inputs_path = existing_file(args.inputs, "inputs file") if args.inputs else None
    outputs_path = writable_file(args.outputs, "outputs file") if args.outputs else None
    trace_path = writable_file(args.trace, "trace file") if args.trace else None
    if trace_path is not None and not args.profile:
        raise CliError("--trace needs --profile (the trace holds the profiled runs)")

    import tensorsmith.runtime as rt

    module = rt.load(str(artifact), device=args.device)
    device = args.device or str(module.device)
    infos = _expected(module)
    if inputs_path is not None:
        feed = load_inputs(inputs_path, infos)
    else:
        feed = random_inputs(infos, args.seed, dim_sizes(args.dim))

    outputs = list(module.run(feed))
    names = [o["name"] for o in module.output_info]
    if len(names) != len(outputs):  # pragma: no cover - a runtime bug
        raise RuntimeError(
            f"artifact declares {len(names)} outputs but run returned {len(outputs)}"
        )

    source = f"inputs from {inputs_path}" if inputs_path else f"random inputs (seed {args.seed})"
    print(f"ran {artifact} on {device} with {source}")
    print("outputs:")
    for name, value in zip(names, outputs):
        print(summarize(name, value))

    if outputs_path is not None:
        np.savez(outputs_path, **{name: np.asarray(v) for name, v in zip(names, outputs)})
        print(f"wrote outputs to {outputs_path}")

    if args.profile:
        _profile(module, feed, args.repeat or DEFAULT_PROFILE_RUNS, trace_path, str(artifact))
    elif args.repeat:
        times = []
        module.run(feed)  # warm-up
        for _ in range(args.repeat):
            start = time.perf_counter()
            module.run(feed)
            times.append((time.perf_counter() - start) * 1e3)
        print(
            f"latency over {args.repeat} runs: median {statistics.median(times):.3f} ms, "
            f"min {min(times):.3f} ms"
        )
    return 0


DEFAULT_PROFILE_RUNS = 10


def _profile(
    module: Any, feed: dict[str, np.ndarray], repeat: int, trace_path: Path | None, label: str
) -> None:
    from tensorsmith.cli.profile_view import kernel_table, write_trace

    report = module.profile(feed, repeat=repeat)
    print(f"profile over {repeat} runs (after one warm-up):")
    print(kernel_table(report.by_kernel(module.metadata), report.run_ms))
    if trace_path is not None:
        write_trace(trace_path, report.chrome_trace(module.metadata, label=label))
        print(f"wrote Chrome trace to {trace_path} (open in chrome://tracing or ui.perfetto.dev)")
