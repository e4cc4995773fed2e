"""One model, end to end: compile with tensorsmith for llvm, then time it against ONNX
Runtime on the same inputs, with the same number of threads, in the same process.

A failure at any stage (import, compile, load, run) is recorded in the result instead of
raised, and ONNX Runtime is still timed, so a benchmark run always completes its table.
Given tuning records, the model is also compiled with them (``build(records=...)``) and
the untuned build, the tuned build and ONNX Runtime are timed together, interleaved,
so the three columns share the same moments of the machine's other load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build

from .errors import describe_failure
from .measure import Stats, interleaved, relative_error, time_runs
from .models import MODELS, input_shapes, sample_inputs

__all__ = ["BENCH_CONFIGS", "ModelResult", "bench_model", "ort_session"]

# what the benchmark runs by default: batch 1, opset 17, the sizes the brief names
BENCH_CONFIGS: dict[str, dict[str, Any]] = {
    "resnet18": {"opset": 17, "batch": 1, "image": 224},
    "resnet50": {"opset": 17, "batch": 1, "image": 224},
    "mobilenetv2": {"opset": 17, "batch": 1, "image": 224},
    "bert_encoder": {"opset": 17, "batch": 1, "seq": 128, "layers": 4, "hidden": 256},
    "vit_small": {"opset": 17, "batch": 1, "image": 224},
}
# also accepted by --models, not run by default
EXTRA_CONFIGS: dict[str, dict[str, Any]] = {
    "lstm_model": {"opset": 17, "batch": 1},
    # SSDlite-sized post-processing: 4800 anchors, 20 classes, NMS at the end
    "tiny_detector": {"opset": 17, "batch": 1, "image": 320, "classes": 21},
}


@dataclass
class ModelResult:
    """What one model's benchmark measured (``None`` where a stage did not get that far)."""

    name: str
    config: dict[str, Any]
    compile_s: float | None = None
    compile_breakdown_s: dict[str, float] = field(default_factory=dict)
    tensorsmith: Stats | None = None
    onnxruntime: Stats | None = None
    max_rel_error: float | None = None
    error: str | None = None
    traceback: str | None = None
    per_op: list[dict[str, Any]] | None = None
    records: str | None = None
    tuned: Stats | None = None  # the build with ``records`` applied
    tuned_max_rel_error: float | None = None

    @property
    def tuned_ratio(self) -> float | None:
        """ORT time / tuned tensorsmith time (median)."""
        if self.tuned is None or self.onnxruntime is None:
            return None
        return self.onnxruntime.median_ms / self.tuned.median_ms

    @property
    def ratio(self) -> float | None:
        """ORT time / tensorsmith time (median): above 1 means tensorsmith is faster."""
        if self.tensorsmith is None or self.onnxruntime is None:
            return None
        return self.onnxruntime.median_ms / self.tensorsmith.median_ms

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config,
            "compile_s": self.compile_s,
            "compile_breakdown_s": self.compile_breakdown_s,
            "tensorsmith": self.tensorsmith.as_dict() if self.tensorsmith else None,
            "onnxruntime": self.onnxruntime.as_dict() if self.onnxruntime else None,
            "ratio_ort_over_tensorsmith": self.ratio,
            "max_rel_error": self.max_rel_error,
            "error": self.error,
            "traceback": self.traceback,
            "per_op": self.per_op,
            "records": self.records,
            "tuned": self.tuned.as_dict() if self.tuned else None,
            "ratio_ort_over_tuned": self.tuned_ratio,
            "tuned_max_rel_error": self.tuned_max_rel_error,
        }


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    """ONNX Runtime on CPU: ``threads`` intra-op threads, one inter-op, sequential."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def bench_model(
    name: str,
    config: dict[str, Any],
    workdir: Path,
    *,
    repeat: int,
    warmup: int,
    threads: int,
    per_op: int = 0,
    records: str | None = None,
) -> ModelResult:
    """Compile ``MODELS[name](**config)`` and time it against ONNX Runtime.

    The two are timed interleaved (one tensorsmith run, one ORT run, ...), ``repeat``
    times each after ``warmup`` runs each. ``per_op > 0`` keeps that many of the slowest
    steps of ``m.profile()``. With ``records``, a second build applies them and is timed
    in the same interleaving.
    """
    result = ModelResult(name, dict(config), records=records)
    stage = "build ONNX model"
    try:
        model = MODELS[name](**config)
        feeds = sample_inputs(model)
        session = ort_session(model, threads)
        want = session.run(None, feeds)
    except Exception as exc:  # the model itself is broken: nothing to time
        result.error, result.traceback = describe_failure(stage, exc)
        return result

    def run_ort() -> list[np.ndarray]:
        return session.run(None, feeds)

    module = tuned = None
    try:
        stage = "import"
        start = time.perf_counter()
        mod, params = from_onnx(model, shape=input_shapes(model))
        imported = time.perf_counter()
        stage = "compile"
        lib = build(mod, target="llvm", params=params)
        built = time.perf_counter()
        stage = "export"
        artifact = workdir / f"{name}.so"
        lib.export_library(artifact)
        exported = time.perf_counter()
        result.compile_s = exported - start
        result.compile_breakdown_s = {
            "from_onnx": imported - start,
            "build": built - imported,
            "export_library": exported - built,
            **{f"build.{step}": seconds for step, seconds in getattr(lib, "timings", [])},
        }
        stage = "load"
        module = rt.load(artifact, device="cpu", num_threads=threads)
        stage = "run"
        got = module.run(feeds)
        result.max_rel_error = max(relative_error(g, w) for g, w in zip(got, want))
        stage = "time"
        tsm_module = module

        def run_tsm() -> list[np.ndarray]:
            return tsm_module.run(feeds)

        runners = [run_tsm, run_ort]
        if records is not None:
            stage = "compile with records"
            tuned_path = workdir / f"{name}.tuned.so"
            build(mod, target="llvm", params=params, records=records).export_library(tuned_path)
            tuned = rt.load(tuned_path, device="cpu", num_threads=threads)
            tuned_module = tuned
            got = tuned.run(feeds)
            result.tuned_max_rel_error = max(relative_error(g, w) for g, w in zip(got, want))

            def run_tuned() -> list[np.ndarray]:
                return tuned_module.run(feeds)

            runners.insert(1, run_tuned)
        stage = "time"
        stats = interleaved(runners, repeat=repeat, warmup=warmup)
        result.tensorsmith, result.onnxruntime = stats[0], stats[-1]
        if records is not None:
            result.tuned = stats[1]
        if per_op > 0:
            stage = "profile"
            report = module.profile(feeds, repeat=min(repeat, 10))
            runs = max(len(report.run_ms), 1)
            slowest = sorted(report, key=lambda e: e["total_ms"], reverse=True)[:per_op]
            result.per_op = [
                dict(e, calls_per_run=e["calls"] / runs, ms_per_run=e["total_ms"] / runs)
                for e in slowest
            ]
    except Exception as exc:
        result.error, result.traceback = describe_failure(stage, exc)
    finally:
        if module is not None:
            module.close()
        if tuned is not None:
            tuned.close()
    if result.onnxruntime is None:
        result.onnxruntime = time_runs(run_ort, repeat=repeat, warmup=warmup)
    return result
