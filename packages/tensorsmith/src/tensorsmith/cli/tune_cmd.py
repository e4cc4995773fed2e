"""``tensorsmith tune``: search schedules for a model's kernels, append tuning records."""

from __future__ import annotations

import argparse
import math
import os
import shlex
from typing import Any

from tensorsmith.cli._common import CliError, existing_file, positive_int, writable_file
from tensorsmith.cli.compile_cmd import TARGET_HELP, add_input_shape_argument, input_shapes

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
was measured is kept and not measured again. A PNG of the tuning curves is written next
to the records (RECORDS with .png). Measurements that crash, hang or compute a wrong
result are recorded as errors; tuning goes on. At the end each kernel's fastest few
candidates are measured again next to its default schedule (--confirm-top), then the
whole model is built with each kernel's fastest few (--in-model-top) and timed: the
candidate fastest inside the model is recorded as the kernel's final choice, which
compile applies.
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

    from tensorsmith.autotune.plot import plot_curves
    from tensorsmith.autotune.progress import ProgressBar
    from tensorsmith.autotune.task import extract_tasks
    from tensorsmith.autotune.tuner import TUNABLE, Tuner
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir.target import Target

    target = Target.parse(args.target)
    if target.kind not in TUNABLE:
        raise CliError(f"cannot tune for target {target.kind!r}; use one of "
                       f"{', '.join(TUNABLE)}")
    mod, params = from_onnx(str(model), shapes or None)
    tasks = extract_tasks(mod, params, target, opt_level=args.opt_level)
    if not tasks:
        raise CliError(f"{model} has no kernels to tune")
    total_weight = sum(t.weight for t in tasks)
    print(f"{model}: {len(tasks)} distinct kernels ({total_weight} in the model), "
          f"{args.trials} trials, records {records}")
    builder, runner, client = _measurers(args)
    bar = ProgressBar()
    tuner = Tuner(tasks, records, args.trials, builder=builder, runner=runner,
                  per_round=args.per_round, seed=args.seed, callback=bar,
                  confirm_top=max(0, args.confirm_top), on_confirm=_confirmed)
    if tuner.resumed:
        print(f"resuming: {tuner.resumed} measurements of these kernels already in {records}")
    try:
        result = tuner.run()
    finally:
        bar.close()
        builder.close()
        runner.close()
        if client is not None:
            client.close()
    _summary(result)
    if args.in_model_top > 0 and not args.dask:
        _choose_in_model(mod, params, target, tasks, records, args)
    if not args.no_plot:
        png = records.with_suffix(".png")
        backend = plot_curves(result, png)
        print(f"tuning curves: {png} ({backend})")
    print(f"apply them: {compile_command(args, records)}")
    return 0


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
    default = sum(c.ms[0] for c in choices if c.ms)
    chosen = sum(c.ms[c.chosen] for c in choices if c.ms)
    for c in choices:
        if c.ms and c.chosen:
            print(f"  {c.task.label}: {c.ms[0]:.3f} ms -> {c.ms[c.chosen]:.3f} ms "
                  f"(candidate ranked {c.chosen}, {c.task.weight} uses)")
    if chosen > 0:
        print(f"in the model, the kernels' time per run: default schedules {default:.3f} ms, "
              f"chosen {chosen:.3f} ms ({default / chosen:.2f}x); build applies the choices")


def _confirmed(task: Any, items: list[Any], index: int) -> None:
    """One line per kernel re-measured at the end: the medians, the choice."""
    medians = ", ".join(_ms(x.median) for x in items)
    choice = ("none (all failed)" if index < 0 else "the default schedule" if index == 0
              else f"candidate {index}")
    print(f"re-measured {task.label}: default, top {len(items) - 1} medians {medians} ms "
          f"-> {choice}", flush=True)


def e2e_default_remeasured(result: Any) -> float:
    """Weighted sum of the defaults' re-measured medians (only where a choice was made)."""
    from tensorsmith.autotune.tuner import e2e

    pairs = [(t.weight, d) for t, d, c in zip(result.tasks, result.remeasured_default_seconds,
                                              result.selected_seconds) if math.isfinite(c)]
    return e2e([w for w, _ in pairs], [d for _, d in pairs]) if pairs else math.inf


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f}" if math.isfinite(seconds) else "-"


def _summary(result: Any) -> None:
    rows = []
    chosen = result.selected_seconds or [math.inf] * len(result.tasks)
    again = result.remeasured_default_seconds or [math.inf] * len(result.tasks)
    for t, d, b, n, err, c, d2 in zip(result.tasks, result.default_seconds, result.best_seconds,
                                      result.trials, result.errors, chosen, again):
        speedup = f"{d / b:.2f}x" if math.isfinite(d) and math.isfinite(b) else "-"
        gflops = f"{t.flops / b / 1e9:.2f}" if math.isfinite(b) else "-"
        vs = f"{d2 / c:.2f}x" if math.isfinite(d2) and math.isfinite(c) else "-"
        rows.append((t.label, str(t.weight), _ms(d), _ms(b), speedup, gflops, str(n), str(err),
                     _ms(c), vs))
    head = ("kernel", "uses", "default ms", "best ms", "speedup", "GFLOP/s", "trials", "errors",
            "chosen ms", "vs default")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                    enumerate(zip(head, widths))))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(r, widths))))
    d, b = result.e2e_seconds("default"), result.e2e_seconds("best")
    measured = sum(math.isfinite(x) for x in result.best_seconds)
    partial = (f", over the {measured} of {len(rows)} kernels measured so far"
               if measured < len(rows) else "")
    print(f"estimated end-to-end kernel time: default {_ms(d)} ms, tuned {_ms(b)} ms"
          f"{partial} ({result.new_trials} new measurements, {result.resumed_trials} resumed)")
    print("(best ms: the fastest single timing of the search, speedup: over the default's "
          "single timing; chosen ms: median of the final choice re-measured next to the default, "
          "vs default: the default's median over it, '-' where this run made none)")
    c, d2 = result.e2e_seconds("selected"), e2e_default_remeasured(result)
    if math.isfinite(c) and math.isfinite(d2):
        print(f"re-measured side by side: default {_ms(d2)} ms, chosen {_ms(c)} ms "
              f"({d2 / c:.2f}x)")
