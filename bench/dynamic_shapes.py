"""What a dynamic-shape artifact costs: the same model compiled once with symbolic axes
and once per fixed shape, timed side by side with ONNX Runtime at each shape.

    python bench/dynamic_shapes.py --threads 2 --repeat 20

For each case (a bench model with named symbolic axes) and each shape: the dynamic
artifact (compiled once for all shapes), the static artifact compiled for exactly that
shape, and ONNX Runtime (given the dynamic model), interleaved in one process. Printed:
medians in ms, dynamic/static (the issue's bound is 1.15) and ORT/dynamic (above 1:
tensorsmith is faster). Quote the host's ISA with the numbers (the header prints it).

    python bench/dynamic_shapes.py --models resnet18 --hint batch=4

adds a dynamic artifact whose kernels are sized for the hinted sizes (``tensorsmith
compile --dim batch=1..4``), timed beside the others: "hinted ms" and hinted/static.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx

import tensorsmith.runtime as rt
from bench.measure import interleaved, relative_error
from bench.model_bench import ort_session
from bench.models import (
    bert_encoder,
    input_shapes,
    mobilenetv2,
    resnet18,
    resnet50,
    sample_inputs,
)
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

#: name -> (builder of the dynamic model, the shapes to time it at)
CASES: dict[str, tuple[Any, list[dict[str, int]]]] = {
    "resnet18": (lambda: resnet18(batch="batch"), [{"batch": 1}, {"batch": 4}]),
    "mobilenetv2": (lambda: mobilenetv2(batch="batch"), [{"batch": 1}, {"batch": 4}]),
    "resnet50": (lambda: resnet50(batch="batch"), [{"batch": 1}, {"batch": 4}]),
    "bert_encoder": (lambda: bert_encoder(batch="batch", seq="seq", layers=4, hidden=256),
                     [{"batch": 1, "seq": 128}, {"batch": 1, "seq": 32}, {"batch": 4, "seq": 64}]),
}


def _compile(model: onnx.ModelProto, path: Path, shapes: dict[str, Any] | None,
             hints: dict[str, int] | None = None) -> Path:
    mod, params = from_onnx(model, shape=shapes) if shapes else from_onnx(model)
    build(mod, target="llvm", params=params, size_hints=hints).export_library(path)
    return path


def bench_case(name: str, workdir: Path, repeat: int, warmup: int, threads: int,
               hints: dict[str, int] | None = None) -> list[dict[str, Any]]:
    make, sizes = CASES[name]
    model = make()
    dynamic = rt.load(_compile(model, workdir / f"{name}.dynamic.so", None), device="cpu",
                      num_threads=threads)
    hinted = rt.load(_compile(model, workdir / f"{name}.hinted.so", None, hints),
                     device="cpu", num_threads=threads) if hints else None
    session = ort_session(model, threads)
    rows = []
    for dims in sizes:
        feeds = sample_inputs(model, seed=1, dims=dims)
        tag = "_".join(f"{k}{v}" for k, v in dims.items())
        static = rt.load(_compile(model, workdir / f"{name}.{tag}.so",
                                  input_shapes(model, dims)), device="cpu", num_threads=threads)
        want = session.run(None, feeds)
        err = max(relative_error(g, w) for g, w in zip(dynamic.run(feeds), want))
        runs = [lambda f=feeds: dynamic.run(f), lambda m=static, f=feeds: m.run(f),
                lambda f=feeds: session.run(None, f)]
        if hinted is not None:
            err = max(err, *(relative_error(g, w) for g, w in zip(hinted.run(feeds), want)))
            runs.append(lambda f=feeds: hinted.run(f))
        stats = interleaved(runs, repeat=repeat, warmup=warmup)
        dyn, sta, ort_ = (s.median_ms for s in stats[:3])
        row = {"model": name, "dims": dims, "dynamic_ms": dyn, "static_ms": sta,
               "ort_ms": ort_, "dynamic_over_static": dyn / sta,
               "ort_over_dynamic": ort_ / dyn, "max_rel_error": err}
        if hinted is not None:
            row |= {"hints": hints, "hinted_ms": stats[3].median_ms,
                    "hinted_over_static": stats[3].median_ms / sta}
        rows.append(row)
        static.close()
    dynamic.close()
    if hinted is not None:
        hinted.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(CASES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--hint", action="append", default=[], metavar="NAME=SIZE",
                        help="also time a dynamic artifact sized for these (repeatable)")
    args = parser.parse_args(argv)
    hints = {k: int(v) for k, _, v in (h.partition("=") for h in args.hint)}
    os.environ.setdefault("TSM_NUM_THREADS", str(args.threads))
    env = environment(args.threads)
    print(f"# host: {env['processor'] or env['machine']}  isa: {env['isa']}  "
          f"threads: {args.threads}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows += bench_case(name, Path(tmp), args.repeat, args.warmup, args.threads,
                               hints or None)
    extra = ["hinted ms", "hinted/static"] if hints else []
    table = [[r["model"], ",".join(f"{k}={v}" for k, v in r["dims"].items()),
              f"{r['dynamic_ms']:.2f}", f"{r['static_ms']:.2f}", f"{r['ort_ms']:.2f}",
              f"{r['dynamic_over_static']:.2f}", f"{r['ort_over_dynamic']:.2f}",
              *([f"{r['hinted_ms']:.2f}", f"{r['hinted_over_static']:.2f}"] if hints else []),
              f"{r['max_rel_error']:.1e}"] for r in rows]
    print(format_table(["model", "dims", "dynamic ms", "static ms", "ORT ms",
                        "dynamic/static", "ORT/dynamic", *extra, "max rel err"], table))
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
