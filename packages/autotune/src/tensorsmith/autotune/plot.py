"""Tuning curves as a PNG, drawn by matplotlib: each kernel's best time against its trials.

matplotlib is an optional dependency (``pip install 'tensorsmith-autotune[plot]'``), so
tuning itself never needs it; :func:`plot_curves` raises :class:`PlotUnavailable`, naming
that command, where it is missing.

The times are the search's, each kernel timed alone (cold caches, a fresh process): they
show how the search progressed, not what the model gains (``tensorsmith tune`` prints
that, timed inside the model). One logarithmic axis holds kernels of very different sizes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .tuner import TuneResult

PLOT_INSTALL = "pip install 'tensorsmith-autotune[plot]'"

Series = list[tuple[int, float]]


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def curves(result: TuneResult) -> list[tuple[str, Series]]:
    """Per kernel (its name, as every tool prints it), [(its trials so far, its best
    seconds so far)] from its first successful measurement on; kernels that never
    succeeded are left out."""
    n = len(result.tasks)
    counts = [0] * n
    series: list[Series] = [[] for _ in range(n)]
    for _, i, best in result.curve:
        if i >= n:
            continue
        counts[i] += 1
        if math.isfinite(best):
            series[i].append((counts[i], best))
    return [(t.label, s) for t, s in zip(result.tasks, series) if s]


def matplotlib_pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable(f"drawing the tuning curves needs matplotlib: {PLOT_INSTALL}"
                              ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(result: TuneResult, path: str | Path) -> Path:
    """Write the curves of ``result`` to the PNG ``path``; returns it."""
    plt = matplotlib_pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(9, 5.5))
    try:
        for label, series in curves(result):
            trials, best = zip(*series)
            ax.step(trials, [b * 1e3 for b in best], where="post", label=label)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are whole
        ax.set_xlabel("trials of the kernel")
        ax.set_ylabel("best time so far (ms, kernel timed alone)")
        ax.set_title("tuning curves")
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(path, dpi=100, format="png")
    finally:
        plt.close(fig)
    return Path(path)
