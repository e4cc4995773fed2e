"""bfloat16 in LLVM: stored as 16 bits, computed in float32.

A bfloat16 is the upper half of a float32, so a load widens with a shift and a store
narrows with round-to-nearest-even on the integer bits. Kernels never do arithmetic on
bfloat16 registers: a bfloat16 expression is a float32 value (``register`` type), and
only stores and casts to bfloat16 round. That is also what the hardware offers (x86's
AVX512-BF16 converts and takes dot products, it has no bfloat16 add), and it keeps every
operation vectorizable with plain integer and float lanes on any CPU: LLVM's own
``bfloat`` type needs a runtime library call to narrow where the CPU has no converting
instruction.
"""

from __future__ import annotations

from llvmlite import ir

from .constants import constant

I16, I32 = ir.IntType(16), ir.IntType(32)
F32 = ir.FloatType()
#: What a NaN narrows to: the quiet NaN (rounding could carry a NaN's payload into inf).
QUIET_NAN = 0x7FC0


def _like(v: ir.Value, scalar: ir.Type) -> ir.Type:
    """``scalar``, or a vector of it with ``v``'s lanes."""
    return ir.VectorType(scalar, v.type.count) if isinstance(v.type, ir.VectorType) else scalar


def widen(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """16-bit patterns (scalar or vector) -> their float32 values, exactly."""
    wide = b.shl(b.zext(bits, _like(bits, I32)), constant(_like(bits, I32), 16))
    return b.bitcast(wide, _like(bits, F32))


def narrow(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """float32 values -> the bfloat16 bit patterns nearest, ties to even; NaN stays NaN."""
    i32 = _like(value, I32)
    bits = b.bitcast(value, i32)
    odd = b.and_(b.lshr(bits, constant(i32, 16)), constant(i32, 1))
    rounded = b.add(bits, b.add(odd, constant(i32, 0x7FFF)))
    half = b.trunc(b.lshr(rounded, constant(i32, 16)), _like(value, I16))
    nan = b.fcmp_unordered("uno", value, value)
    return b.select(nan, constant(half.type, QUIET_NAN), half)


def round_to(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """float32 values rounded to the nearest bfloat16, as float32 (a cast to bfloat16
    in registers)."""
    return widen(b, narrow(b, value))
