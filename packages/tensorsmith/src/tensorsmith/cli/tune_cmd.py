"""``tensorsmith tune``: search schedules for a model's kernels, append tuning records."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
from pathlib import Path
from typing import Any

from tensorsmith.cli._common import CliError, existing_file, positive_int, writable_file
from tensorsmith.cli.compile_cmd import TARGET_HELP, add_input_shape_argument, input_shapes
from tensorsmith.cli.extras import require_device_binding, require_tuner

PLOT_INSTALL = "pip install 'tensorsmith-autotune[plot]'"

EPILOG = """\
examples:
  tensorsmith tune examples/mlp.onnx --input-shape input:1,784 --trials 200 --records mlp.jsonl
  tensorsmith compile examples/mlp.onnx --input-shape input:1,784 --records mlp.jsonl -o mlp.so
  tensorsmith tune resnet50.onnx --input-shape data:1,3,224,224 --trials 2000 \\
      --records resnet50.jsonl --dask tcp://scheduler:8786
  tensorsmith tune examples/mlp.onnx --input-shape input:1,784 -t vulkan --trials 100 \\
      --records mlp.vk.jsonl

For llvm the search covers the CPU schedule sketches (tiles, loop orders, vectorizing,
threads). For vulkan and opencl it covers the sizes of the default GPU schedule: the
workgroup and register tiles and the reduction step of matrix products and
convolutions, and the invocations per workgroup of the other kernels; candidates and
the default schedule run on the first Vulkan or OpenCL device, timed by the device.

--trials counts every record of the model's kernels in the records file, so running the
same command again after an interruption (Ctrl-C, a kill, a crash) finishes the job: what
was measured is kept and not measured again. Measurements that crash, hang or compute a
wrong result are recorded as errors; tuning goes on. At the end each kernel's fastest few
candidates are measured again next to its default schedule (--confirm-top), then the
whole model is built with each kernel's fastest few (--in-model-top) and timed: the
candidate fastest inside the model is recorded as the kernel's final choice, which
compile applies.

On a terminal, progress bars show the kernel being tuned (i/N), its trials, its best time
so far (timed alone, as the search times candidates) and the time left. The final table
is measured differently, inside the model: it is built as 'compile' builds it, without
and with the records, and both builds are timed together as 'run --profile' times them;
each kernel's default and tuned milliseconds per run and the model's kernel and wall
time per run all come from those runs. Kernels are named as 'inspect' and 'run --profile'
name them (fused_matmul_add_relu#40de: the digits begin the workload key in the records).

A PNG of the tuning curves (each kernel's best time against its trials) is written to
--plot, by default next to the records (RECORDS with .png); it needs matplotlib:
pip install 'tensorsmith-autotune[plot]'.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "tune",
        parents=parents,
        help="auto-tune the schedules of a model's kernels (writes tuning records)",
        description="Search schedules for each distinct kernel of an ONNX model, measuring "
        "candidates on this machine and appending one JSON line per measurement to the "
        "records file; 'tensorsmith compile --records' applies the best ones.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="the ONNX model file (.onnx)")
    p.add_argument("-t", "--target", default="llvm",
                   help=TARGET_HELP + "; kernels for vulkan and opencl are measured on the "
                   "first device of that API (--dask: on workers with that resource)")
    p.add_argument("--trials", type=positive_int, default=200, metavar="N",
                   help="measurements in total over all kernels, records already in the "
                   "file included (default: 200)")
    p.add_argument("--records", metavar="PATH",
                   help="tuning records to append to (and resume from); default: the "
                   "model's name with .tune.jsonl")
    add_input_shape_argument(p)
    p.add_argument("-O", "--opt-level", type=int, choices=range(0, 4), metavar="N", default=2,
                   help="optimization level 0-3, as for compile (default: 2)")
    p.add_argument("--per-round", type=positive_int, default=16, metavar="N",
                   help="candidates measured per round of one kernel (default: 16)")
    p.add_argument("--builders", type=positive_int, default=min(2, os.cpu_count() or 1),
                   metavar="N", help="parallel compile processes (default: 2)")
    p.add_argument("--timeout", type=float, default=20.0, metavar="SECONDS",
                   help="time limit of one candidate's measurement (default: 20)")
    p.add_argument("--min-repeat-ms", type=float, default=50.0, metavar="MS",
                   help="minimum time spent timing each candidate (default: 50)")
    p.add_argument("--cache-flush-mb", type=float, default=None, metavar="MB",
                   help="write this many MB before each timed run, so kernels are timed "
                   "with cold caches as they run inside the model (default: 64, over the "
                   "last-level cache of most CPUs; 0: time warm, repeated runs; llvm only: "
                   "GPU kernels are timed on the device, without it)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search")
    p.add_argument("--confirm-top", type=int, default=3, metavar="K",
                   help="at the end, re-measure each kernel's K fastest candidates with its "
                   "default schedule, 3 rounds, and record the lowest median as the final "
                   "choice (default: 3; 0: the single fastest timing is applied)")
    p.add_argument("--in-model-top", type=int, default=6, metavar="K",
                   help="finally, build the whole model with each kernel's K fastest "
                   "candidates (one build per rank) and the defaults, time them "
                   "interleaved and record each kernel's fastest in place (default: 6; "
                   "0: skip; not with --dask)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="measure on a Dask cluster (e.g. tcp://host:8786): builds run on "
                   "any worker, timings on workers with a resource named after the target "
                   "(dask-worker --resources llvm=1); needs dask.distributed")
    p.add_argument("--plot", metavar="PATH",
                   help="write the tuning curves to this PNG (default: RECORDS with .png, "
                   "when matplotlib is installed); needs matplotlib: " + PLOT_INSTALL)
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG of the curves")
    p.set_defaults(func=run)


def _flush(args: argparse.Namespace) -> dict[str, float]:
    """The runner's cache flush option, where the command line sets one."""
    return {} if args.cache_flush_mb is None else {"flush_mb": args.cache_flush_mb}


def _measurers(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(builder, runner, client or None): local processes, or a Dask cluster."""
    from tensorsmith.autotune.measure import LocalBuilder, LocalRunner

    if not args.dask:
        return (LocalBuilder(args.builders),
                LocalRunner(timeout=args.timeout, min_repeat_ms=args.min_repeat_ms,
                            **_flush(args)), None)
    try:
        from distributed import Client

        from tensorsmith.autotune.dask_measure import DaskBuilder, DaskRunner
    except ImportError as e:
        raise CliError(f"--dask needs dask.distributed ({e}); install it with "
                       "pip install 'tensorsmith-autotune[dask]'") from None
    try:
        client = Client(args.dask, timeout=30)
    except OSError as e:
        raise CliError(f"cannot reach the Dask scheduler at {args.dask}: {e}") from None
    runner = DaskRunner(client, args.target.split()[0], timeout=args.timeout,
                        min_repeat_ms=args.min_repeat_ms, **_flush(args))
    return DaskBuilder(client), runner, client


def run(args: argparse.Namespace) -> int:
    model = existing_file(args.model, "model")
    records = writable_file(args.records or str(model.with_suffix(".tune.jsonl")), "records")
    shapes = input_shapes(args.input_shape)
    if args.timeout <= 0 or args.min_repeat_ms <= 0:
        raise CliError("--timeout and --min-repeat-ms must be positive")
    if args.cache_flush_mb is not None and args.cache_flush_mb < 0:
        raise CliError("--cache-flush-mb must be 0 or more")
    require_tuner()
    png = _plot_path(args, records)

    from tensorsmith.autotune.progress import TuneProgress
    from tensorsmith.autotune.task import extract_tasks
    from tensorsmith.autotune.tuner import Tuner, tunable_kinds
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir.target import Target

    target = Target.parse(args.target)
    if not target.info.tunable:
        raise CliError(f"cannot tune for target {target.kind!r}; use one of "
                       f"{', '.join(tunable_kinds())}")
    if not args.dask:  # with --dask the workers measure, with what they have installed
        require_device_binding(target.info.device, f"tuning for target {target.kind!r}")
    mod, params = from_onnx(str(model), shapes or None, static=True)  # measures kernels
    tasks = extract_tasks(mod, params, target, opt_level=args.opt_level)
    if not tasks:
        raise CliError(f"{model} has no kernels to tune")
    total_weight = sum(t.weight for t in tasks)
    print(f"{model}: {len(tasks)} distinct kernels ({total_weight} in the model), "
          f"{args.trials} trials, records {records}")
    builder, runner, client = _measurers(args)
    tuner = Tuner(tasks, records, args.trials, builder=builder, runner=runner,
                  per_round=args.per_round, seed=args.seed,
                  confirm_top=max(0, args.confirm_top))
    if tuner.resumed:
        print(f"resuming: {tuner.resumed} measurements of these kernels already in {records}",
              flush=True)
    progress = tuner.callback = TuneProgress(args.trials, tuner.resumed)
    try:
        with progress:  # ends the bars' lines before anything else is printed
            result = tuner.run()
    finally:
        builder.close()
        runner.close()
        if client is not None:
            client.close()
    print(f"searched: {result.new_trials} new measurements ({result.resumed_trials} resumed), "
          f"{sum(result.errors)} failed", flush=True)
    if args.in_model_top > 0 and not args.dask:
        _choose_in_model(mod, params, target, tasks, records, args)
    _report(mod, params, target, tasks, records, result, args)
    if png is not None:
        _plot(result, png)
    print(f"apply them: {compile_command(args, records)}")
    return 0


def _plot_path(args: argparse.Namespace, records: Path) -> Path | None:
    """Where the curves go, or None. Checked before tuning: --plot without matplotlib
    is an error then, not after an hour of measuring."""
    if args.no_plot:
        return None
    if args.plot:
        path = writable_file(args.plot, "plot")
        if importlib.util.find_spec("matplotlib") is None:
            raise CliError(f"--plot draws with matplotlib, which is not installed; install "
                           f"it with: {PLOT_INSTALL}")
        return path
    return records.with_suffix(".png")


def _plot(result: Any, png: Path) -> None:
    from tensorsmith.autotune.plot import PlotUnavailable, plot_curves

    try:
        plot_curves(result, png)
    except PlotUnavailable:
        print(f"tuning curves: not drawn, matplotlib is not installed ({PLOT_INSTALL}; "
              "--no-plot skips them)")
        return
    print(f"tuning curves: {png}")


def _report(mod: Any, params: Any, target: Any, tasks: list[Any], records: Path,
            result: Any, args: argparse.Namespace) -> None:
    """The account of the run, timed inside the model (tune_report.py says why only
    there); with --dask the model is not timed here, where its device may not be."""
    if args.dask:
        print("with --dask the model is not timed here: compile it with the line below and "
              "time it on its device with 'tensorsmith run MODEL.so --profile'")
        return
    from tensorsmith.autotune.outcome import measure_outcome
    from tensorsmith.cli.tune_report import outcome_lines

    outcome = measure_outcome(mod, params, target, tasks, records, opt_level=args.opt_level,
                              progress=lambda m: print(f"the result: {m}", flush=True))
    print("\n".join(outcome_lines(outcome, result.trials, result.errors)))


def compile_command(args: argparse.Namespace, records: object) -> str:
    """The ``tensorsmith compile`` line that builds what was tuned: the same model, target,
    input shapes and optimization level, so it works as printed."""
    words = ["tensorsmith", "compile", str(args.model)]
    if args.target != "llvm":
        words += ["--target", args.target]
    for name, shape in input_shapes(args.input_shape).items():
        words += ["--input-shape", f"{name}:{','.join(map(str, shape))}"]
    if args.opt_level != 2:
        words += ["-O", str(args.opt_level)]
    words += ["--records", str(records)]
    return shlex.join(words)


def _choose_in_model(mod: Any, params: Any, target: Any, tasks: list[Any], records: Any,
                     args: argparse.Namespace) -> None:
    """The final word: each kernel's front-runners timed inside the whole model."""
    from tensorsmith.autotune.in_model import choose_in_model

    choices = choose_in_model(mod, params, str(target), tasks, records, top=args.in_model_top,
                              opt_level=args.opt_level,
                              progress=lambda m: print(f"in the model: {m}", flush=True))
    if choices:
        print(f"in the model: each kernel's choice recorded in {records}", flush=True)
