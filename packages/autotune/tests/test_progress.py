"""The progress bars of `tensorsmith tune`: what they show, and that they end their lines."""

from __future__ import annotations

import io

import pytest
from autotune_testing import mlp

from tensorsmith.autotune.progress import TuneProgress, format_seconds
from tensorsmith.autotune.task import extract_tasks
from tensorsmith.autotune.tuner import TuneEvent

TASKS = extract_tasks(mlp())


def _event(index: int, total: int, stage: str = "search") -> TuneEvent:
    return TuneEvent(TASKS[index], 2, total, 8, 12.5e-6, 1.0, 1e-4, 0, index, len(TASKS), stage)


def _drawn(stream: io.StringIO) -> str:
    """The last state of each drawn line (what a terminal shows once it is done)."""
    return "\n".join(line.split("\r")[-1] for line in stream.getvalue().split("\n"))


def test_bars_show_kernel_trials_best_and_time_left_and_end_their_lines() -> None:
    stream = io.StringIO()
    with TuneProgress(8, file=stream, disable=False) as progress:
        progress(_event(0, 2))
        progress(_event(1, 4))
        progress(_event(0, 8))
        progress(_event(0, 8, "confirm"))
        progress(_event(2, 8, "confirm"))
    text = stream.getvalue()
    assert text.endswith("\n")  # no dangling line for the next print to land on
    lines = _drawn(stream).splitlines()
    search, confirm = lines
    assert search.startswith("searched") and "8/8" in search
    assert confirm.startswith("re-measuring") and "3/3" in confirm  # finished: all kernels
    assert "kernel 2/3" in text and TASKS[1].label in text  # each kernel as it is tuned
    assert f"{TASKS[0].label}: 2 trials, best 12.5 us alone" in text
    assert "<" in text and ("trial/s" in text or "s/trial" in text)  # time left, rate


def test_an_interrupted_run_still_ends_the_line() -> None:
    stream = io.StringIO()
    with pytest.raises(KeyboardInterrupt), TuneProgress(8, file=stream, disable=False) as p:
        p(_event(0, 2))
        raise KeyboardInterrupt
    assert stream.getvalue().endswith("\n")
    assert "2/8" in _drawn(stream)  # not claimed finished


def test_a_resumed_run_starts_at_the_trials_already_measured() -> None:
    stream = io.StringIO()
    TuneProgress(8, 6, file=stream, disable=False).close()
    assert "6/8" in _drawn(stream)


def test_quiet_when_not_a_terminal() -> None:
    stream = io.StringIO()  # no TTY: tqdm draws nothing by default
    with TuneProgress(8, file=stream) as progress:
        progress(_event(0, 2))
    assert stream.getvalue() == ""


@pytest.mark.parametrize(("seconds", "text"), [(9.5e-7, "0.95 us"), (1.25e-3, "1.25 ms"),
                                               (2.1, "2.1 s"), (float("inf"), "-")])
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text
