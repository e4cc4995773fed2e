"""A one-line progress bar on stderr, redrawn after every tuning round.

On a terminal the line is rewritten in place; in a log (not a TTY) each round prints
its own line, so CI logs show the whole history.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from .tuner import TuneEvent


class ProgressBar:
    def __init__(self, stream: TextIO | None = None, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn = False

    def __call__(self, e: TuneEvent) -> None:
        frac = min(1.0, e.total_trials / max(e.budget, 1))
        filled = round(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        e2e = f"{e.e2e_seconds * 1e3:.3f} ms" if math.isfinite(e.e2e_seconds) else "n/a"
        errors = f"  {e.round_errors} failed" if e.round_errors else ""
        line = (f"[{bar}] {e.total_trials}/{e.budget}  {e.task.label}: {e.task_trials} trials, "
                f"best {e.best_gflops:.2f} GFLOP/s  est. end-to-end {e2e}  "
                f"{time.monotonic() - self.start:.0f} s{errors}")
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self._drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
