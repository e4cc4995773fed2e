"""Failures as one table-sized line plus the full traceback for the JSON file."""

from __future__ import annotations

import traceback

__all__ = ["describe_failure"]


def describe_failure(stage: str, exc: BaseException) -> tuple[str, str]:
    """``("stage: Type: first line [... first line mentioning an error]", traceback)``.

    Long messages (a C compiler's output inside a RuntimeError, say) keep their first line
    and the first later line that says ``error``, which is usually the cause.
    """
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    summary = lines[0] if lines else ""
    cause = next((line for line in lines[1:] if "error" in line.lower()), None)
    if cause is not None:
        summary = f"{summary[:60]}... {cause}"
    text = "".join(traceback.format_exception(exc))
    return f"{stage}: {type(exc).__name__}: {summary}", text
