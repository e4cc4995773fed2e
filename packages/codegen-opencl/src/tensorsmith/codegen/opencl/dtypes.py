"""Tensor-IR dtypes as OpenCL C types, and constants as OpenCL C literals.

Kept apart from the emitter because the rules are easy to get subtly wrong and are
tested on their own: ``bool`` lives in memory as ``uchar`` (OpenCL forbids ``bool`` in
buffers), floats are printed so they parse back to the exact same value, and integer
types narrower than ``int`` need explicit casts because C promotes them to ``int``.
"""

from __future__ import annotations

import math

import numpy as np

from tensorsmith.ir.errors import ModelError

# dtype -> OpenCL C type of a value in an expression
_SCALAR = {"float16": "half", "float32": "float", "float64": "double", "int8": "char",
           "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar",
           "uint16": "ushort", "uint32": "uint", "uint64": "ulong", "bool": "int"}

#: OpenCL extensions a dtype needs, enabled by a pragma and checked by the runtime.
EXTENSIONS = {"float16": "cl_khr_fp16", "float64": "cl_khr_fp64"}

#: integer dtypes C promotes to int: their arithmetic is cast back to wrap like the IR's.
NARROW_INTS = frozenset({"int8", "int16", "uint8", "uint16"})


def scalar_type(dtype: str) -> str:
    """The type of a value of ``dtype`` in an expression (bool is an int 0 or 1)."""
    try:
        return _SCALAR[dtype]
    except KeyError:
        raise ModelError(f"the opencl target has no type for dtype {dtype!r}") from None


def memory_type(dtype: str) -> str:
    """The element type of a buffer of ``dtype`` (bool is stored as uchar 0 or 1)."""
    return "uchar" if dtype == "bool" else scalar_type(dtype)


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("uint") or dtype == "bool"


def literal(value: int | float | bool, dtype: str) -> str:
    """An OpenCL C expression for the constant ``value`` of ``dtype``, exact and typed."""
    if dtype == "bool":
        return "1" if value else "0"
    if is_float(dtype):
        return _float_literal(float(value), dtype)
    return _int_literal(int(value), dtype)


def _float_literal(value: float, dtype: str) -> str:
    if math.isnan(value) or math.isinf(value):
        text = "NAN" if math.isnan(value) else ("INFINITY" if value > 0 else "(-INFINITY)")
        return text if dtype == "float32" else f"(({scalar_type(dtype)}){text})"
    if dtype == "float64":
        return f"{value!r}"
    # Round to the dtype first: the repr of that value parses back to it exactly.
    rounded = float(np.float32(value)) if dtype == "float32" else float(np.float16(value))
    text = f"{rounded!r}f"
    if dtype == "float16":
        text = f"((half){text})"
    return f"({text})" if rounded < 0 or text.startswith("-") else text


def _int_literal(value: int, dtype: str) -> str:
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ModelError(f"constant {value} does not fit in {dtype}")
    ctype = scalar_type(dtype)
    if dtype == "int64":
        if value == info.min:  # -9223372036854775808L is a negated out-of-range literal
            return f"({value + 1}L - 1L)"
        text = f"{value}L"
    elif dtype == "uint64":
        text = f"{value}UL"
    elif dtype == "uint32":
        text = f"{value}u"
    elif dtype == "int32":
        if value == info.min:
            return f"({value + 1} - 1)"
        text = str(value)
    else:
        return f"(({ctype}){value})"
    return f"({text})" if value < 0 else text
