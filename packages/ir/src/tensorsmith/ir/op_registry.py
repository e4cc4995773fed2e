"""The one registry of graph ops.

Each op declares, in one place, everything the compiler needs to know about it: how its
output types follow from its inputs (``infer``), what it computes in NumPy
(``reference``: constant folding and the interpreter every test compares against), how it
fuses (``pattern``), and how it lowers: ``compute`` (tensor expressions, scheduled by
rules or the auto-tuner), or, for the few ops whose kernel has loop-carried,
data-dependent control flow that no tensor expression states (non-maximum suppression,
NonZero's compaction), ``kernel``: tensor-IR statements written directly (direct.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from tensorsmith.runtime.shapes import MAX_TENSOR_BYTES

from .errors import ShapeError
from .symbolic import (
    Dim,
    Sym,
    SymbolicDimError,
    assume_if_computed,
    is_static,
    math_prod,
    parse_dim,
    shape_text,
)


class Pattern(IntEnum):
    """Fusion patterns, ordered: a lower pattern fuses into a group of a higher one."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


# MAX_TENSOR_BYTES (imported from the runtime, which checks it on sizes known only at
# run time) is the most bytes one tensor may take: 256 TiB, the whole 48-bit virtual
# address space of x86-64 and AArch64 (4-level paging), so no process could ever hold a
# larger one. The generated code indexes in 64-bit integers; below this bound an element
# count, a byte offset, and the sum of a plan's buffers (up to 2**15 of them at this
# size) stay exact, where an unchecked product of dims wraps (768 * 48038396025285291
# elements is 256 mod 2**64) and yields an artifact that writes out of bounds.


def tensor_bytes(shape: Sequence[Dim], dtype: str) -> Dim:
    """The bytes of a tensor, computed in Python ints (exact); raises ShapeError for a
    negative dim or a size over :data:`MAX_TENSOR_BYTES`. A shape with symbolic dims
    has a symbolic size (the runtime checks the limit once it knows the symbols)."""
    dims = [d if isinstance(d, Sym) else int(d) for d in shape]
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise ShapeError(f"shape {shape_text(dims)} has a negative dimension")
    if not is_static(dims):
        return math_prod(dims) * np.dtype(dtype).itemsize
    count = math.prod(dims)
    size = count * np.dtype(dtype).itemsize
    if size > MAX_TENSOR_BYTES:
        raise ShapeError(f"a {dtype}{dims} tensor has {count} elements ({size} bytes), over "
                         "the limit of 2**48 bytes (256 TiB) per tensor")
    return size


@dataclass(frozen=True)
class TensorType:
    """A shape (Python ints, or symbolic dims: symbolic.py) and dtype. Every type an op's
    ``infer`` returns is built here, so the size check on construction guards every
    inferred shape at one place."""

    shape: tuple[Dim, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(
            d if isinstance(d, Sym) else int(d) for d in self.shape))
        tensor_bytes(self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"{self.dtype}{shape_text(self.shape)}"


Attrs = dict[str, Any]
InferFn = Callable[[Sequence[TensorType], Attrs], list[TensorType]]
ReferenceFn = Callable[[Sequence[np.ndarray], Attrs], list[np.ndarray]]
ComputeFn = Callable[..., list[Any]]
#: ``kernel(inputs, outputs, attrs, family) -> (statement, scratch)``: the body of an op's
#: kernel written directly in the tensor IR, over the flat buffers of its inputs and
#: outputs, for a target family ("cpu" or "gpu"), and the scratch buffers it uses
#: (direct.py lowers it).
KernelFn = Callable[[list[Any], list[Any], Attrs, str], tuple[Any, list[Any]]]


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: Pattern
    infer: InferFn
    reference: ReferenceFn
    compute: ComputeFn | None = None
    num_inputs: tuple[int, int] = (1, 1)  # min, max
    kernel: KernelFn | None = None


REGISTRY: dict[str, OpDef] = {}


def register(name: str, pattern: Pattern, infer: InferFn, reference: ReferenceFn,
             compute: ComputeFn | None = None, num_inputs: tuple[int, int] = (1, 1),
             kernel: KernelFn | None = None) -> OpDef:
    """Register an op. One with a ``kernel`` (written directly as tensor IR) is opaque
    and has no ``compute``: nothing could fuse into a kernel no schedule builds."""
    if kernel is not None and (pattern != Pattern.OPAQUE or compute is not None):
        raise ValueError(f"op {name!r}: a kernel written directly is opaque and has no compute")
    op = OpDef(name, pattern, infer, reference, compute, num_inputs, kernel)
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


# -- symbolic dims in shape inference (symbolic.py) ------------------------------------------
_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def always(a: Dim, rel: str, b: Dim) -> bool:
    """Whether ``a rel b`` (rel one of ``== < <= > >=``) holds for every value of the
    symbols: False both where it fails and where only the run-time sizes can tell.
    ``==`` means equal as expressions (``batch*seq == seq*batch``)."""
    if rel == "==":
        return a == b
    try:
        return _RELATIONS[rel](a, b)
    except SymbolicDimError:
        return False


def check_dim(a: Dim, rel: str, b: Dim, message: str) -> None:
    """:func:`check` for a comparison of dims: a ShapeError with ``message`` where it
    fails, a SymbolicDimError (a ShapeError too) with ``message`` where only the run-time
    values of the symbols could tell, so that no undecided comparison escapes as the
    generic text of symbolic.py without naming what the op needed."""
    if rel == "==":
        if a == b:
            return
        if (isinstance(a, int) and isinstance(b, int)) or always(a, "<", b) or always(a, ">", b):
            raise ShapeError(message)
        if assume_if_computed(a, b, message):
            return
    else:
        try:
            ok = _RELATIONS[rel](a, b)
        except SymbolicDimError:
            pass
        else:
            check(ok, message)
            return
    raise SymbolicDimError(f"{message}: whether {a} {rel} {b} holds depends on sizes known "
                           "only at run time")


def attr_dim(value: object, what: str) -> Dim:
    """A dim given in an attribute (a reshape's target, a slice's end): an int, a
    symbolic dim, or the text of one, which is how the graph's text form writes a
    symbolic dim inside an attribute (a JSON string) and what parsing it gives back."""
    if isinstance(value, Sym):
        return value
    if isinstance(value, str):
        try:
            return parse_dim(value)
        except ValueError as e:
            raise ShapeError(f"{what}: {e}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ShapeError(f"{what} must be an integer or a symbolic size, not {value!r}")
    return operator.index(value)  # type: ignore[arg-type]  (ints, NumPy's too)


def attr_dims(values: Iterable[object], what: str) -> tuple[Dim, ...]:
    """:func:`attr_dim` of each of ``values``."""
    return tuple(attr_dim(v, what) for v in values)


def shapes_text(shapes: Iterable[Sequence[Dim]]) -> str:
    """``[[batch, 3], [1, 3]]``: several shapes in an error message, printed as Python
    prints lists of ints when they are static."""
    return "[" + ", ".join(shape_text(s) for s in shapes) + "]"
