"""Vulkan on a real GPU, next to PyTorch on CUDA: the GPU benchmark of the Vulkan target.

Two halves, because the GPU host may have no compiler installed:

    python bench/gpu_vulkan.py build OUTDIR [--small] [--models mlp,resnet18]
        [--precision fp32,fp16] [--target "vulkan ..."]
    python bench/gpu_vulkan.py run OUTDIR [OUTDIR ...] [--repeat 50] [--save FILE] [--json F]
    python bench/gpu_vulkan.py report F [F ...] [--save FILE]   # one table from runs' --json

``build`` (here) compiles for vulkan: a float32 4096x4096 matmul, float16 ones on
cooperative matrices (bench/gpu_coop.py: ``vulkan -cooperative-matrix=16x16x16``, tile
variants, and plain ``vulkan`` for comparison), and the models of
bench/gpu_build.py (the example MLP, ResNet-18 and MobileNetV2 at 224x224, the BERT
encoder at sequence 128; ``--small`` shrinks images to 64 and the sequence to 32, for a
CPU Vulkan driver) with their inputs and ONNX Runtime's outputs. ``--precision fp16``
builds the models with ``precision="fp16"`` instead (``fp32,fp16``: both), as
NAME_fp16, for the cooperative-matrix target of bench/gpu_build.py unless ``--target``
names another (plain ``vulkan`` for lavapipe).

``run`` (on the GPU host) needs only tensorsmith-runtime[vulkan]
(PYTHONPATH=packages/runtime/src works), numpy and, for the comparison column, torch.
It takes one or more folders (artifacts can be built into several, to travel in parts).
For each model it checks the artifact's output against ONNX Runtime's (max abs error /
max abs output) and times, as a user sees them (numpy arrays in, numpy arrays out, after
``--warmup`` runs, median of ``--repeat``):

- *tsm ms*: ``module.run(inputs)`` on ``vulkan``, host copies included;
- *tsm kernels ms*: the same run's kernels alone, from GPU timestamps (``profile``);
- *torch ms*: the same architecture (bench/torch_models.py, random weights) in PyTorch
  eager mode under ``inference_mode``, on CUDA when available (else the CPU, labelled),
  inputs copied in and the output copied out, synchronized;
- *ratio* = torch ms / tsm ms: above 1 means tensorsmith is faster.

A float16 artifact (its note says ``"precision": "fp16"``) is compared with torch in
float16 too: ``module.half()``, float inputs ``.half()`` on the device, the output
back to float32 numpy. Its error is still taken against ONNX Runtime's float32 output,
so it is judged by :data:`TOLERANCE` of its precision: float16 keeps 11 significant
bits (a relative rounding of 4.9e-4 per value), and a model rounds every stored
activation and weight to it, through ~50 layers for ResNet-50; errors of a few 1e-3 of
the largest output are what float16 inference gives, so only 2e-2 and above is called
WRONG (a broken kernel is off by far more). Float32 keeps the tests' 1e-4.

Then the matmul: TFLOP/s of its kernel (GPU timestamps) next to ``torch.matmul`` on
device-resident tensors with TF32 off; and the float16 matmuls (bench/gpu_coop.py): the
device's cooperative-matrix properties, then per artifact its kernel time, TFLOP/s, ratio
to ``torch.matmul`` in float16, and error against NumPy (or why it did not load). It
is a benchmark, not a test: nothing asserts on time, and a wrong output is reported in
the table, not raised.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/gpu_vulkan.py` puts bench/, not the root, first
    sys.path.insert(0, str(ROOT))

from bench.measure import relative_error, time_runs  # noqa: E402

MATMUL_N = 4096
RTOL = 1e-4  # the tests' tolerance; above it the table says WRONG
#: Relative error (max abs error / max abs output) above which a row says WRONG, per
#: precision: see the module docstring for float16's.
TOLERANCE = {"fp32": RTOL, "fp16": 2e-2}
MODEL_ORDER = ["mlp", "resnet18", "mobilenetv2", "resnet50", "bert_encoder",
               "resnet50_fp16", "bert_encoder_fp16"]
#: Artifacts besides the models: ``build --models`` may name these too.
EXTRA = ["matmul", "matmul_f16"]


def build(
    outdir: Path,
    names: list[str] | None = None,
    small: bool = False,
    precisions: tuple[str, ...] = ("fp32",),
    target: str | None = None,
) -> None:
    from bench.gpu_build import build_models
    from tensorsmith.ir import GraphBuilder
    from tensorsmith.ir import build as compile_graph

    outdir.mkdir(parents=True, exist_ok=True)
    if names is None or "matmul" in names:
        b = GraphBuilder()
        x = b.input("a", (MATMUL_N, MATMUL_N), "float32")
        y = b.input("b", (MATMUL_N, MATMUL_N), "float32")
        g = b.finish([b.add1("matmul", [x, y], name="mm")])
        compile_graph(g, target="vulkan").export_library(outdir / "matmul4096.tsm")
    if names is None or "matmul_f16" in names:
        from bench.gpu_coop import build as build_f16

        build_f16(outdir, 512 if small else MATMUL_N)
    models = None if names is None else [n for n in names if n not in EXTRA]
    if models is None or models:
        build_models(outdir, models, small, precisions, target)
    print(f"wrote {sorted(p.name for p in outdir.iterdir())}")


# ---- run ----------------------------------------------------------------------------


def _torch_device() -> tuple[Any, str] | None:
    """torch and the device it runs on ("cuda" when available), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    return torch, "cuda" if torch.cuda.is_available() else "cpu"


def _kernel_ms(module: Any, repeat: int) -> float:
    """Mean per-run GPU time of all steps, from the runtime's timestamp profile."""
    report = module.profile(repeat=repeat)
    return sum(step["total_ms"] for step in report) / repeat


def _time_torch(
    name: str, note: dict[str, Any], feeds: dict[str, np.ndarray], args: argparse.Namespace
) -> float:
    from bench.torch_models import build_torch_model

    torch, device = args.torch
    module = build_torch_model(note.get("model", name), **note["torch_kwargs"]).to(device)
    half = note.get("precision") == "fp16"
    if half:
        module = module.half()

    def tensor(array: np.ndarray) -> Any:
        t = torch.from_numpy(array).to(device)
        return t.half() if half and t.is_floating_point() else t

    def once() -> np.ndarray:
        with torch.inference_mode():
            inputs = [tensor(feeds[k]) for k in note["inputs"]]
            out = module(*inputs).float().cpu().numpy()
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    return time_runs(once, args.repeat, args.warmup).median_ms


def bench_model(folder: Path, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: correctness against the reference and the three timings. A model that
    fails to load or run gets its error in the row, and the others still run."""
    import tensorsmith.runtime as rt

    note = json.loads((folder / f"{name}.json").read_text())
    data = np.load(folder / f"{name}.npz")
    feeds = {k: data[f"in.{k}"] for k in note["inputs"]}
    want = [data[f"out.{i}"] for i in range(sum(k.startswith("out.") for k in data.files))]
    row: dict[str, Any] = {"model": name, "shapes": note["shapes"],
                           "precision": note.get("precision", "fp32")}
    try:
        with rt.load(folder / f"{name}.tsm", device=args.device) as module:
            got = module.run(feeds)
            row["rel_err"] = max(relative_error(g, w) for g, w in zip(got, want))
            stats = time_runs(lambda: module.run(feeds), args.repeat, args.warmup)
            row["tsm_ms"] = stats.median_ms
            row["tsm_kernels_ms"] = _kernel_ms(module, min(args.repeat, 10))
    except Exception as e:  # noqa: BLE001 - reported in the table, the next model runs
        row["error"] = f"{type(e).__name__}: {e}"
    if args.torch is not None:
        row["torch_ms"] = _time_torch(name, note, feeds, args)
        if "tsm_ms" in row:
            row["ratio"] = row["torch_ms"] / row["tsm_ms"]
    return row


def bench_matmul(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The float32 4096^3 matmul: kernel TFLOP/s next to torch.matmul's, TF32 off."""
    import tensorsmith.runtime as rt

    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32)
    b = rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32)
    flops = 2 * MATMUL_N**3
    row: dict[str, Any] = {"what": f"matmul {MATMUL_N} fp32"}
    with rt.load(path, device=args.device) as mm:
        mm.set_input("a", a)
        mm.set_input("b", b)
        row["tsm_ms"] = time_runs(mm.run, 5, 1).median_ms
        row["tsm_kernel_ms"] = _kernel_ms(mm, 3)
        check = mm.get_output(0)[:64, :64]
    row["tsm_tflops"] = flops / row["tsm_kernel_ms"] / 1e9
    row["rel_err_64x64"] = relative_error(check, a[:64] @ b[:, :64])
    if args.torch is not None:
        torch, device = args.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)

        def torch_mm() -> None:
            torch.matmul(ta, tb)
            if device == "cuda":
                torch.cuda.synchronize()

        row["torch_ms"] = time_runs(torch_mm, 20, 3).median_ms
        row["torch_tflops"] = flops / row["torch_ms"] / 1e9
    return row


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]], mm: dict[str, Any] | None, header: str) -> str:
    """The printed report: one line per model, then the matmul."""
    lines = [header, ""]
    lines.append(
        "| model | precision | input | tsm vulkan ms | tsm kernels ms | torch eager ms | ratio "
        "| rel err |"
    )
    lines.append("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        shapes = ", ".join("x".join(map(str, s)) for s in r["shapes"].values())
        err = _fmt(r.get("rel_err"), ".1e")
        precision = r.get("precision", "fp32")
        if r.get("rel_err", 0.0) >= TOLERANCE[precision]:
            err += " WRONG"
        if "error" in r:
            err = f"failed: {r['error']}"
        lines.append(
            f"| {r['model']} | {precision} | {shapes} | {_fmt(r.get('tsm_ms'), '.3f')} | "
            f"{_fmt(r.get('tsm_kernels_ms'), '.3f')} | {_fmt(r.get('torch_ms'), '.3f')} | "
            f"{_fmt(r.get('ratio'), '.2f')} | {err} |"
        )
    if mm is not None:
        lines += [
            "",
            f"{mm['what']}: tensorsmith vulkan {mm['tsm_tflops']:.2f} TFLOP/s "
            f"(kernel {mm['tsm_kernel_ms']:.2f} ms, run with copies {mm['tsm_ms']:.1f} ms, "
            f"rel err {mm['rel_err_64x64']:.1e} on a 64x64 block); torch.matmul TF32 off "
            f"{_fmt(mm.get('torch_tflops'), '.2f')} TFLOP/s ({_fmt(mm.get('torch_ms'), '.2f')} ms)",
        ]
    return "\n".join(lines) + "\n"


def _header(args: argparse.Namespace) -> str:
    import tensorsmith.runtime as rt
    from tensorsmith.runtime.vulkan.instance import list_devices

    vk = "; ".join(list_devices()) or "none"
    torch_part = "torch: not installed"
    if args.torch is not None:
        torch, device = args.torch
        where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
        torch_part = f"torch {torch.__version__} eager on {device} ({where})"
    return (
        f"tensorsmith-runtime {rt.__version__} on {args.device} [{vk}]; {torch_part}; "
        f"median of {args.repeat} after {args.warmup} warm-up runs, numpy in and out"
    )


def run(folders: list[Path], args: argparse.Namespace) -> str:
    args.torch = None if args.no_torch else _torch_device()
    found = {p.stem: folder for folder in folders for p in folder.glob("*.json")}
    rows = []
    for name in [n for n in MODEL_ORDER if n in found] + sorted(set(found) - set(MODEL_ORDER)):
        rows.append(bench_model(found[name], name, args))
        print(json.dumps(rows[-1]), flush=True)
    mm_paths = [f / "matmul4096.tsm" for f in folders if (f / "matmul4096.tsm").exists()]
    mm = bench_matmul(mm_paths[0], args) if mm_paths and not args.no_matmul else None
    from bench.gpu_coop import run as run_f16
    from bench.gpu_coop import table as f16_table

    f16 = [] if args.no_matmul else run_f16(folders, args.device, args.torch)
    header = _header(args)
    text = _print_table(rows, mm, header, None) + f16_table(f16)
    if f16:
        print(f16_table(f16))
    if args.save is not None:
        args.save.write_text(text)
    if args.json is not None:
        args.json.write_text(json.dumps({"header": header, "rows": rows, "matmul": mm,
                                         "matmul_f16": f16}))
    return text


def report(files: list[Path], save: Path | None) -> str:
    """One table from the ``--json`` files of runs over parts of the artifacts."""
    results = [json.loads(f.read_text()) for f in files]
    rows = [r for res in results for r in res["rows"]]
    rank = {name: i for i, name in enumerate(MODEL_ORDER)}
    rows.sort(key=lambda r: rank.get(r["model"], len(rank)))
    mm = next((res["matmul"] for res in results if res["matmul"] is not None), None)
    header = "\n".join(dict.fromkeys(res["header"] for res in results))
    return _print_table(rows, mm, header, save)


def _print_table(
    rows: list[dict[str, Any]], mm: dict[str, Any] | None, header: str, save: Path | None
) -> str:
    text = table(rows, mm, header)
    print(text)
    if save is not None:
        save.write_text(text)
    return text


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the artifacts (needs the compiler)")
    b.add_argument("outdir", type=Path)
    b.add_argument("--models", help="comma-separated subset of "
                   + ",".join(EXTRA + [n for n in MODEL_ORDER if not n.endswith("_fp16")]))
    b.add_argument("--small", action="store_true", help="small sizes, for a CPU driver")
    b.add_argument("--precision", default="fp32",
                   help="comma-separated precisions of the models: fp32, fp16 (default fp32)")
    b.add_argument("--target", help="the models' target (default: vulkan for fp32, the "
                   "cooperative-matrix one of bench/gpu_build.py for fp16)")
    r = sub.add_parser("run", help="time the artifacts (needs only the runtime)")
    r.add_argument("outdirs", type=Path, nargs="+")
    r.add_argument("--device", default="vulkan")
    r.add_argument("--repeat", type=int, default=50)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--no-torch", action="store_true", help="leave the torch column out")
    r.add_argument("--no-matmul", action="store_true")
    r.add_argument("--save", type=Path, help="also write the table to this file")
    r.add_argument("--json", type=Path, help="also write the rows, for `report`")
    t = sub.add_parser("report", help="one table from several runs' --json files")
    t.add_argument("files", type=Path, nargs="+")
    t.add_argument("--save", type=Path, help="also write the table to this file")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv[1:])
    if args.command == "build":
        unknown = set(args.precision.split(",")) - set(TOLERANCE)
        if unknown:
            sys.exit(f"build --precision: {', '.join(sorted(unknown))} is not one of "
                     f"{', '.join(TOLERANCE)}")
        build(args.outdir, args.models.split(",") if args.models else None, args.small,
              tuple(args.precision.split(",")), args.target)
    elif args.command == "run":
        run(args.outdirs, args)
    else:
        report(args.files, args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
