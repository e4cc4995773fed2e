"""Tuning curves as a PNG: each task's best time against its trials, and the model's
estimated end-to-end kernel time against all trials.

Per-task curves are drawn relative to the task's first successful measurement (its
default schedule, normally), so tasks of very different sizes share one axis: a curve
at 0.5 means the task runs twice as fast as it started. matplotlib draws the figure
when it is installed; otherwise the small built-in rasterizer (:mod:`.png`) does.
"""

from __future__ import annotations

import math
from pathlib import Path

from .png import Canvas
from .tuner import TuneResult

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]

Series = list[tuple[float, float]]


def curves(result: TuneResult) -> tuple[list[tuple[str, Series]], Series]:
    """(label, [(task trials, best / first best)]) per task, and [(trials, e2e ms)]."""
    n = len(result.tasks)
    first = [math.inf] * n
    for _, i, best in result.curve:
        if i < n and math.isfinite(best) and not math.isfinite(first[i]):
            first[i] = best
    counts = [0] * n
    per_task: list[Series] = [[] for _ in range(n)]
    best_now = list(first)
    e2e: Series = []
    for total, i, best in result.curve:
        if i >= n:
            continue
        counts[i] += 1
        if math.isfinite(best):
            best_now[i] = best
            per_task[i].append((counts[i], best / first[i]))
        known = [t.weight * b for t, b in zip(result.tasks, best_now) if math.isfinite(b)]
        if known:
            e2e.append((total, sum(known) * 1e3))
    labels = [(t.label, s) for t, s in zip(result.tasks, per_task) if s]
    return labels, e2e


def plot_curves(result: TuneResult, path: str | Path) -> str:
    """Write the PNG; returns the backend used ("matplotlib" or "builtin")."""
    per_task, e2e = curves(result)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _builtin(per_task, e2e, Path(path))
        return "builtin"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8))
    for label, series in per_task:
        top.step(*zip(*series), where="post", label=label)
    top.set_xlabel("trials of the task")
    top.set_ylabel("best time / first time")
    top.set_title("best time per task")
    if per_task:
        top.legend(fontsize="small")
    if e2e:
        bottom.step(*zip(*e2e), where="post", color="black")
    bottom.set_xlabel("trials (all tasks)")
    bottom.set_ylabel("ms")
    bottom.set_title("estimated end-to-end kernel time")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return "matplotlib"


def _builtin(per_task: list[tuple[str, Series]], e2e: Series, path: Path) -> None:
    canvas = Canvas(900, 760)
    _panel(canvas, (80, 40, 860, 330), [(s, PALETTE[k % len(PALETTE)])
                                         for k, (_, s) in enumerate(per_task)],
           "BEST TIME / FIRST TIME PER TASK VS TASK TRIALS")
    _panel(canvas, (80, 440, 860, 720), [(e2e, (0, 0, 0))] if e2e else [],
           "ESTIMATED END-TO-END MS VS TRIALS")
    x, y = 80, 365
    for k, (label, _) in enumerate(per_task[:12]):
        color = PALETTE[k % len(PALETTE)]
        if x + Canvas.text_width(label) + 40 > 880:
            x, y = 80, y + 18
        canvas.rect(x, y + 2, x + 12, y + 10, color)
        x = canvas.text(x + 18, y, label) + 20
    canvas.save(path)


def _panel(canvas: Canvas, box: tuple[int, int, int, int],
           series: list[tuple[Series, tuple[int, int, int]]], title: str) -> None:
    x0, y0, x1, y1 = box
    canvas.text(x0, y0 - 22, title)
    canvas.line(x0, y1, x1, y1, (0, 0, 0))
    canvas.line(x0, y0, x0, y1, (0, 0, 0))
    points = [p for s, _ in series for p in s]
    if not points:
        canvas.text(x0 + 20, (y0 + y1) // 2, "NO MEASUREMENTS")
        return
    xmax = max(max(p[0] for p in points), 1.0)
    ylo, yhi = min(p[1] for p in points), max(p[1] for p in points)
    if yhi - ylo < 1e-12:
        ylo, yhi = ylo * 0.9, yhi * 1.1 + 1e-12
    pad = (yhi - ylo) * 0.05
    ylo, yhi = ylo - pad, yhi + pad

    def to_px(x: float, y: float) -> tuple[float, float]:
        return (x0 + (x1 - x0) * x / xmax, y1 - (y1 - y0) * (y - ylo) / (yhi - ylo))

    for frac in (0.25, 0.5, 0.75, 1.0):
        yy = y1 - (y1 - y0) * frac
        canvas.line(x0 + 1, yy, x1, yy, (225, 225, 225))
    for s, color in series:
        prev = None
        for x, y in s:
            px, py = to_px(x, y)
            if prev is not None:
                canvas.line(prev[0], prev[1], px, prev[1], color, 2)  # a step: across, then
                canvas.line(px, prev[1], px, py, color, 2)  # down to the new best
            prev = (px, py)
        if prev is not None:
            canvas.line(prev[0], prev[1], x1, prev[1], color, 2)
    for value in (ylo + pad, yhi - pad):
        label = f"{value:.3g}"
        _, py = to_px(0, value)
        canvas.text(x0 - Canvas.text_width(label) - 6, int(py) - 5, label)
    canvas.text(x0 - 4, y1 + 8, "0")
    label = f"{xmax:.0f}"
    canvas.text(x1 - Canvas.text_width(label), y1 + 8, label)
