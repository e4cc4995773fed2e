"""Dynamic shapes and computed sizes on a Vulkan device, checked against ONNX Runtime.

Two halves, because the GPU host needs no compiler:

    python bench/gpu_dynamic.py build OUTDIR     # here: vulkan artifacts + ORT references
    PYTHONPATH=packages/runtime/src python bench/gpu_dynamic.py run OUTDIR   # on the GPU

``build`` compiles, once each: a BERT encoder with symbolic batch and sequence, a
ReduceMean whose axes are an input, a Reshape whose target is an input, and a detector
with NonMaxSuppression at the end (its number of detections counted on the device
during the run; one that keeps nothing too); and stores
ONNX Runtime's outputs at several shapes and values. ``run`` (tensorsmith-runtime[vulkan]
and numpy only) runs every case from the one artifact, prints shapes, the largest
relative error and the median run time, and checks that values the model cannot take
are refused. Lavapipe runs it too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np


def build_cases(out: Path) -> None:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from bench.models import bert_encoder, sample_inputs, tiny_detector
    from tensorsmith.frontend.onnx import from_onnx
    from tensorsmith.ir import build

    out.mkdir(parents=True, exist_ok=True)

    def save(name: str, model: object, feeds_list: list[dict[str, np.ndarray]]) -> None:
        graph, params = from_onnx(model)
        build(graph, target="vulkan", params=params).export_library(out / f"{name}.tsm")
        session = ort.InferenceSession(model.SerializeToString())  # type: ignore[attr-defined]
        arrays = {}
        for i, feeds in enumerate(feeds_list):
            arrays |= {f"{i}/in/{k}": v for k, v in feeds.items()}
            arrays |= {f"{i}/out/{j}": w for j, w in enumerate(session.run(None, feeds))}
        np.savez(out / f"{name}.npz", **arrays)

    bert = bert_encoder(batch="batch", seq="seq", layers=2, hidden=64, heads=2, vocab=500)
    save("bert", bert, [sample_inputs(bert, seed=1, dims={"batch": b, "seq": s})
                        for b, s in ((1, 7), (2, 64), (1, 128), (3, 33))])

    def one_node(op: str, x_shape: list[int], operand: str, n: int, out_rank: int,
                 opset: int, **attrs: int) -> object:
        node = helper.make_node(op, ["x", operand], ["y"], name="node", **attrs)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                          helper.make_tensor_value_info(operand, TensorProto.INT64, [n])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    x = np.random.default_rng(0).standard_normal((3, 40, 50)).astype(np.float32)
    save("reduce_axes", one_node("ReduceMean", [3, 40, 50], "axes", 2, 1, 18, keepdims=0),
         [{"x": x, "axes": np.array(a, np.int64)} for a in ([0, 2], [-1, 1], [1, 0])])
    x = np.arange(240, dtype=np.float32).reshape(4, 6, 10)
    save("reshape", one_node("Reshape", [4, 6, 10], "shape", 2, 2, 14),
         [{"x": x, "shape": np.array(s, np.int64)} for s in ([24, 10], [-1, 8], [0, -1])])
    detector = tiny_detector(batch="batch")
    save("detector", detector, [sample_inputs(detector, seed=s, dims={"batch": b})
                                for s, b in ((0, 1), (1, 1), (2, 2))])
    nothing = tiny_detector(score=1.0)
    save("detector_none", nothing, [sample_inputs(nothing, seed=0)])
    print(f"wrote {sorted(p.name for p in out.iterdir())}")


def run_cases(art: Path, repeat: int) -> int:
    import tensorsmith.runtime as rt
    from tensorsmith.runtime.errors import InputError
    from tensorsmith.runtime.vulkan import list_devices

    print(list_devices())
    bad = 0
    for npz in sorted(art.glob("*.npz")):
        data = np.load(npz)
        cases = sorted({k.split("/")[0] for k in data.files}, key=int)
        with rt.load(art / f"{npz.stem}.tsm", device="vulkan") as m:
            for c in cases:
                feeds = {k.split("/")[2]: data[k] for k in data.files
                         if k.startswith(f"{c}/in/")}
                want = [data[k] for k in sorted((k for k in data.files
                                                 if k.startswith(f"{c}/out/")),
                                                key=lambda k: int(k.rsplit("/", 1)[1]))]
                got = m.run(feeds)
                times = []
                for _ in range(repeat):
                    start = time.perf_counter()
                    m.run(feeds)
                    times.append((time.perf_counter() - start) * 1e3)
                err = max((float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-12))
                           for g, w in zip(got, want) if g.shape == w.shape and w.size),
                          default=0.0)
                ok = all(g.shape == w.shape for g, w in zip(got, want)) and err < 1e-3
                bad += not ok
                shown = {k: (list(v.shape) if v.ndim > 1 else v.tolist())
                         for k, v in feeds.items()}
                print(f"{npz.stem:12s} {shown} -> {[list(g.shape) for g in got]}  max rel err "
                      f"{err:.1e}  run {np.median(times):.2f} ms  {'OK' if ok else 'MISMATCH'}")
    with rt.load(art / "reduce_axes.tsm", device="vulkan") as m:
        try:
            m.run({"x": np.ones((3, 40, 50), np.float32), "axes": np.array([1, 1], np.int64)})
            print("MISSED: axes named twice were not refused")
            bad += 1
        except InputError as e:
            print(f"refused as it should be: {e}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build").add_argument("out", type=Path)
    run = sub.add_parser("run")
    run.add_argument("out", type=Path)
    run.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if args.command == "build":
        build_cases(args.out)
        return 0
    return run_cases(args.out, args.repeat)


if __name__ == "__main__":
    raise SystemExit(main())
