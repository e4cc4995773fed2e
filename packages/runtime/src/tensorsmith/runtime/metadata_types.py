"""The JSON types of metadata fields, and the error that names a field of the wrong type.

A reader refuses a mistyped field where it reads the file, naming the field, rather than
failing inside whatever uses it first. The plan's fields (plan.py) and the few other
keys the runtime reads (artifact.py) are checked with these.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tensorsmith.runtime.errors import ArtifactError

__all__ = ["TYPES", "expect", "malformed"]

#: Each type's name in an error, and its test.
TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer >= 0", lambda v: type(v) is int and v >= 0),
    "str": ("a string", lambda v: isinstance(v, str)),
    "ints": ("a list of integers >= 0",
             lambda v: isinstance(v, list) and all(type(x) is int and x >= 0 for x in v)),
    "strs": ("a list of strings",
             lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    # a shape: sizes known when the model was compiled, and the text of those known only
    # at run time (an expression of the plan's symbols, such as "batch" or "seq + 1")
    "dims": ("a list of integers >= 0 and size expressions (non-empty strings)",
             lambda v: isinstance(v, list) and all(
                 (type(x) is int and x >= 0) or (isinstance(x, str) and x.strip())
                 for x in v)),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "target": ("a string or an object", lambda v: isinstance(v, str | dict)),
}


def expect(value: Any, kind: str, field_path: str, path: str | os.PathLike[str] | None) -> None:
    """Refuse ``value`` unless it has type ``kind`` (a key of :data:`TYPES`)."""
    description, ok = TYPES[kind]
    if not ok(value):
        raise malformed(path, field_path, f"should be {description} and is {_shown(value)}")


def malformed(path: str | os.PathLike[str] | None, field_path: str, what: str) -> ArtifactError:
    """The error for a field that is wrong (``what``: "should be ... and is ...")."""
    who = f"artifact '{path}'" if path is not None else "the plan"
    return ArtifactError(
        f"{who} has malformed metadata: {field_path} {what}; it was not written by a "
        "compatible tensorsmith: re-export it"
    )


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."
