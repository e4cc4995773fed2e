"""What ``tensorsmith run --profile`` prints and writes: the per-kernel table and the trace.

The numbers come from the runtime (``GraphModule.profile``: per-step times from the
executor, ``ProfileReport.by_kernel`` joining the artifact's kernel metadata); this module
only lays them out for a terminal and writes the Chrome trace file.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

NODES_SHOWN = 4
"""Source-model nodes listed per kernel in the table; the trace has them all."""


def kernel_table(rows: list[dict[str, Any]], run_ms: list[float]) -> str:
    """Slowest kernel first: name, calls, total and mean ms, share of kernel time, and
    the fused ops (with the model's node names) each kernel holds."""
    ordered = sorted(rows, key=lambda r: r["total_ms"], reverse=True)
    head = ("kernel", "calls", "total ms", "mean ms", "%", "ops [nodes]")
    body = [
        (
            r["kernel"],
            str(r["calls"]),
            f"{r['total_ms']:.3f}",
            f"{r['mean_ms']:.4f}",
            f"{r['percent']:.1f}",
            _contents(r),
        )
        for r in ordered
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head) - 1)]
    lines = []
    for row in [head, *body]:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:-1], widths[1:])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    kernel_ms = sum(r["total_ms"] for r in rows)
    runs = len(run_ms)
    if runs:
        share = 100.0 * kernel_ms / sum(run_ms) if sum(run_ms) > 0 else 0.0
        lines.append(
            f"{runs} runs: median {statistics.median(run_ms):.3f} ms, min {min(run_ms):.3f} ms "
            f"per run (wall); kernels account for {share:.1f}% of it"
        )
    return "\n".join(lines)


def _contents(row: dict[str, Any]) -> str:
    ops = "+".join(row["ops"]) or "-"
    nodes = row["nodes"]
    if not nodes:
        return ops
    shown = ", ".join(nodes[:NODES_SHOWN])
    more = f", +{len(nodes) - NODES_SHOWN} more" if len(nodes) > NODES_SHOWN else ""
    return f"{ops} [{shown}{more}]"


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    """Write a Chrome trace (open it in chrome://tracing or https://ui.perfetto.dev)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f)
