"""Benchmark tensorsmith on CPU against ONNX Runtime (models) and numpy's BLAS (GEMM).

    python bench/run.py                        # all models, then the GEMM table
    python bench/run.py --models resnet18,bert_encoder --no-gemm --repeat 50
    python bench/run.py --gemm-only --gemm-sizes 512,1024,32x50257x768 --gemm-b weight
    python bench/run.py --per-op 10            # also the 10 slowest kernels per model
    python bench/run.py --models bert_encoder --no-gemm --records bert_encoder=bert.jsonl
    nox -s bench -- --models resnet50          # the same, against a fresh install

Prints the tables and writes them, with the machine and versions, to
bench/results/<date>_<time>.json. Nothing here asserts on times. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/run.py` puts bench/, not the root, on the path
    sys.path.insert(0, str(ROOT))

from bench.gemm import bench_gemm, parse_shapes  # noqa: E402
from bench.model_bench import BENCH_CONFIGS, EXTRA_CONFIGS, ModelResult, bench_model  # noqa: E402
from bench.report import (  # noqa: E402
    environment,
    gemm_table,
    load_average,
    model_table,
    per_op_tables,
    write_json,
)

RESULTS_DIR = ROOT / "bench" / "results"
DEFAULT_GEMM_SIZES = "256,512,1024,2048,4096,32x50257x768"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    known = {**BENCH_CONFIGS, **EXTRA_CONFIGS}
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--models",
        default=",".join(BENCH_CONFIGS),
        help=f"comma-separated models (default: %(default)s; also: {', '.join(EXTRA_CONFIGS)})",
    )
    gemm = p.add_mutually_exclusive_group()
    gemm.add_argument("--gemm-only", action="store_true", help="only the GEMM table")
    gemm.add_argument("--no-gemm", action="store_true", help="no GEMM table")
    p.add_argument("--gemm-sizes", default=DEFAULT_GEMM_SIZES,
                   help="n (square) or MxNxK, comma-separated (default: %(default)s)")
    p.add_argument("--gemm-b", choices=("input", "weight", "both"), default="both",
                   help="b a second input, a constant weight, or each shape both ways "
                   "(default: %(default)s)")
    p.add_argument("--repeat", type=int, default=30, help="timed runs each (default: %(default)s)")
    p.add_argument(
        "--warmup", type=int, default=5, help="untimed runs first (default: %(default)s)"
    )
    p.add_argument("--threads", type=int, default=2, help="threads for all (default: %(default)s)")
    p.add_argument(
        "--per-op",
        type=int,
        nargs="?",
        const=10,
        default=0,
        metavar="N",
        help="print the N slowest steps of each model's profile (default N: 10)",
    )
    p.add_argument(
        "--records",
        action="append",
        default=[],
        metavar="MODEL=PATH",
        help="tuning records for MODEL (repeatable): it is also compiled with them, and the "
        "untuned build, the tuned build and ORT are timed together",
    )
    p.add_argument(
        "--json-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where the JSON results go (default: bench/results)",
    )
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in known]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    records = {}
    for item in args.records:
        model, sep, path = item.partition("=")
        if not sep or model not in args.models or not Path(path).is_file():
            p.error(f"--records {item}: expected MODEL=PATH, a model of --models and a file")
        records[model] = path
    args.records = records
    try:
        args.gemm_sizes = parse_shapes(args.gemm_sizes, args.gemm_b)
    except ValueError:
        p.error(f"--gemm-sizes {args.gemm_sizes}: expected n or MxNxK, comma-separated")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def run_models(args: argparse.Namespace, workdir: Path) -> list[ModelResult]:
    configs = {**BENCH_CONFIGS, **EXTRA_CONFIGS}
    results = []
    for name in args.models:
        print(f"  {name} ...", file=sys.stderr, flush=True)
        result = bench_model(
            name,
            configs[name],
            workdir,
            repeat=args.repeat,
            warmup=args.warmup,
            threads=args.threads,
            per_op=args.per_op,
            records=args.records.get(name),
        )
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = dict(vars(args), json_dir=str(args.json_dir))
    payload: dict = {"environment": environment(args.threads), "args": settings}
    tables = []
    with tempfile.TemporaryDirectory(prefix="tsm-bench-") as tmp:
        workdir = Path(tmp)
        if not args.gemm_only and args.models:
            print("benchmarking models", file=sys.stderr, flush=True)
            results = run_models(args, workdir)
            payload["models"] = [r.as_dict() for r in results]
            tables.append(model_table(results, args.threads))
            if args.per_op:
                tables.append(per_op_tables(results))
        if not args.no_gemm and args.gemm_sizes:
            print("benchmarking GEMM", file=sys.stderr, flush=True)
            gemm, info = bench_gemm(
                args.gemm_sizes,
                workdir,
                repeat=args.repeat,
                warmup=min(args.warmup, 3),
                threads=args.threads,
            )
            payload["gemm"] = [r.as_dict() for r in gemm]
            payload["numpy_blas"] = info
            tables.append(gemm_table(gemm, info, args.threads))
    print("\n\n".join(t for t in tables if t))
    start_load, end_load = payload["environment"]["load_average"], load_average()
    payload["load_average_at_end"] = end_load
    if start_load and end_load:
        print(
            f"\nload average (1 min) at start {start_load[0]:.2f}, at end {end_load[0]:.2f}, "
            f"on {os.cpu_count()} CPUs (other load on the machine skews the times)"
        )
    path = write_json(args.json_dir, payload)
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
