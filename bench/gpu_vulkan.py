"""Vulkan on a real GPU, next to PyTorch on CUDA: the GPU benchmark of the Vulkan target.

Two halves, because the GPU host may have no compiler installed:

    python bench/gpu_vulkan.py build OUTDIR     # here: compile artifacts for vulkan
    python bench/gpu_vulkan.py run OUTDIR       # on the GPU host: runtime + torch only

``run`` needs only tensorsmith-runtime[vulkan] (PYTHONPATH=packages/runtime/src works),
numpy and, for the comparison column, torch with CUDA. It times each artifact on
``vulkan`` (median of 20 runs after warm-up; host copies included, as a user sees it),
and a float32 4096x4096 matmul with torch.matmul, TF32 off. It is a benchmark, not a
test: nothing asserts on time.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

MATMUL_N = 4096


def build(outdir: Path) -> None:
    import onnx

    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import GraphBuilder
    from tensorsmith.ir import build as compile_graph

    outdir.mkdir(parents=True, exist_ok=True)
    b = GraphBuilder()
    x = b.input("a", (MATMUL_N, MATMUL_N), "float32")
    y = b.input("b", (MATMUL_N, MATMUL_N), "float32")
    g = b.finish([b.add1("matmul", [x, y], name="mm")])
    compile_graph(g, target="vulkan").export_library(outdir / "matmul4096.tsm")
    root = Path(__file__).resolve().parent.parent
    mod, params = from_onnx(onnx.load(root / "examples" / "mlp.onnx"), {"input": (1, 784)})
    compile_graph(mod, target="vulkan", params=params).export_library(outdir / "mlp.tsm")
    print(f"wrote {sorted(p.name for p in outdir.iterdir())}")


def _median_ms(fn, repeat: int = 20) -> float:  # noqa: ANN001
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def run(outdir: Path) -> None:
    import tensorsmith.runtime as rt

    rows = []
    rng = np.random.default_rng(0)
    mm = rt.load(outdir / "matmul4096.tsm", device="vulkan")
    a = rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32)
    bm = rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32)
    mm.set_input("a", a)
    mm.set_input("b", bm)
    ms = _median_ms(mm.run, repeat=5)
    prof = mm.profile(repeat=3)
    gpu_ms = sum(r["total_ms"] for r in prof) / 3
    flops = 2 * MATMUL_N**3
    row = {"what": f"matmul {MATMUL_N} fp32", "tsm_ms": ms, "tsm_gpu_ms": gpu_ms,
           "tsm_tflops_gpu": flops / gpu_ms / 1e9}
    check = mm.get_output(0)[:64, :64]
    row["max_rel_err_64x64"] = float(np.abs(check - a[:64] @ bm[:, :64]).max()
                                     / np.abs(a[:64] @ bm[:, :64]).max())
    mlp = rt.load(outdir / "mlp.tsm", device="vulkan")
    xin = rng.standard_normal((1, 784)).astype(np.float32)
    mlp_ms = _median_ms(lambda: mlp.run({"input": xin}))
    mlp_row = {"what": "mlp (examples/mlp.onnx)", "tsm_ms": mlp_ms}
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(bm).cuda()

        def torch_mm() -> None:
            torch.matmul(ta, tb)
            torch.cuda.synchronize()

        tms = _median_ms(torch_mm)
        row.update(torch_ms=tms, torch_tflops=flops / tms / 1e9)
    except Exception as e:  # noqa: BLE001 - the comparison column is optional
        row["torch"] = f"unavailable: {e}"
    rows += [row, mlp_row]
    print(json.dumps(rows, indent=1))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("build", "run"):
        print(__doc__, file=sys.stderr)
        return 2
    (build if argv[1] == "build" else run)(Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
