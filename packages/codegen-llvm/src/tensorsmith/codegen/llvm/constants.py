"""LLVM constants, with vector constants printed once.

llvmlite prints a vector constant element by element every time an instruction that
uses it is printed. A splat's shuffle mask or a vector of lane numbers is used
thousands of times in a large model (DenseNet-121: about 12,000 uses of 8- to 64-lane
constants, a tenth of its code generation time). An ir.Constant keeps its text once
printed, so a vector made here is one object per type and value, printed once.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

_VECTORS: dict[tuple[str, tuple[str, ...]], ir.Constant] = {}


def vector(vty: ir.VectorType, values: Sequence[float | int]) -> ir.Constant:
    """The constant vector ``values`` of type ``vty``."""
    key = (str(vty), tuple(map(repr, values)))  # repr keeps -0.0 apart from 0.0
    found = _VECTORS.get(key)
    if found is None:  # an ir.Constant keeps its text once printed
        found = _VECTORS[key] = ir.Constant(vty, list(values))
    return found


def constant(ty: ir.Type, value: float) -> ir.Constant:
    """``value`` as a constant of ``ty``, the same in every lane when ``ty`` is a vector."""
    if isinstance(ty, ir.VectorType):
        return vector(ty, [value] * ty.count)
    return ir.Constant(ty, value)
