"""The progress of ``tensorsmith tune`` as tqdm bars on stderr.

The search is one bar over the trial budget: tqdm keeps the rate and the time left, the
description says which kernel is being tuned (``kernel 2/4``), and after the bar come its
name, its trials and its best time so far. That time is the search's own measurement
(the kernel timed alone), labelled so: the numbers worth comparing come after the bars,
timed inside the model. Re-measuring the front-runners at the end gets a second bar, one
step per kernel.

With ``disable=None`` (the default) tqdm draws nothing when stderr is not a terminal, so
logs and captured output get no carriage returns; what matters is printed afterwards.
:meth:`TuneProgress.close` ends every bar drawn with its line, also when tuning stops
early (an error, Ctrl-C), so nothing printed next lands on a half-drawn line.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import TextIO

from tqdm import tqdm

from .tuner import TuneEvent


def format_seconds(seconds: float) -> str:
    """``0.95 us``, ``12.3 us``, ``1.25 ms``, ``2.1 s``; ``-`` when nothing succeeded."""
    if not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} us"


class TuneProgress:
    """A :class:`~.tuner.Tuner` callback drawing the search and confirmation bars.

    ``budget`` is the tuner's trial budget and ``done`` the trials the records held
    already (a resumed run starts there, and the time left counts only new trials)."""

    def __init__(self, budget: int, done: int = 0, *, file: TextIO | None = None,
                 disable: bool | None = None) -> None:
        self._file = file
        self._disable = disable
        # mininterval=0: an event comes once per round, seconds apart; each one is drawn
        self.search: tqdm = tqdm(total=budget, initial=min(done, budget), unit="trial",
                                 desc="tuning", file=file, disable=disable, leave=True,
                                 dynamic_ncols=True, mininterval=0)
        self.confirm: tqdm | None = None

    def __call__(self, e: TuneEvent) -> None:
        if e.stage == "confirm":
            self._confirming(e)
            return
        self.search.set_description_str(f"kernel {e.task_index + 1}/{e.task_count}",
                                        refresh=False)
        errors = f", {e.round_errors} failed" if e.round_errors else ""
        self.search.set_postfix_str(
            f"{e.task.label}: {e.task_trials} trials, best {format_seconds(e.best_seconds)} "
            f"alone{errors}", refresh=False)
        self.search.update(max(0, min(e.total_trials, e.budget) - self.search.n))

    def _confirming(self, e: TuneEvent) -> None:
        """The search is over: its bar ends, one over the kernels' re-measuring begins."""
        if self.confirm is None:
            self._end_search()
            self.confirm = tqdm(total=e.task_count, unit="kernel", desc="re-measuring",
                                file=self._file, disable=self._disable, leave=True,
                                dynamic_ncols=True, mininterval=0)
        self.confirm.set_postfix_str(e.task.label, refresh=False)
        self.confirm.update(max(0, e.task_index - self.confirm.n))

    def _end_search(self) -> None:
        """The search's last line: how many trials in all, not the last kernel's."""
        if not self.search.disable:
            self.search.set_description_str("searched", refresh=False)
            self.search.set_postfix_str("", refresh=False)
        self.search.close()

    def finish(self) -> None:
        """Tuning completed: the search's line says so, the confirmation bar (if any)
        shows every kernel done."""
        if self.confirm is None:
            self._end_search()
        else:
            self.confirm.set_postfix_str("", refresh=False)
            self.confirm.update(self.confirm.total - self.confirm.n)

    def close(self) -> None:
        """End the bars' lines (idempotent)."""
        self.search.close()
        if self.confirm is not None:
            self.confirm.close()

    def __enter__(self) -> TuneProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.finish()
        self.close()
