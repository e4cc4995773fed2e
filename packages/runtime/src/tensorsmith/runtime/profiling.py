"""Per-step timings of profiled runs, and the views people read them through.

Kept apart from the executors so every backend (CPU, OpenCL, Vulkan) reports the same
shape of result: one duration per step per run, plus the wall time of each whole run.
The views are plain Python (no NumPy), so the runtime stays cheap to import:

* the report itself is a list with one entry per step *name* (what the fused ops are
  called), for a quick look;
* :meth:`ProfileReport.by_kernel` groups per *kernel* and joins the artifact's metadata
  (``kernels``: the fused ops and source-model nodes each kernel holds), which is what
  tells a user which part of their model costs the time;
* :meth:`ProfileReport.chrome_trace` is the Chrome trace-event JSON that
  chrome://tracing and https://ui.perfetto.dev open, one event per kernel call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensorsmith.runtime.kernel_names import kernel_labels

__all__ = ["ProfileReport", "summarize"]


class ProfileReport(list):
    """A list of ``{"name", "calls", "total_ms", "mean_ms", "percent"}``, one per step name,
    with ``run_ms`` (the wall time of each profiled run), ``step_ms`` (per run, each step's
    time, in plan order) and ``step_names``, all in milliseconds."""

    def __init__(
        self,
        entries: Sequence[dict[str, Any]],
        run_ms: Sequence[float],
        step_ms: Sequence[Sequence[float]] = (),
        step_names: Sequence[str] = (),
    ) -> None:
        super().__init__(entries)
        self.run_ms = list(run_ms)
        self.step_ms = [list(times) for times in step_ms]
        self.step_names = list(step_names)

    @property
    def mean_run_ms(self) -> float:
        return sum(self.run_ms) / len(self.run_ms) if self.run_ms else 0.0

    def kernel_ms_per_run(self) -> list[float]:
        """The summed step times of each run: what the kernels account for of ``run_ms``."""
        return [sum(times) for times in self.step_ms]

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

    # ---- per kernel -------------------------------------------------------------------

    def by_kernel(self, metadata: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """One ``{"kernel", "symbol", "ops", "nodes", "calls", "total_ms", "mean_ms",
        "percent"}`` per kernel, in the order kernels first run; ``kernel`` is the name
        every tool prints (:mod:`.kernel_names`), ``symbol`` the kernel's function in the
        artifact, ``percent`` its share of all kernel time.

        Steps map to kernels through ``metadata["steps"]`` (the artifact's plan: step i
        calls kernel ``steps[i]["kernel"]``), and ``metadata["kernels"]`` says which ops
        and nodes each kernel holds. Without usable metadata each step name stands for a
        kernel and ops and nodes are empty.
        """
        kernels = _step_kernels(metadata, len(self.step_names)) or [
            {"name": name, "symbol": name, "ops": [], "nodes": []} for name in self.step_names
        ]
        rows: dict[str, dict[str, Any]] = {}
        for times in self.step_ms:
            for kernel, ms in zip(kernels, times, strict=True):
                row = rows.setdefault(
                    kernel["symbol"],
                    {
                        "kernel": kernel["name"],
                        "symbol": kernel["symbol"],
                        "ops": list(kernel["ops"]),
                        "nodes": list(kernel["nodes"]),
                        "calls": 0,
                        "total_ms": 0.0,
                    },
                )
                row["calls"] += 1
                row["total_ms"] += ms
        grand_total = sum(r["total_ms"] for r in rows.values())
        for r in rows.values():
            r["mean_ms"] = r["total_ms"] / r["calls"]
            r["percent"] = 100.0 * r["total_ms"] / grand_total if grand_total > 0 else 0.0
        return list(rows.values())

    def chrome_trace(
        self, metadata: Mapping[str, Any] | None = None, *, label: str = "tensorsmith"
    ) -> dict[str, Any]:
        """The runs as Chrome trace events (``ph: "X"``, ``ts``/``dur`` in microseconds).

        One event per kernel call (``cat: "kernel"``, named as every tool names the kernel,
        ``args``: step index, run, step name, kernel symbol, ops, nodes) on thread 1, one
        per run (``cat: "run"``) on thread 0. Executors report durations, not start times,
        so runs are laid end to end and each run's kernel calls end to end from the run's
        start; the gap at a run's end is time spent outside the kernels (the call from
        Python, timers).
        """
        kernels = _step_kernels(metadata, len(self.step_names))
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": label}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "runs"}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "kernels"}},
        ]
        start_us = 0.0
        for run, run_ms in enumerate(self.run_ms):
            events.append(_event(f"run {run}", "run", start_us, run_ms, 0, {"run": run}))
            times = self.step_ms[run] if run < len(self.step_ms) else []
            ts = start_us
            for step, ms in enumerate(times):
                step_name = self.step_names[step] if step < len(self.step_names) else ""
                kernel: dict[str, Any] = (
                    kernels[step]
                    if kernels
                    else {"name": step_name, "symbol": step_name, "ops": [], "nodes": []}
                )
                args = {
                    "step": step,
                    "run": run,
                    "step_name": step_name,
                    "symbol": kernel["symbol"],
                    "ops": list(kernel["ops"]),
                    "nodes": list(kernel["nodes"]),
                }
                events.append(_event(kernel["name"], "kernel", ts, ms, 1, args))
                ts += ms * 1e3
            start_us += max(run_ms * 1e3, ts - start_us)
        return {"traceEvents": events, "displayTimeUnit": "ms"}


def _event(name: str, cat: str, ts_us: float, ms: float, tid: int, args: dict) -> dict[str, Any]:
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": round(ts_us, 3),
        "dur": round(ms * 1e3, 3),
        "pid": 1,
        "tid": tid,
        "args": args,
    }


def _step_kernels(metadata: Mapping[str, Any] | None, num_steps: int) -> list[dict[str, Any]]:
    """For each step, ``{"name", "symbol", "ops", "nodes"}`` of the kernel it calls
    (``name`` from :func:`.kernel_names.kernel_labels`); [] when the metadata does not
    describe exactly these steps (an artifact from another producer)."""
    if not isinstance(metadata, Mapping):
        return []
    steps, kernels = metadata.get("steps"), metadata.get("kernels")
    if not isinstance(steps, list) or len(steps) != num_steps:
        return []
    described: dict[str, dict[str, Any]] = {}
    labels = kernel_labels(metadata)
    if isinstance(kernels, list):
        for k in kernels:
            if isinstance(k, Mapping) and isinstance(k.get("name"), str):
                described[k["name"]] = {
                    "name": labels.get(k["name"], k["name"]),
                    "symbol": k["name"],
                    "ops": [str(op) for op in k.get("ops") or []],
                    "nodes": [str(node) for node in k.get("nodes") or []],
                }
    out = []
    for step in steps:
        name = step.get("kernel") if isinstance(step, Mapping) else None
        if not isinstance(name, str):
            return []
        kernel = described.get(name, {"name": name, "symbol": name, "ops": [], "nodes": []})
        nodes = step.get("nodes")  # a kernel shared by several steps: this step's own nodes
        if isinstance(nodes, list):
            kernel = {**kernel, "nodes": [str(node) for node in nodes]}
        out.append(kernel)
    return out


def summarize(
    step_names: Sequence[str], runs: Sequence[Sequence[float]], run_ms: Sequence[float]
) -> ProfileReport:
    """Sum each run's per-step milliseconds by step name (keeping the raw times too)."""
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
    return ProfileReport(list(entries.values()), run_ms, runs, step_names)
