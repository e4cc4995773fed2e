"""How good is the auto-scheduler's cost model, and does model-guided search pay off?

    python bench/cost_model_study.py random --n 600          # measure random candidates
    python bench/cost_model_study.py fit                     # Spearman on held-out ones
    python bench/cost_model_study.py search --seeds 0,1      # model-guided tuning runs
    python bench/cost_model_study.py compare                 # search vs random curves

Each subcommand works on the tasks of ``--tasks`` (default: a ResNet-50 3x3 convolution
and a BERT-encoder dense layer, see ``bench/study_tasks.py``) and keeps its data in
``--out`` (default bench/results/study/), one records file per task and phase, so every
phase resumes after a kill and the analysis can be rerun without measuring again.
Nothing asserts on a time; bench/cost_model_study.md says what the numbers were.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.study_tasks import DEFAULT_TASKS, find_task  # noqa: E402

OUT = ROOT / "bench" / "results" / "study"


def task_file(out: Path, task_label: str, phase: str) -> Path:
    """``<out>/<label>.<phase>.jsonl`` with the label made file-name safe."""
    safe = task_label.replace("#", "-")
    return out / f"{safe}.{phase}.jsonl"


def cmd_random(args: argparse.Namespace) -> None:
    from bench.study_measure import measure_random

    for spec in args.tasks:
        task = find_task(spec)
        print(f"{spec}: {task.flops / 1e6:.1f} MFLOP, measuring {args.n} random candidates",
              file=sys.stderr, flush=True)
        measure_random(task, task_file(args.out, task.label, "random"), args.n, seed=args.seed,
                       min_repeat_ms=args.min_repeat_ms)


def cmd_fit(args: argparse.Namespace) -> None:
    from bench.study_fit import fit_report

    for spec in args.tasks:
        task = find_task(spec)
        print(fit_report(task, task_file(args.out, task.label, "random"), splits=args.splits,
                         train_frac=args.train_frac))


def cmd_search(args: argparse.Namespace) -> None:
    from bench.study_search import run_search

    for spec in args.tasks:
        task = find_task(spec)
        for seed in args.seeds:
            phase = f"search{args.tag}{seed}"
            run_search(task, task_file(args.out, task.label, phase), args.budget, seed=seed,
                       min_repeat_ms=args.min_repeat_ms, population=args.population,
                       generations=args.generations)


def cmd_compare(args: argparse.Namespace) -> None:
    from bench.study_search import compare_report

    for spec in args.tasks:
        task = find_task(spec)
        searches = sorted(args.out.glob(task_file(args.out, task.label, "search*").name))
        print(compare_report(task, task_file(args.out, task.label, "random"), searches,
                             remeasure=args.remeasure, min_repeat_ms=args.min_repeat_ms))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                   help="comma-separated model:label or model:index (default: %(default)s)")
    p.add_argument("--out", type=Path, default=OUT, help="data folder (default: %(default)s)")
    p.add_argument("--min-repeat-ms", type=float, default=30.0,
                   help="time spent timing each candidate (default: %(default)s)")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("random", help="measure random candidates")
    r.add_argument("--n", type=int, default=600)
    r.add_argument("--seed", type=int, default=0)
    r.set_defaults(func=cmd_random)
    f = sub.add_parser("fit", help="train on part of the random set, rank the rest")
    f.add_argument("--splits", type=int, default=10)
    f.add_argument("--train-frac", type=float, default=0.7)
    f.set_defaults(func=cmd_fit)
    s = sub.add_parser("search", help="model-guided tuning runs of each task")
    s.add_argument("--budget", type=int, default=200)
    s.add_argument("--seeds", default="0")
    s.add_argument("--population", type=int, default=256, help="evolution's population")
    s.add_argument("--generations", type=int, default=4, help="evolution's generations")
    s.add_argument("--tag", default="", help="added to the run's file name (search<TAG><SEED>)")
    s.set_defaults(func=cmd_search)
    c = sub.add_parser("compare", help="best-so-far of search vs random sampling")
    c.add_argument("--remeasure", type=int, default=3,
                   help="re-measure the top K of each run side by side (default: 3)")
    c.set_defaults(func=cmd_compare)
    args = p.parse_args(argv)
    args.tasks = [t for t in args.tasks.split(",") if t]
    if hasattr(args, "seeds"):
        args.seeds = [int(s) for s in str(args.seeds).split(",") if s]
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
