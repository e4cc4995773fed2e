"""Tile variants of the GPU matrix-product schedule, to choose its defaults on a real GPU.

    python bench/gpu_gemm_variants.py build OUTDIR [--n 4096] [--target vulkan]
    python bench/gpu_gemm_variants.py run OUTDIR [--device vulkan] [--repeat 5]

``build`` compiles one n^3 float32 matmul per tile variant of
``tensorsmith.ir.schedules.gpu_gemm`` (each applied as a tuning record, the way tuned
schedules reach ``build``), plus the default schedule, into OUTDIR/gemm_<variant>.tsm.
``run`` needs only tensorsmith-runtime (with its vulkan or opencl extra) and numpy: it
checks a 64x64 block of each result and prints each kernel's GPU time and TFLOP/s. It
is a benchmark, not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# (invocations y, x, register tile rows, cols, reduction step, prefetch next step)
VARIANTS = {
    "128x128_k8": (16, 16, 8, 8, 8, False),
    "128x128_k8_prefetch": (16, 16, 8, 8, 8, True),
    "128x128_k16": (16, 16, 8, 8, 16, False),
    "128x128_k16_prefetch": (16, 16, 8, 8, 16, True),
    "128x64_k8": (16, 16, 8, 4, 8, False),
    "64x128_k8": (16, 16, 4, 8, 8, False),
    "64x64_k16": (16, 16, 4, 4, 16, False),
    "64x64_k16_prefetch": (16, 16, 4, 4, 16, True),
    "64x64_k8_t8x8": (8, 8, 8, 8, 8, False),
}


def _graph(n: int) -> Any:
    from tensorsmith.ir import GraphBuilder

    b = GraphBuilder()
    x = b.input("a", (n, n), "float32")
    y = b.input("b", (n, n), "float32")
    return b.finish([b.add1("matmul", [x, y], name="mm")])


def _record(graph: Any, target: str, tiles: tuple[Any, ...]) -> dict[str, Any]:
    """A tuning record holding the variant's steps for the graph's one workload."""
    from tensorsmith.ir import te
    from tensorsmith.ir.build import fused_groups
    from tensorsmith.ir.lowering import group_compute, workload_key
    from tensorsmith.ir.schedules.gpu_gemm import GemmTiles, schedule_gemm

    _, groups, _ = fused_groups(graph)
    (group,) = groups
    _, outputs = group_compute(group)
    s = te.create_schedule(outputs)
    schedule_gemm(s, s[outputs[0]], GemmTiles(*tiles))
    return {"workload": workload_key(group), "target": target,
            "steps": [step.to_json() for step in s.steps], "costs": [1.0], "error": None}


def build(outdir: Path, n: int, target: str) -> None:
    from tensorsmith.ir import build as compile_graph

    outdir.mkdir(parents=True, exist_ok=True)
    graph = _graph(n)
    compile_graph(graph, target=target).export_library(outdir / "gemm_default.tsm")
    for name, tiles in VARIANTS.items():
        records = outdir / f"gemm_{name}.records.jsonl"
        records.write_text(json.dumps(_record(graph, target, tiles)) + "\n")
        lib = compile_graph(graph, target=target, records=records)
        lib.export_library(outdir / f"gemm_{name}.tsm")
    (outdir / "gemm_variants.json").write_text(json.dumps({"n": n, "variants": VARIANTS}))
    print(f"wrote {len(VARIANTS) + 1} artifacts to {outdir}")


def run(outdir: Path, device: str, repeat: int) -> None:
    import tensorsmith.runtime as rt

    n = json.loads((outdir / "gemm_variants.json").read_text())["n"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    want = a[:64] @ b[:, :64]
    rows = []
    for path in sorted(outdir.glob("gemm_*.tsm")):
        row: dict[str, Any] = {"variant": path.stem[len("gemm_"):]}
        try:
            with rt.load(path, device=device) as mm:
                mm.set_input("a", a)
                mm.set_input("b", b)
                start = time.perf_counter()
                mm.run()
                row["first_run_ms"] = (time.perf_counter() - start) * 1e3
                got = mm.get_output(0)[:64, :64]
                row["rel_err_64x64"] = float(np.abs(got - want).max() / np.abs(want).max())
                report = mm.profile(repeat=repeat)
                kernel_ms = sum(step["total_ms"] for step in report) / repeat
            row["kernel_ms"] = kernel_ms
            row["tflops"] = 2 * n**3 / kernel_ms / 1e9
        except Exception as e:  # noqa: BLE001 - one failing variant must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        print(json.dumps(row), flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["build", "run"])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--target", default="vulkan")
    parser.add_argument("--device", default="vulkan")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv[1:])
    if args.mode == "build":
        build(args.outdir, args.n, args.target)
    else:
        run(args.outdir, args.device, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
