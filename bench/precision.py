"""A float32 model compiled for reduced precision (``build(..., precision=...)``):
accuracy against the float32 build, artifact size, and speed of the fp32, fp16 and bf16
builds next to ONNX Runtime's float32, in the same process.

    python bench/precision.py                                  # ResNet-50 and BERT
    python bench/precision.py --model resnet50 --repeat 10
    python bench/precision.py --model bert_encoder --precisions fp32 bf16
    python bench/precision.py --model resnet18 --image 64 --target opencl --precisions fp32 fp16

Each model (bench/models.py, random but fixed weights, batch 1; BERT at its default
sequence of 128) is compiled once per precision for the host's CPU (``llvm``: every
feature of this CPU, so AVX512-FP16 half arithmetic and F16C/AVX512-BF16 conversions
where the host has them). Accuracy is the largest ``max |x - fp32| / max |fp32|`` of
the output over ``--eval`` seeded inputs, against tensorsmith's own float32 build (and
ONNX Runtime's, which is the same to 1e-5). Then the engines are timed in alternating
blocks, 2 threads each. ``--target`` compiles for another target (a GPU one runs on its
device: ``opencl`` is PoCL here, where float16 is stored as half and computed in float);
``--image`` sizes a CNN's input. Prints the table, writes
bench/results/precision_<isa>_<date>.txt (with the target's kind when not llvm).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorsmith.runtime as rt
from bench.measure import interleaved, relative_error
from bench.model_bench import ort_session
from bench.models import MODELS, input_shapes, sample_inputs
from bench.report import environment, format_table
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import Target, build

RESULTS = Path(__file__).resolve().parent / "results"
PRECISIONS = ("fp32", "fp16", "bf16")


def _compile(model: Any, precision: str, path: Path, threads: int, target: str
             ) -> tuple[Any, float]:
    """The loaded module and the seconds its build took."""
    import time

    graph, params = from_onnx(model, shape=input_shapes(model))
    start = time.perf_counter()
    build(graph, target=target, params=params, precision=precision).export_library(path)
    seconds = time.perf_counter() - start
    device = Target.parse(target).info.device
    module = rt.load(path, device=device)
    if device == "cpu":
        module.set_num_threads(threads)
    return module, seconds


def bench_one(name: str, precisions: list[str], repeat: int, evaluations: int, threads: int,
              work: Path, target: str = "llvm", image: int | None = None) -> list[str]:
    """The report lines of one model."""
    model = MODELS[name](opset=17, batch=1, **({"image": image} if image else {}))
    modules, seconds, sizes = {}, {}, {}
    for p in precisions:
        path = work / f"{name}_{p}.so"
        modules[p], seconds[p] = _compile(model, p, path, threads, target)
        sizes[p] = path.stat().st_size
    session = ort_session(model, threads)
    feeds = [sample_inputs(model, seed=s) for s in range(evaluations)]
    ref = [session.run(None, f)[0] for f in feeds]
    ours = {p: [modules[p].run(f)[0] for f in feeds] for p in precisions}
    base = ours.get("fp32", ref)
    err = {p: max(relative_error(o, b) for o, b in zip(ours[p], base)) for p in precisions}
    err_ort = {p: max(relative_error(o, r) for o, r in zip(ours[p], ref)) for p in precisions}
    timed = [*(lambda m=modules[p]: m.run(feeds[0]) for p in precisions),
             lambda: session.run(None, feeds[0])]
    stats = interleaved(timed, repeat)
    ort_ms = stats[-1].median_ms
    rows = [[f"tensorsmith {p}", f"{s.median_ms:.2f} ({s.min_ms:.2f})",
             f"{ort_ms / s.median_ms:.2f}", f"{err[p]:.2e}", f"{err_ort[p]:.2e}",
             f"{sizes[p]:,}", f"{seconds[p]:.1f}"]
            for p, s in zip(precisions, stats)]
    rows.append(["ONNX Runtime float32", f"{ort_ms:.2f} ({stats[-1].min_ms:.2f})", "1.00",
                 "", "0", f"{model.ByteSize():,} (.onnx)", ""])
    shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in input_shapes(model).items())
    return [f"{name} ({shapes}); error: max |x - ref| / max |ref| of the output over "
            f"{evaluations} seeded inputs",
            format_table(["engine", "ms median (min)", "ORT / this", "err vs ts fp32",
                          "err vs ORT", "artifact bytes", "build s"], rows), ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", choices=sorted(MODELS),
                        help="a model of bench/models.py (repeatable; default: resnet50 and "
                        "bert_encoder)")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--eval", type=int, default=4, help="seeded inputs for the error")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", default="llvm", help="tensorsmith's target (default: "
                        "llvm, this host's CPU)")
    parser.add_argument("--image", type=int, help="a CNN's image size (default: the model's)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    env = environment(args.threads)
    from tensorsmith.codegen.llvm.target_options import host_target

    features = host_target().attrs.split(",")
    wanted = ("+f16c", "+avx512f", "+avx512fp16", "+avx512bf16", "+amx-bf16")
    lines = [f"host: {env['isa']} ({env['processor'] or env['machine']}), {args.threads} "
             f"threads per engine; LLVM features used: "
             f"{' '.join(f for f in wanted if f in features) or 'none of ' + ' '.join(wanted)}",
             ""]
    work = Path(tempfile.mkdtemp(prefix="tsm-precision-"))
    for name in args.model or ["resnet50", "bert_encoder"]:
        lines += bench_one(name, args.precisions, args.repeat, args.eval, args.threads, work,
                           args.target, args.image)
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    kind = Target.parse(args.target).kind
    by = "" if kind == "llvm" else f"_{kind}"
    out = RESULTS / f"precision{by}_{env['isa']}_{datetime.date.today()}.txt"
    out.write_text(f"$ python bench/precision.py {' '.join(argv or sys.argv[1:])}\n\n{text}\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
