"""The one name a kernel goes by in everything a user reads about it.

``tensorsmith inspect``, ``tensorsmith run --profile`` (its table and its Chrome trace) and
``tensorsmith tune`` all call a kernel ``<ops>#<digits>``, e.g.
``fused_matmul_add_relu#40de``: the first part says what the kernel computes (the ops it
fuses), the digits are the first hexadecimal digits of its workload key, which tell apart
kernels of the same ops on other shapes and are how the ``workload`` of a tuning record
begins. So a slow kernel in a profile is found in the tuning output and in the records by
the same string. The symbol (``tsm_kernel_0``) is numbered per artifact and means nothing
to the tuner or in another model.

``build`` names each plan step so (:func:`kernel_label`); the steps of one kernel compute
one workload and share the name, so an artifact's kernel is named by its steps. In an
artifact built before steps carried the digits, two kernels of the same ops share a step
name; such kernels keep their symbols as names, so no two rows of a report look alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["WORKLOAD_DIGITS", "kernel_label", "kernel_labels"]

#: Digits of the workload key in a kernel's name: enough to tell apart the kernels of one
#: model that fuse the same ops, short enough to read in a table.
WORKLOAD_DIGITS = 4


def kernel_label(ops_name: str, workload: str) -> str:
    """``fused_matmul_add_relu#40de`` for a fused group of that name (``FusedGroup.name``)
    and workload key."""
    return f"{ops_name}#{workload[:WORKLOAD_DIGITS]}"


def kernel_labels(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """Each kernel symbol of an artifact's metadata mapped to its name: the name of the
    plan steps that call it, or the symbol itself where its steps have no name, several
    names, or one that another kernel's steps have too."""
    if not isinstance(metadata, Mapping):
        return {}
    kernels, steps = metadata.get("kernels"), metadata.get("steps")
    names: dict[str, set[str]] = {}
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, Mapping) and isinstance(step.get("kernel"), str):
            name = step.get("name")
            names.setdefault(step["kernel"], set()).add(name if isinstance(name, str) else "")
    symbols = [k["name"] for k in kernels if isinstance(k, Mapping) and
               isinstance(k.get("name"), str)] if isinstance(kernels, list) else []
    users: dict[str, int] = {}
    for symbol in symbols:
        for name in names.get(symbol, ()):
            users[name] = users.get(name, 0) + 1
    labels: dict[str, str] = {}
    for symbol in symbols:
        own = names.get(symbol, set())
        (name,) = own if len(own) == 1 else ("",)
        labels[symbol] = name if name and users[name] == 1 else symbol
    return labels
