"""Per-step timings of profiled runs, summed per step name.

Kept apart from the executor so every backend (CPU now, GPUs later) reports the same
shape of result: one entry per step name, in the order the steps first run, plus the wall
time of each whole run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ProfileReport", "summarize"]


class ProfileReport(list):
    """A list of ``{"name", "calls", "total_ms", "mean_ms", "percent"}``, one per step name,
    with ``run_ms``: the wall time of each profiled run, in milliseconds."""

    def __init__(self, entries: Sequence[dict[str, Any]], run_ms: Sequence[float]) -> None:
        super().__init__(entries)
        self.run_ms = list(run_ms)

    @property
    def mean_run_ms(self) -> float:
        return sum(self.run_ms) / len(self.run_ms) if self.run_ms else 0.0

    def table(self) -> str:
        """A text table, slowest step first, for printing."""
        rows = sorted(self, key=lambda e: e["total_ms"], reverse=True)
        width = max([len("step")] + [len(e["name"]) for e in rows])
        lines = [f"{'step':<{width}}  {'calls':>6}  {'total ms':>10}  {'mean ms':>9}  {'%':>5}"]
        for e in rows:
            lines.append(
                f"{e['name']:<{width}}  {e['calls']:>6}  {e['total_ms']:>10.3f}  "
                f"{e['mean_ms']:>9.4f}  {e['percent']:>5.1f}"
            )
        lines.append(f"{len(self.run_ms)} runs, {self.mean_run_ms:.3f} ms per run (wall)")
        return "\n".join(lines)


def summarize(
    step_names: Sequence[str], runs: Sequence[Sequence[float]], run_ms: Sequence[float]
) -> ProfileReport:
    """Sum each run's per-step milliseconds by step name."""
    entries: dict[str, dict[str, Any]] = {}
    for times in runs:
        for name, ms in zip(step_names, times, strict=True):
            entry = entries.setdefault(name, {"name": name, "calls": 0, "total_ms": 0.0})
            entry["calls"] += 1
            entry["total_ms"] += ms
    grand_total = sum(e["total_ms"] for e in entries.values())
    for e in entries.values():
        e["mean_ms"] = e["total_ms"] / e["calls"]
        e["percent"] = 100.0 * e["total_ms"] / grand_total if grand_total > 0 else 0.0
    return ProfileReport(list(entries.values()), run_ms)
