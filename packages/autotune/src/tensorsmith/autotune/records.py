"""Writing tuning records: one JSON line per measured candidate, appended and flushed.

The format is the one ``tensorsmith.ir.records`` reads (and ``build(records=...)``
applies): ``workload``, ``target``, ``steps``, ``costs`` (seconds per repeat), ``error``
(null or a message) and ``versions``. Each line is written with one ``write`` and
flushed at once, so a tuner killed at any moment loses at most the candidate being
measured. Opening a file left by a killed run first cuts a torn last line, so new lines
never follow half a line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tensorsmith.ir.records import read_records
from tensorsmith.ir.target import Target
from tensorsmith.ir.targets import installed_kinds, target_info
from tensorsmith.ir.te.schedule import Step


def versions(target: str) -> dict[str, str]:
    """Versions of the distributions that produced a record for ``target``: the
    compiler, the tuner and the target's plug-in."""
    dists = ["tensorsmith-ir", "tensorsmith-autotune"]
    kind = Target.parse(target, installed=False).kind
    if kind in installed_kinds():
        dists.append(target_info(kind).distribution)
    out = {}
    for dist in filter(None, dists):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            continue
    return out


def make_record(workload: str, target: str, steps: Sequence[Step] | Sequence[list[Any]],
                costs: Sequence[float], error: str | None) -> dict[str, Any]:
    return {
        "workload": workload,
        "target": target,
        "steps": [s.to_json() if isinstance(s, Step) else list(s) for s in steps],
        "costs": [float(c) for c in costs],
        "error": error,
        "versions": versions(target),
    }


def repair_tail(path: Path) -> None:
    """Cut a torn last line (a run killed in the middle of a write)."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # Find the last newline; everything after it is an incomplete line.
        chunk = 1 << 16
        pos = size
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            nl = data.rfind(b"\n")
            if nl >= 0:
                f.truncate(start + nl + 1)
                return
            pos = start
        f.truncate(0)


class RecordLog:
    """An append-only records file; ``records`` holds what was there when opened."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        repair_tail(self.path)
        self.records: list[dict[str, Any]] = (
            read_records(self.path) if self.path.exists() else [])
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)

    def append(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
