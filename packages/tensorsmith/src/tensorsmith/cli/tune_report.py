"""What ``tensorsmith tune`` prints when it is done: the account taken inside the model.

Every time here comes from one :class:`~tensorsmith.autotune.outcome.Outcome`: the model
built without and with the records, timed together the way ``tensorsmith run --profile``
times it. The search's own timings (each kernel alone, caches flushed) rank candidates
but are no measure of the model, and next to in-model numbers they read as gains the
model never sees; so the search contributes counts only (trials, failures).
"""

from __future__ import annotations

import math
from typing import Any

NOTE = ("(medians of {runs} runs of each build, interleaved, timed as `tensorsmith run "
        "--profile` times them; 'tuned' is the build the compile line below makes; a kernel "
        "whose schedule is 'default' runs the same code in both, so its ratio is the "
        "measurement's noise)")


def _ms(value: float) -> str:
    return f"{value:.4f}" if math.isfinite(value) else "-"


def _times(value: float) -> str:
    return f"{value:.2f}x" if math.isfinite(value) else "-"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell: the first left-aligned, the others right."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in [head, *rows]]


def outcome_lines(outcome: Any, trials: list[int], errors: list[int]) -> list[str]:
    """The table of kernels (named as inspect and run --profile name them) and the model's
    kernel and wall time per run, default build against tuned build. ``trials`` and
    ``errors`` count each kernel's measurements (the tuner's result, task order)."""
    rows: list[tuple[str, ...]] = []
    for k, n, err in zip(outcome.kernels, trials, errors, strict=True):
        rows.append((k.task.label, str(k.task.weight), str(n), str(err), _ms(k.default_ms),
                     _ms(k.tuned_ms), _times(k.speedup), "tuned" if k.tuned else "default"))
    rows.append(("model: kernels per run", "", "", "", _ms(outcome.default.kernel_ms),
                 _ms(outcome.tuned.kernel_ms), _times(outcome.kernel_speedup), ""))
    rows.append(("model: wall time per run", "", "", "", _ms(outcome.default.run_ms),
                 _ms(outcome.tuned.run_ms), _times(outcome.run_speedup), ""))
    head = ("kernel", "uses", "trials", "errors", "default ms", "tuned ms", "speedup",
            "schedule")
    return [*_table(head, rows), NOTE.format(runs=outcome.rounds * outcome.repeat)]
