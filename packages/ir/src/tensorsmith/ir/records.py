"""Tuning records: JSON lines, one measured schedule candidate a line.

Each line: ``{"workload": key, "target": str, "steps": [[kind, stage, args], ...],
"costs": [seconds, ...], "error": null | str, "versions": {...}}``. The tuner appends
and flushes a line per measurement (so a killed run loses nothing); ``build`` applies
the fastest error-free record of each workload for the same target kind. A record with
``"selected": true`` is the tuner's final choice, made by re-measuring the fastest few
side by side (one lucky timing can make a slower schedule the fastest record); when a
workload has one, the last such record wins over any single timing.

A records file is input like a model: it may be edited, truncated or come from
elsewhere, and the steps it holds go straight into generated code (a split factor past
the loop makes a tile the stack cannot hold). So every record is checked before use
(record_checks.py, the one place that says whether a record may be used): its fields and
step arguments when read (:func:`read_records`), its steps replayed on the workload's
compute when ``build`` picks it (:func:`applicable_steps`). A record that fails is skipped with a
:class:`RecordWarning` naming its line, field and the reason, never applied; its
workload gets the next preferred record, else the default schedule. A file that is not
JSON lines at all, or cannot be read, raises :class:`RecordsError`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .direct import is_direct
from .errors import ModelError
from .lowering import workload_key
from .passes.fuse import FusedGroup
from .record_checks import TOO_DEEP, InvalidRecord, check_record, check_steps
from .target import Target
from .te.schedule import Step


class RecordsError(ModelError):
    """A records file that cannot be read, or is not JSON lines at all."""


class RecordWarning(UserWarning):
    """A tuning record that is skipped: it does not describe a schedule of its workload."""


@dataclass(frozen=True)
class Candidate:
    """A record's schedule, with where it came from (for the warning if it is skipped)."""

    source: str  # "path:line"
    steps: list[Step]


# -- reading ----------------------------------------------------------------------------
def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The well-formed records of ``path`` in file order (others skipped with a warning)."""
    return [rec for _, rec in _numbered_records(path)]


def _numbered_records(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for lineno, data in _json_lines(path):
        try:
            check_record(data)
        except InvalidRecord as e:
            skip(f"{path}:{lineno}", e)
            continue
        out.append((lineno, data))
    return out


def _json_lines(path: str | os.PathLike) -> list[tuple[int, Any]]:
    """Each non-blank line's JSON value with its line number; a torn last line (a run
    killed mid-write) after earlier records is dropped."""
    out: list[tuple[int, Any]] = []
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise RecordsError(f"{path}:{lineno}: not a tuning record (not UTF-8 "
                                       "text)") from None
                if not line.strip():
                    continue
                try:
                    out.append((lineno, json.loads(line)))
                except RecursionError:
                    out.append((lineno, TOO_DEEP))
                except json.JSONDecodeError:
                    if out and not f.readline():
                        break  # at most one torn last line
                    raise RecordsError(f"{path}:{lineno}: not a tuning record (records "
                                       "files hold one JSON object a line)") from None
    except FileNotFoundError:
        raise RecordsError(f"records file {path} does not exist") from None
    except OSError as e:
        raise RecordsError(f"cannot read records file {path}: {e.strerror or e}") from None
    return out




def skip(source: str, error: InvalidRecord, workload: str | None = None) -> None:
    """Warn that the record at ``source`` is not applied, and why."""
    then = f"; workload {workload[:40]} gets another schedule" if workload else ""
    warnings.warn(f"{source}: tuning record skipped: {error.field}: {error.why}{then}",
                  RecordWarning, stacklevel=3)


# -- choosing ---------------------------------------------------------------------------
def ranked_candidates(path: str | os.PathLike, target: Target) -> dict[str, list[Candidate]]:
    """Per workload, the error-free records for ``target``'s kind, preferred first: the
    selected ones, last first, then the others, fastest first."""
    selected: dict[str, list[Candidate]] = {}
    timed: dict[str, list[tuple[float, Candidate]]] = {}
    for lineno, rec in _numbered_records(path):
        if rec.get("error") or not rec["costs"]:  # no "error" is no error
            continue
        if Target.parse(rec["target"], installed=False).kind != target.kind:
            continue
        cand = Candidate(f"{path}:{lineno}", [Step.from_json(s) for s in rec["steps"]])
        if rec.get("selected"):
            selected.setdefault(rec["workload"], []).insert(0, cand)
        else:
            timed.setdefault(rec["workload"], []).append((min(rec["costs"]), cand))
    out = {k: list(v) for k, v in selected.items()}
    for key, items in timed.items():
        out.setdefault(key, []).extend(c for _, c in sorted(items, key=lambda x: x[0]))
    return out


def load_best_steps(path: str | os.PathLike, target: Target) -> dict[str, list[Step]]:
    """The preferred steps per workload: the last selected record, else the fastest
    error-free one (not yet checked against any workload: see :func:`applicable_steps`)."""
    return {k: v[0].steps for k, v in ranked_candidates(path, target).items()}


def applicable_steps(path: str | os.PathLike, target: Target, groups: Iterable[FusedGroup]
                     ) -> dict[str, list[Step]]:
    """The steps ``build`` applies per workload of ``groups``: its most preferred record
    that schedules the workload's compute (those that do not are skipped with a warning);
    a workload without one is absent and gets the default schedule, as does a kernel
    written directly as tensor IR (direct.py: no schedule to replay)."""
    ranked = ranked_candidates(path, target)
    out: dict[str, list[Step]] = {}
    seen: set[str] = set()
    for group in groups:
        key = workload_key(group)
        if key in seen or is_direct(group):
            continue
        seen.add(key)
        for cand in ranked.get(key, ()):
            try:
                check_steps(group, cand.steps, target.family)
            except InvalidRecord as e:
                skip(cand.source, e, key)
                continue
            out[key] = cand.steps
            break
    return out
