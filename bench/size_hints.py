"""What a size hint (``tensorsmith compile --dim batch=1..4``) buys: the same dynamic
model compiled with the default stand-in size and with hints, each step timed inside the
model (``Module.profile``) in alternating blocks in one process, 2 threads.

    python bench/size_hints.py --threads 2 --hints 1,4

Only the kernels whose schedule depends on the stand-in size differ between the builds
(with the bench models, the classifier's matrix product; convolutions are sized per
image either way), so the table compares those steps, in microseconds, at each batch:
the whole model's time moves by less than the noise of two artifacts in one process.
Quote the host's ISA with the numbers (the header prints it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import tensorsmith.runtime as rt
from bench.models import mobilenetv2, resnet18, sample_inputs
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

MODELS = {"mobilenetv2": mobilenetv2, "resnet18": resnet18}


def differing_steps(libs: dict[str, object]) -> list[int]:
    """Plan steps whose kernel's schedule differs between the builds."""
    funcs = [lib.funcs for lib in libs.values()]  # type: ignore[attr-defined]
    plan = next(iter(libs.values())).plan  # type: ignore[attr-defined]
    differ = {f.name for fs in zip(*funcs) for f in fs
              if len({str(g.attrs.get("steps")) for g in fs}) > 1}
    return [i for i, s in enumerate(plan.steps) if s.kernel in differ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--hints", default="1,4", help="batch hints to build with")
    parser.add_argument("--batches", default="1,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    os.environ.setdefault("TSM_NUM_THREADS", str(args.threads))
    env = environment(args.threads)
    print(f"# host: {env['processor'] or env['machine']}  isa: {env['isa']}  "
          f"threads: {args.threads}")
    builds = {"default": None, **{f"hint {h}": {"batch": int(h)} for h in args.hints.split(",")}}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = MODELS[name](batch="batch")
            libs, mods = {}, {}
            for label, hints in builds.items():
                graph, params = from_onnx(model)
                libs[label] = build(graph, target="llvm", params=params, size_hints=hints)
                path = Path(tmp) / f"{name}.{label.replace(' ', '')}.so"
                libs[label].export_library(path)
                mods[label] = rt.load(path, device="cpu", num_threads=args.threads)
            steps = differing_steps(libs)
            for batch in (int(b) for b in args.batches.split(",")):
                feeds = sample_inputs(model, seed=1, dims={"batch": batch})
                times: dict[str, list[float]] = {label: [] for label in mods}
                for _ in range(args.blocks):
                    for label, m in mods.items():
                        report = m.profile(feeds, repeat=args.repeat)
                        times[label] += [sum(r[i] for i in steps) for r in report.step_ms]
                us = {label: float(np.median(t)) * 1e3 for label, t in times.items()}
                rows.append([name, str(batch), str(len(steps)),
                             *(f"{us[label]:.1f}" for label in builds),
                             *(f"{us['default'] / us[label]:.2f}" for label in builds
                               if label != "default")])
            for m in mods.values():
                m.close()
    hinted = [label for label in builds if label != "default"]
    print(format_table(["model", "batch", "steps", *(f"{label} us" for label in builds),
                        *(f"default/{label}" for label in hinted)], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
