"""The accuracy report: how far the quantized model's outputs are from the float model's.

Both models are compiled by tensorsmith and run on the same samples (the calibration
set, or a separate evaluation set). Per output it gives the largest absolute error, that
error relative to the largest float value (a scale-free figure), the mean absolute
error, and for classifier-shaped outputs ([N, classes]) how often the top-1 class is the
same -- the figure that matters for a classifier, where logits may move a little as long
as the winner does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .calibration import Progress
from .engine import CompiledModel
from .samples import Feed


@dataclass
class OutputAccuracy:
    """One graph output, over every evaluated sample."""

    name: str
    max_abs_error: float = 0.0
    sum_abs_error: float = 0.0
    count: int = 0
    max_abs_float: float = 0.0
    rows: int = 0  # classifier rows seen (0: not classifier-shaped)
    agreeing: int = 0  # rows whose top-1 class is the same

    @property
    def relative_error(self) -> float:
        return self.max_abs_error / self.max_abs_float if self.max_abs_float else 0.0

    @property
    def mean_abs_error(self) -> float:
        return self.sum_abs_error / self.count if self.count else 0.0

    @property
    def top1_agreement(self) -> float | None:
        return self.agreeing / self.rows if self.rows else None

    def add(self, reference: np.ndarray, quantized: np.ndarray) -> None:
        ref = np.asarray(reference, dtype=np.float64)
        err = np.abs(np.asarray(quantized, dtype=np.float64) - ref)
        if err.size:
            self.max_abs_error = max(self.max_abs_error, float(err.max()))
            self.max_abs_float = max(self.max_abs_float, float(np.abs(ref).max()))
        self.sum_abs_error += float(err.sum())
        self.count += err.size
        if ref.ndim == 2 and ref.shape[1] > 1:
            self.rows += ref.shape[0]
            self.agreeing += int(np.sum(ref.argmax(1) == np.asarray(quantized).argmax(1)))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "max_abs_error": self.max_abs_error,
                "relative_error": self.relative_error, "mean_abs_error": self.mean_abs_error,
                "max_abs_float": self.max_abs_float, "top1_agreement": self.top1_agreement,
                "rows": self.rows}


@dataclass
class AccuracyReport:
    samples: int
    outputs: list[OutputAccuracy]

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "outputs": [o.to_json() for o in self.outputs]}


def evaluate(reference: CompiledModel, quantized: CompiledModel, samples: Sequence[Feed],
             outputs: Sequence[str], progress: Progress | None = None) -> AccuracyReport:
    """Run both models on every sample and compare ``outputs`` (the float model's own)."""
    accuracy = {name: OutputAccuracy(name) for name in outputs}
    steps = progress(samples, len(samples), "evaluating") if progress else iter(samples)
    for feed in steps:
        ref, ours = reference.run(feed), quantized.run(feed)
        for name, acc in accuracy.items():
            acc.add(ref[name], ours[name])
    return AccuracyReport(len(samples), list(accuracy.values()))


def format_report(report: AccuracyReport) -> str:
    """A table for a terminal, one line per output."""
    lines = [f"accuracy of the quantized model against the float one, {report.samples} "
             "samples:",
             f"  {'output':<20} {'max abs err':>12} {'rel err':>9} {'mean abs err':>13} "
             f"{'top-1 agree':>12}"]
    for o in report.outputs:
        top1 = "-" if o.top1_agreement is None else (
            f"{100 * o.top1_agreement:.1f}% ({o.agreeing}/{o.rows})")
        lines.append(f"  {o.name:<20} {o.max_abs_error:>12.4g} {100 * o.relative_error:>8.2f}% "
                     f"{o.mean_abs_error:>13.4g} {top1:>12}")
    return "\n".join(lines)
