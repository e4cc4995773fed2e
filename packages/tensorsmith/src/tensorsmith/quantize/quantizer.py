"""``quantize``: a float ONNX model and calibration samples in, a QDQ ONNX model out.

The steps, each in its own module: check the samples against the model (samples.py),
decide what to quantize (qdq.plan), compile the float model with those tensors exposed
and calibrate their ranges (engine.py, calibration.py), rewrite the model (qdq.rewrite),
then compile the result too and compare it with the float model (report.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from . import qdq
from .calibration import Progress, check_method, collect_ranges
from .engine import CompiledModel
from .errors import QuantizeError
from .qparams import ACTIVATION_TYPES
from .report import AccuracyReport, evaluate
from .samples import Feed, check_feeds, load_npz, shapes_of, split_samples

Samples = str | os.PathLike[str] | Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]]
"""An .npz path or a dict of arrays (a leading sample axis each), or a list of feeds."""


@dataclass
class QuantizeResult:
    """The QDQ model, the ranges calibration chose, what was quantized and what was left
    float (and why), and the accuracy report (None when evaluation was switched off)."""

    model: onnx.ModelProto
    ranges: dict[str, tuple[float, float]]
    quantized_nodes: list[tuple[str, str]]  # (node, op type)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (node, why)
    report: AccuracyReport | None = None

    def counts(self) -> dict[str, int]:
        """Quantized nodes per op type."""
        counts: dict[str, int] = {}
        for _, op in self.quantized_nodes:
            counts[op] = counts.get(op, 0) + 1
        return counts


def quantize(model: onnx.ModelProto | str | os.PathLike[str], calibration: Samples, *,
             method: str = "minmax", percentile: float = 99.99,
             activation_type: str = "uint8", op_types: Iterable[str] = qdq.QUANTIZED_OPS,
             quantize_outputs: bool = False, evaluation: Samples | None = None,
             evaluate_accuracy: bool = True, max_samples: int | None = None,
             target: str = "llvm", progress: Progress | None = None) -> QuantizeResult:
    """Quantize ``model`` post-training: int8 per-channel weights, ``activation_type``
    per-tensor activations on the inputs of ``op_types`` (and their outputs with
    ``quantize_outputs``), ranges calibrated by ``method`` (minmax, percentile, entropy)
    on ``calibration``. The accuracy report compares float and quantized outputs on
    ``evaluation`` (default: the calibration samples). ``progress`` wraps each pass over
    the samples (calibration.terminal_progress draws a bar). Bad input raises
    QuantizeError (a TensorsmithError)."""
    check_method(method, percentile)
    if activation_type not in ACTIVATION_TYPES:
        raise QuantizeError(f"unknown activation type {activation_type!r}; choose one of "
                            f"{', '.join(ACTIVATION_TYPES)}")
    proto = qdq.with_opset(_load(model))
    samples = _samples(proto, calibration, "calibration data", max_samples)
    eval_samples = samples if evaluation is None else _samples(proto, evaluation,
                                                               "evaluation data", max_samples)
    if shapes_of(eval_samples[0]) != shapes_of(samples[0]):
        raise QuantizeError("the evaluation samples must have the calibration samples' "
                            f"shapes: {shapes_of(eval_samples[0])} != {shapes_of(samples[0])}")
    todo = qdq.plan(proto, op_types, quantize_outputs)
    if not todo.nodes:
        raise QuantizeError("the model has no node to quantize (float32 "
                            f"{', '.join(sorted(set(op_types)))})")
    with CompiledModel(proto, shapes_of(samples[0]), expose=todo.tensors,
                       target=target) as engine:
        ranges = collect_ranges(engine, samples, todo.tensors, method, percentile, progress)
        quantized, done = qdq.rewrite(proto, todo, ranges, activation_type)
        result = QuantizeResult(quantized, {t: ranges[t] for t in done.tensors},
                                [(e.name, e.op_type) for e in done.nodes], done.skipped)
        if evaluate_accuracy:
            outputs = [v.name for v in proto.graph.output]
            with CompiledModel(quantized, shapes_of(samples[0]), target=target) as ours:
                result.report = evaluate(engine, ours, eval_samples, outputs, progress)
    return result


def _load(model: onnx.ModelProto | str | os.PathLike[str]) -> onnx.ModelProto:
    from tensorsmith.frontend.onnx import loader

    proto, _ = loader.load(model)
    return proto


def _samples(model: onnx.ModelProto, given: Any, what: str, limit: int | None) -> list[Feed]:
    if isinstance(given, str | os.PathLike | Path):
        return split_samples(model, load_npz(given, what.replace("data", "file")), what,
                             limit)
    if isinstance(given, Mapping):
        return split_samples(model, given, what, limit)
    feeds = list(given)
    return check_feeds(model, feeds[:limit] if limit else feeds, what)
