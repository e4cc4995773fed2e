"""The child process of the runner: runs cases and reports each one's outcome.

It reads a JSON list of ``[campaign, seed]`` from stdin and writes JSON lines on the
stdout it was given: ``{"begin": i}`` before case ``i`` and ``{"i": i, "outcome", "detail"}``
after it, so the runner knows which case a crash or hang belongs to. Anything the
compiler or native code prints goes to stderr instead, never into that channel.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

from tensorsmith.ir.records import RecordWarning
from tensorsmith.runtime.errors import TensorsmithError

from .campaigns import CAMPAIGNS


def classify(campaign: str, seed: int, work: Path) -> tuple[str, str]:
    """(outcome, detail) of one case, short of a crash or hang (the runner sees those)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            why = CAMPAIGNS[campaign](seed, work)
        except TensorsmithError as e:
            return "clean", f"{type(e).__name__}: {_first_line(e)}"
        except Exception as e:
            return "internal", f"{type(e).__name__}: {_first_line(e)} ({_where(e)})"
    if why is not None:
        return "wrong", why
    skipped = [w for w in caught if issubclass(w.category, RecordWarning)]
    if skipped:
        return "clean", f"RecordWarning: {_first_line(skipped[0].message)}"
    return "ok", ""


def _first_line(e: object) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else ""


def _where(e: BaseException) -> str:
    """The innermost frame: where an internal error was raised."""
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def main() -> None:
    cases = json.load(sys.stdin)
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints, Python's or native code's, go to stderr
    with tempfile.TemporaryDirectory(prefix="tsm-fuzz-") as root:
        for i, (campaign, seed) in enumerate(cases):
            print(json.dumps({"begin": i}), file=channel, flush=True)
            work = Path(root) / f"case{i}"
            work.mkdir()
            outcome, detail = classify(campaign, seed, work)
            print(json.dumps({"i": i, "outcome": outcome, "detail": detail}), file=channel,
                  flush=True)


if __name__ == "__main__":
    main()
