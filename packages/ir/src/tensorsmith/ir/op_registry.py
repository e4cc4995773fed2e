"""The one registry of graph ops.

Each op declares, in one place, everything the compiler needs to know about it: how its
output types follow from its inputs (``infer``), what it computes in NumPy
(``reference``: constant folding and the interpreter every test compares against), how it
fuses (``pattern``), and how it lowers (``compute``: tensor expressions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from .errors import ShapeError


class Pattern(IntEnum):
    """Fusion patterns, ordered: a lower pattern fuses into a group of a higher one."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    def __repr__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


Attrs = dict[str, Any]
InferFn = Callable[[Sequence[TensorType], Attrs], list[TensorType]]
ReferenceFn = Callable[[Sequence[np.ndarray], Attrs], list[np.ndarray]]
ComputeFn = Callable[..., list[Any]]


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: Pattern
    infer: InferFn
    reference: ReferenceFn
    compute: ComputeFn | None = None
    num_inputs: tuple[int, int] = (1, 1)  # min, max


REGISTRY: dict[str, OpDef] = {}


def register(name: str, pattern: Pattern, infer: InferFn, reference: ReferenceFn,
             compute: ComputeFn | None = None, num_inputs: tuple[int, int] = (1, 1)) -> OpDef:
    op = OpDef(name, pattern, infer, reference, compute, num_inputs)
    REGISTRY[name] = op
    return op


def get_op(name: str) -> OpDef:
    _load_ops()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"op {name!r} is not registered") from None


def _load_ops() -> None:
    if not REGISTRY:
        from . import ops  # noqa: F401  (registers on import)


def check(cond: bool, message: str) -> None:
    """Raise a ShapeError (the importer adds the node name) when ``cond`` is false."""
    if not cond:
        raise ShapeError(message)
