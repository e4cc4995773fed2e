"""Tuning records: JSON lines, one measured schedule candidate a line.

Each line: ``{"workload": key, "target": str, "steps": [[kind, stage, args], ...],
"costs": [seconds, ...], "error": null | str, "versions": {...}}``. The tuner appends
and flushes a line per measurement (so a killed run loses nothing); ``build`` applies
the fastest error-free record of each workload for the same target kind. A record with
``"selected": true`` is the tuner's final choice, made by re-measuring the fastest few
side by side (one lucky timing can make a slower schedule the fastest record); when a
workload has one, the last such record wins over any single timing.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import ModelError
from .target import Target
from .te.schedule import Step


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    # A run killed mid-write leaves at most one torn last line.
                    if f.readline():
                        raise ModelError(f"{path}:{lineno}: not a tuning record") from None
    except FileNotFoundError:
        raise ModelError(f"records file {path} does not exist") from None
    return out


def load_best_steps(path: str | os.PathLike, target: Target) -> dict[str, list[Step]]:
    """The schedule steps ``build`` applies per workload: the last selected record, else
    the fastest error-free one."""
    best: dict[str, tuple[float, list[Step]]] = {}
    selected: dict[str, list[Step]] = {}
    for rec in read_records(path):
        if rec.get("error") or not rec.get("costs"):
            continue
        if Target.parse(rec["target"]).kind != target.kind:
            continue
        key = rec["workload"]
        if rec.get("selected"):
            selected[key] = [Step.from_json(s) for s in rec["steps"]]
            continue
        cost = min(rec["costs"])
        if key not in best or cost < best[key][0]:
            best[key] = (cost, [Step.from_json(s) for s in rec["steps"]])
    return {**{k: v[1] for k, v in best.items()}, **selected}
