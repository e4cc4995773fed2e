"""float16 4096^3 matmuls on cooperative matrices: the ``matmul_f16`` part of
bench/gpu_vulkan.py (``build`` here, ``run`` on the GPU host), next to torch.matmul in
float16 on CUDA.

``build`` writes, for the same product (and ``matmul_f16.meta``, JSON, naming them):
``matmul4096_f16_coop.tsm`` (the default cooperative-matrix kernel for
:data:`COOP_TARGET`, subgroup-held matrices), one artifact per entry of
:data:`VARIANTS` (other tile choices, each applied as a tuning record, the way tuned
schedules reach ``build``), ``matmul4096_f16_workgroup.tsm`` and one per entry of
:data:`WORKGROUP_VARIANTS` (the same for :data:`WORKGROUP_TARGET`: blocks a whole
workgroup holds, VK_NV_cooperative_matrix2), and ``matmul4096_f16_plain.tsm`` (plain ``vulkan``: the
tiled kernel with float16 storage and float32 arithmetic, what a device without
cooperative matrices runs). ``run`` prints the device's cooperative-matrix properties,
then per artifact: whether it loaded (a refusal names what the device lacks), its
kernel time from GPU timestamps (each dispatch), TFLOP/s, the ratio to torch.matmul
float16, and its error against NumPy (float32 sums of the same float16 inputs):
``max|err| / max|ref|``, within :data:`TOLERANCE` for float16 inputs with float32
accumulation and a float16 result (half a float16 ulp is 2.4e-4 of the largest
element); when over, where the first wrong elements are, which tells a layout mistake
(a transposed fragment, a wrong stride) from a rounding one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

N = 4096
#: NVIDIA's workgroups take 1024 invocations (``tensorsmith devices`` prints the device's
#: string); the default block has 256, the 4 x 4-subgroup variants 512.
COOP_TARGET = ("vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 "
               "-shared-memory=49152 -max-invocations=1024")
#: Variants (knob -> value) built next to the default, each named for what it tests,
#: with its H100 TFLOP/s at 4096^3 in a comment where measured (te/matrix_lower.py
#: describes the knobs). The default: 2 x 4 subgroups of 4 x 4 fragments, k 16, with
#: ``preload`` (a step's fragments requested before the previous step's multiply-adds),
#: ``prefetch`` 2 (two steps in registers) and ``raster`` 8 (workgroups grouped by 8
#: block rows for L2 reuse): 269. The others change one thing of it, then combine:
#: ``a_interleave`` (A's chunk stores free of bank conflicts), ``a_global``/``b_global``
#: (that operand's fragments loaded from global memory through L1, not staged in shared
#: memory) and 4 x 4 subgroups (512 invocations; 4 x 4 fragments each make a 256 x 256
#: block but leave 128 registers an invocation, 2 x 4 or 4 x 2 fragments fit them).
_W2X4 = {"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 4, "kt": 16}
_ALL = {"preload": 1, "prefetch": 2, "raster": 8}
_DEFAULT = {**_W2X4, **_ALL}
_W4X4 = {**_DEFAULT, "warps_m": 4}
VARIANTS: dict[str, dict[str, int]] = {
    "w2x4_f4x4_plain": {**_W2X4, "preload": 0, "prefetch": 1, "raster": 1},  # 210
    "a_interleave": {**_DEFAULT, "a_interleave": 1},
    "b_global": {**_DEFAULT, "b_global": 1},
    "a_global": {**_DEFAULT, "a_global": 1},
    "a_interleave_b_global": {**_DEFAULT, "a_interleave": 1, "b_global": 1},
    "w4x4_f4x4": _W4X4,
    "w4x4_f4x4_a_interleave": {**_W4X4, "a_interleave": 1},
    "w4x4_f2x4": {**_W4X4, "frags_m": 2},
    "w4x4_f4x2": {**_W4X4, "frags_n": 2},
    "w4x4_f2x4_a_interleave": {**_W4X4, "frags_m": 2, "a_interleave": 1},
    "w4x4_f2x4_b_global": {**_W4X4, "frags_m": 2, "b_global": 1},
    "w4x4_f4x2_a_global": {**_W4X4, "frags_n": 2, "a_global": 1},
}
#: The H100's workgroup-held matrices as its probe prints them (VK_NV_cooperative_matrix2:
#: blocks of multiples of these sizes, in workgroups of that many invocations). With
#: them the rule's default for 4096^3 is a 128 x 256 block of 256 invocations, a step
#: of 64 (schedules/gpu_coop.py).
WORKGROUP_TARGET = (f"{COOP_TARGET} -workgroup-matrix=16x16x16/32,16x16x16/64,32x16x16/128,"
                    "32x32x16/256 -workgroup-matrix-max=1024")
#: Workgroup-held variants (knob -> value) for :data:`WORKGROUP_TARGET`, with H100/H200
#: TFLOP/s at 4096^3 where measured (bench/results/gpu_coop_h*_2026-12-05.txt; the
#: default, two steps a trip, ran at 310-312, one step a trip at 303-305). The driver
#: stages the operands; the block, its step, the steps a trip, the workgroup's
#: invocations, the grouping of workgroups and ``preload`` are the kernel's only choices.
_WG = {"workgroup": 1, "wg_rows": 128, "wg_cols": 256, "wg_k": 64, "wg_invocations": 256,
       "raster": 8, "wg_substeps": 1}
WORKGROUP_VARIANTS: dict[str, dict[str, int]] = {
    "one_step": _WG,  # 303-305
    "four_steps": {**_WG, "wg_substeps": 4},  # 160
    "k32": {**_WG, "wg_k": 32},  # 196
    "k16": {**_WG, "wg_k": 16},  # 131
    "raster1": {**_WG, "raster": 1},  # 301
    "preload": {**_WG, "preload": 1},  # 198
    "256x128": {**_WG, "wg_rows": 256, "wg_cols": 128},  # 122
    "64x512_k32": {**_WG, "wg_rows": 64, "wg_cols": 512, "wg_k": 32},  # 190
    "128x128_w128": {**_WG, "wg_cols": 128, "wg_invocations": 128},  # 279-280
    "128x128_k128": {**_WG, "wg_cols": 128, "wg_k": 128},  # 272
    "64x64_w64": {**_WG, "wg_rows": 64, "wg_cols": 64, "wg_invocations": 64},  # 199
}
TOLERANCE = 2e-3


def _graph(n: int) -> Any:
    from tensorsmith.ir import GraphBuilder

    b = GraphBuilder()
    x = b.input("a", (n, n), "float16")
    y = b.input("b", (n, n), "float16")
    return b.finish([b.add1("matmul", [x, y], name="mm")])


def _record(graph: Any, answers: dict[str, int], target: str = COOP_TARGET) -> dict[str, Any]:
    """A tuning record of the default rules' schedule with ``answers`` to their knobs."""
    from tensorsmith.ir.build import fused_groups
    from tensorsmith.ir.codegen import gpu_resources
    from tensorsmith.ir.lowering import group_compute, workload_key
    from tensorsmith.ir.schedules import schedule_gpu
    from tensorsmith.ir.target import Target

    _, groups, _ = fused_groups(graph)
    (group,) = groups
    _, outputs = group_compute(group)
    s = schedule_gpu(outputs, resources=gpu_resources(Target.parse(target)),
                     choose=lambda st, knob, default, choices=(): answers.get(knob, default))
    return {"workload": workload_key(group), "target": target,
            "steps": [step.to_json() for step in s.steps], "costs": [1.0], "error": None}


def build(outdir: Path, n: int = N) -> list[str]:
    from tensorsmith.ir import build as compile_graph
    from tensorsmith.ir.schedules.knobs import KnobConflict

    graph = _graph(n)
    written = []

    def export(lib: Any, name: str) -> None:
        lib.export_library(outdir / name)
        written.append(name)

    def variants(prefix: str, target: str, table: dict[str, dict[str, int]]) -> None:
        for name, answers in table.items():
            records = outdir / f"matmul{n}_f16_{prefix}_{name}.records.jsonl"
            try:
                records.write_text(json.dumps(_record(graph, answers, target)) + "\n")
            except KnobConflict as e:  # a variant over this device's limits is left out
                print(f"variant {name} left out: {e}")
                continue
            export(compile_graph(graph, target=target, records=records),
                   f"matmul{n}_f16_{prefix}_{name}.tsm")
            records.unlink()

    export(compile_graph(graph, target=COOP_TARGET), f"matmul{n}_f16_coop.tsm")
    variants("coop", COOP_TARGET, VARIANTS)
    export(compile_graph(graph, target=WORKGROUP_TARGET), f"matmul{n}_f16_workgroup.tsm")
    variants("workgroup", WORKGROUP_TARGET, WORKGROUP_VARIANTS)
    export(compile_graph(graph, target="vulkan"), f"matmul{n}_f16_plain.tsm")
    (outdir / "matmul_f16.meta").write_text(json.dumps(
        {"n": n, "target": COOP_TARGET, "variants": VARIANTS,
         "workgroup_target": WORKGROUP_TARGET, "workgroup_variants": WORKGROUP_VARIANTS}))
    return written


def device_report(device: str) -> str:
    """The devices' facts (cooperative matrices, subgroup size, shared memory)."""
    from tensorsmith.runtime.vulkan.probe import report

    try:
        return report()
    except Exception as e:  # noqa: BLE001 - reported, the run goes on
        return f"device probe failed: {type(e).__name__}: {e}"


def _where_wrong(got: np.ndarray, want: np.ndarray, scale: float) -> str:
    bad = np.argwhere(np.abs(got - want) > TOLERANCE * scale)
    if not len(bad):
        return ""
    rows, cols = bad[:, 0], bad[:, 1]
    first = [(int(r), int(c), float(got[r, c]), float(want[r, c])) for r, c in bad[:4]]
    return (f"{len(bad)} wrong elements, rows {rows.min()}..{rows.max()}, cols "
            f"{cols.min()}..{cols.max()}; first (row, col, got, want): {first}")


def _torch_f16(a: np.ndarray, b: np.ndarray, torch_device: tuple[Any, str] | None
               ) -> dict[str, Any]:
    from bench.measure import time_runs

    if torch_device is None:
        return {}
    torch, device = torch_device
    ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)

    def once() -> None:
        torch.matmul(ta, tb)
        if device == "cuda":
            torch.cuda.synchronize()

    ms = time_runs(once, 20, 3).median_ms
    return {"torch_f16_ms": ms, "torch_f16_tflops": 2 * a.shape[0] ** 3 / ms / 1e9,
            "torch_device": device}


def run(folders: list[Path], device: str, torch_device: tuple[Any, str] | None
        ) -> list[dict[str, Any]]:
    import tensorsmith.runtime as rt

    found = [f for f in folders if (f / "matmul_f16.meta").exists()]
    if not found:
        return []
    folder = found[0]
    n = json.loads((folder / "matmul_f16.meta").read_text())["n"]
    print(device_report(device), flush=True)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    scale = float(np.abs(want).max())
    reference = _torch_f16(a, b, torch_device)
    rows = []
    for path in sorted(folder.glob(f"matmul{n}_f16_*.tsm")):
        row: dict[str, Any] = {"what": path.stem, "n": n, **reference}
        try:
            with rt.load(path, device=device) as mm:
                mm.set_input("a", a)
                mm.set_input("b", b)
                mm.run()
                got = mm.get_output(0).astype(np.float32)
                report = mm.profile(repeat=10)
            row["kernels"] = {step["name"]: step["total_ms"] / 10 for step in report}
            row["kernel_ms"] = sum(row["kernels"].values())
            row["tflops"] = 2 * n**3 / row["kernel_ms"] / 1e9
            row["rel_err"] = float(np.abs(got - want).max() / scale)
            row["ok"] = row["rel_err"] <= TOLERANCE
            if not row["ok"]:
                row["wrong"] = _where_wrong(got, want, scale)
            if "torch_f16_tflops" in row:
                row["ratio_to_torch"] = row["tflops"] / row["torch_f16_tflops"]
        except Exception as e:  # noqa: BLE001 - a refusal or failure is the row's result
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    ref = rows[0]
    torch_part = (f"torch.matmul float16 on {ref['torch_device']}: "
                  f"{ref['torch_f16_tflops']:.1f} TFLOP/s ({ref['torch_f16_ms']:.3f} ms)"
                  if "torch_f16_tflops" in ref else "torch: not run")
    lines = ["", f"float16 {ref['n']}^3 matmul; {torch_part}", "",
             "| artifact | kernel ms | TFLOP/s | / torch | rel err | |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['what']} | — | — | — | — | failed: {r['error']} |")
            continue
        ratio = f"{r['ratio_to_torch']:.2f}" if "ratio_to_torch" in r else "—"
        note = "ok" if r["ok"] else f"WRONG: {r['wrong']}"
        lines.append(f"| {r['what']} | {r['kernel_ms']:.3f} | {r['tflops']:.1f} | {ratio} | "
                     f"{r['rel_err']:.1e} | {note} |")
    return "\n".join(lines) + "\n"
