"""Timing and accuracy measurements: warm-up, repeated runs, median and min; relative error.

No assertions on times anywhere: these numbers are reported, never checked.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["BlockTimer", "Stats", "call_timer", "interleaved", "interleaved_blocks",
           "relative_error", "time_runs"]


@dataclass(frozen=True)
class Stats:
    """Wall times of repeated runs, in milliseconds."""

    median_ms: float
    min_ms: float
    runs: int

    @classmethod
    def of(cls, times_ms: Sequence[float]) -> Stats:
        return cls(statistics.median(times_ms), min(times_ms), len(times_ms))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def time_runs(
    fn: Callable[[], Any], repeat: int, warmup: int = 3, max_seconds: float | None = None
) -> Stats:
    """Call ``fn`` ``warmup`` times untimed, then time up to ``repeat`` calls.

    With ``max_seconds``, stop early once that much time went into timed calls (but never
    before 3 of them): for measurements whose single run can take seconds.
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < repeat:
        times.append(_once(fn))
        spent += times[-1] / 1e3
        if max_seconds is not None and spent > max_seconds and len(times) >= 3:
            break
    return Stats.of(times)


#: Runs ``untimed`` calls, then ``count`` timed ones; returns their times in ms. (A
#: timer may run its calls elsewhere, as the numpy GEMM process does.)
BlockTimer = Callable[[int, int], list[float]]


def interleaved(
    fns: Sequence[Callable[[], Any]], repeat: int, warmup: int = 3, block: int = 10,
    settle_s: float = 0.1,
) -> list[Stats]:
    """Time several functions in alternating blocks, ``repeat`` timed calls each.

    After ``warmup`` untimed calls of each, rounds run ``block`` timed calls of the first,
    then of the second, ... Each block starts after a ``settle_s`` pause and one more
    untimed call: the pause lets the previous engine's thread pool stop spinning (ONNX
    Runtime's workers poll for a while after every run, and on two cores that polling
    competes with the next engine's threads), the call wakes this engine's own pool.
    Alternating spreads slow drifts of the machine (frequency, other load) over all.
    """
    return interleaved_blocks([call_timer(fn) for fn in fns], repeat, warmup, block, settle_s)


def call_timer(fn: Callable[[], Any]) -> BlockTimer:
    """A block timer that calls ``fn`` in this process."""

    def run_block(count: int, untimed: int) -> list[float]:
        for _ in range(untimed):
            fn()
        return [_once(fn) for _ in range(count)]

    return run_block


def interleaved_blocks(
    timers: Sequence[BlockTimer], repeat: int, warmup: int = 3, block: int = 10,
    settle_s: float = 0.1,
) -> list[Stats]:
    """:func:`interleaved` over block timers: ``warmup`` untimed calls of each first, then
    rounds of one block per timer, each after a ``settle_s`` pause and one untimed call."""
    for run_block in timers:
        run_block(0, warmup)
    times: list[list[float]] = [[] for _ in timers]
    while len(times[0]) < repeat:
        count = min(block, repeat - len(times[0]))
        for run_block, ts in zip(timers, times):
            time.sleep(settle_s)
            ts.extend(run_block(count, 1))
    return [Stats.of(ts) for ts in times]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """``max |got - want| / max |want|``, in float64 (``inf`` when shapes differ)."""
    if got.shape != want.shape:
        return float("inf")
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got64.size == 0:
        return 0.0
    return float(np.abs(got64 - want64).max() / max(np.abs(want64).max(), 1e-30))
