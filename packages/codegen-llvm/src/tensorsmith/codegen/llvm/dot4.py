"""Four-byte integer dot products in vector loops: x86's ``vpdpbusd`` where the target
has it (AVX512-VNNI, AVX-VNNI), AArch64's ``usdot`` (i8mm) or ``udot`` (dotprod),
``vpmaddwd`` and ``vphaddd`` on AVX2 without them, and elsewhere an exact widening form
in portable vector IR.

The integer ops (tensorsmith.ir.ops.integer) accumulate, per output lane ``n``,

    acc[n] += int32(x[a]) * int32(w[b + 4n]) + ... + int32(x[a + 3]) * int32(w[b + 4n + 3])

with ``x`` uint8 and the same for every lane (one activation pixel's four channels) and
``w`` int8, four adjacent bytes per lane (the weight's dot axis is last). That is one
``vpdpbusd``: a 32-bit broadcast of ``x[a..a+3]``, one load of ``4 x lanes`` weight bytes,
four unsigned-by-signed byte products summed into each 32-bit lane, exactly (it does not
saturate; ``vpdpbusds`` would). AArch64's ``usdot`` is the same unsigned-by-signed dot
on 4 lanes; with only dotprod's ``udot`` (both unsigned) the weights are read as
``w + 128`` (their sign bit flipped) and the ``128 x (x[a] + ... + x[a + 3])`` that adds,
the same in every lane, is taken off again (:func:`_neon`): exact in wrapping 32-bit
arithmetic like the sums themselves. Without either the bytes widen to 16 bits,
multiply exactly (255 x -128 fits), and two rounds of adjacent sums in 32 bits make the
same values (:func:`_pair_sums`, :func:`_widened`); ``vpmaddubsw`` is not used: it
saturates its 16-bit pair sums.

:func:`dot_width` reads the lanes of the target's dot instruction from its features (the
codegen plug-in resolves them, cpu_features.py; the emitter holds them); 0 means none.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from tensorsmith.ir.te import dot4 as idiom
from tensorsmith.ir.te.dot4 import DOT
from tensorsmith.ir.te.expr import Binary, Expr, Load, Var
from tensorsmith.ir.te.stmt import Store

from .constants import vector

if TYPE_CHECKING:
    from .vectorize import VectorEmitter

#: 32-bit lanes of an AVX2 register, of a NEON one.
AVX2_LANES, NEON_LANES = 8, 4
I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)


def dot_width(features: Collection[str]) -> int:
    """The 32-bit lanes of the widest four-byte dot instruction among a target's
    extensions (LLVM's names, cpu_features.compiled_features): 16 with AVX512-VNNI, 8
    with AVX-VNNI (``vpdpbusd``), 4 with AArch64's i8mm or dotprod (``usdot``,
    ``udot``), else 0."""
    on = set(features)
    if "avx512vnni" in on and "avx512f" in on:
        return 16
    if "avxvnni" in on:
        return 8
    if neon_dot(on):
        return NEON_LANES
    return 0


def neon_dot(features: Collection[str]) -> str | None:
    """AArch64's instruction for the unsigned-by-signed dot: ``usdot`` with i8mm (exactly
    the idiom), ``udot`` with dotprod (unsigned both, corrected: :func:`_neon`), else
    None."""
    if "i8mm" in features:
        return "usdot"
    if "dotprod" in features:
        return "udot"
    return None


@dataclass(frozen=True)
class Dot4:
    """A matched accumulation: ``acc`` plus the dot of ``x`` (first of four bytes, the same
    for every lane) and ``w`` (first of ``4 x lanes`` bytes)."""

    acc: Expr
    x: Load
    w: Load


def match(s: Store, var: Var) -> Dot4 | None:
    """``s`` as ``buf[i] = buf[i] + dot`` over loop ``var``, or None: the dot as the
    tensor IR states it (te/dot4.py finds it), its four activation bytes one word the
    same for every lane, its weight bytes four adjacent ones per lane."""
    from .vectorize import stride_of

    value = s.value
    if not (isinstance(value, Binary) and value.op == "add" and value.dtype == "int32"):
        return None
    acc, dot = value.a, idiom.match(value.b)
    if dot is None or not isinstance(acc, Load) or acc.buffer is not s.buffer:
        return None
    x, w = idiom.word(dot.xs), idiom.word(dot.ws)
    if x is None or w is None:
        return None
    if any(stride_of(v.indices[0], var) != 0 for v in dot.xs):  # type: ignore[attr-defined]
        return None
    if any(stride_of(v.indices[0], var) != DOT for v in dot.ws):  # type: ignore[attr-defined]
        return None
    return Dot4(acc, x, w)


def emit(ve: VectorEmitter, d: Dot4) -> ir.Value | None:
    """The accumulated vector of ``d`` over the loop's lanes, or None where this form
    cannot emit it (a lane count that is no whole number of registers, without a dot
    instruction no power of two). Under a split's tail mask the weight bytes are a
    masked load (those past the last lane may lie past the buffer); the activation's
    four bytes are the same for every lane, so inside the buffer whenever a lane runs."""
    width, lanes = dot_width(ve.em.features), ve.lanes
    native = bool(width) and lanes % width == 0
    neon = neon_dot(ve.em.features) if native else None
    vnni = native and neon is None
    pairs = not native and "avx2" in ve.em.features and lanes % AVX2_LANES == 0
    if not (native or pairs) and lanes & (lanes - 1):
        return None
    b = ve.b
    acc = ve.expr(d.acc)
    ve.em.vars[id(ve.var)] = ir.Constant(I64, 0)
    x_addr = ve.em._address(b, d.x.buffer, d.x.indices[0])  # type: ignore[arg-type]
    w_addr = ve.em._address(b, d.w.buffer, d.w.indices[0])  # type: ignore[arg-type]
    x4 = b.load(b.bitcast(x_addr, I32.as_pointer()), typ=I32, align=1)
    w = _weight_bytes(ve, w_addr)
    if neon is not None:
        return _neon(ve, acc, x4, w, neon)
    xs = ve.splat(x4, ir.VectorType(I32, lanes))
    if vnni:
        return _vnni(ve, acc, xs, b.bitcast(w, ir.VectorType(I32, lanes)), width)
    if pairs:
        return _pair_sums(ve, acc, x4, w)
    return b.add(acc, _widened(ve, b.bitcast(xs, ir.VectorType(I8, DOT * lanes)), w))


def _weight_bytes(ve: VectorEmitter, addr: ir.Value) -> ir.Value:
    """The ``4 x lanes`` weight bytes at ``addr``: one load, masked by lane under a tail
    mask (each lane's bit for its four bytes)."""
    b, vty = ve.b, ir.VectorType(I8, DOT * ve.lanes)
    mask = getattr(ve, "mask", None)
    if mask is None:
        return b.load(b.bitcast(addr, vty.as_pointer()), typ=vty, align=1)
    wide = b.shuffle_vector(mask, ir.Constant(mask.type, ir.Undefined), vector(
        ir.VectorType(I32, DOT * ve.lanes), [i // DOT for i in range(DOT * ve.lanes)]))
    fn = ve._masked("load", vty, ir.FunctionType(vty, [addr.type, I32, wide.type, vty]),
                    lanes=DOT * ve.lanes)
    return b.call(fn, [addr, ir.Constant(I32, 1), wide, ir.Constant(vty, None)])


def _vnni(ve: VectorEmitter, acc: ir.Value, xs: ir.Value, w: ir.Value, width: int
          ) -> ir.Value:
    """``vpdpbusd`` on each register of ``width`` lanes."""
    b, lanes = ve.b, ve.lanes
    vty = ir.VectorType(I32, width)
    fn = ve.em._declare(f"llvm.x86.avx512.vpdpbusd.{32 * width}",
                        ir.FunctionType(vty, [vty, vty, vty]))
    parts = []
    for start in range(0, lanes, width):
        pick = vector(ir.VectorType(I32, width), range(start, start + width))

        def part(v: ir.Value, pick: ir.Constant = pick) -> ir.Value:
            return v if width == lanes else b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                                             pick)

        parts.append(b.call(fn, [part(acc), part(xs), part(w)]))
    if len(parts) == 1:
        return parts[0]
    from .vectorize import _concat

    return _concat(b, parts)


def _neon(ve: VectorEmitter, acc: ir.Value, x4: ir.Value, w: ir.Value, op: str
          ) -> ir.Value:
    """``usdot`` or ``udot`` on each register of 4 lanes. ``udot`` reads the weights with
    their sign bit flipped (``w + 128``, unsigned) and the activation's extra
    ``128 x sum(x)``, one ``udot`` of the activation with bytes of 128 for all the
    registers, is subtracted from each."""
    b, lanes = ve.b, ve.lanes
    i32x4, i8x16 = ir.VectorType(I32, NEON_LANES), ir.VectorType(I8, DOT * NEON_LANES)
    fn = ve.em._declare(f"llvm.aarch64.neon.{op}.v4i32.v16i8",
                        ir.FunctionType(i32x4, [i32x4, i8x16, i8x16]))
    one = b.insert_element(ir.Constant(i32x4, ir.Undefined), x4, ir.Constant(I32, 0))
    xs = b.bitcast(b.shuffle_vector(one, ir.Constant(i32x4, ir.Undefined),
                                    vector(i32x4, [0] * NEON_LANES)), i8x16)
    zero = ir.Constant(i32x4, None)
    if op == "udot":
        w = b.xor(w, ir.Constant(w.type, [0x80] * w.type.count))
        bias = b.call(fn, [zero, xs, ir.Constant(i8x16, [0x80] * i8x16.count)])
    undef_w, undef_acc = ir.Constant(w.type, ir.Undefined), ir.Constant(acc.type, ir.Undefined)
    parts = []
    for start in range(0, lanes, NEON_LANES):
        acc_part = acc if lanes == NEON_LANES else b.shuffle_vector(
            acc, undef_acc, vector(i32x4, range(start, start + NEON_LANES)))
        w_part = w if lanes == NEON_LANES else b.shuffle_vector(
            w, undef_w, vector(ir.VectorType(I32, DOT * NEON_LANES),
                               range(DOT * start, DOT * (start + NEON_LANES))))
        dot = b.call(fn, [acc_part, xs, w_part])
        parts.append(b.sub(dot, bias) if op == "udot" else dot)
    if len(parts) == 1:
        return parts[0]
    from .vectorize import _concat

    return _concat(b, parts)


def _pair_sums(ve: VectorEmitter, acc: ir.Value, x4: ir.Value, w: ir.Value) -> ir.Value:
    """AVX2 without VNNI, per register of 8 lanes: the weights' 32 bytes sign-extended to
    16 bits in two halves, ``vpmaddwd`` with the activation's four bytes (zero-extended,
    repeated) gives each lane's two pair sums, ``vphaddd`` adds them. ``vphaddd`` adds
    within 128-bit halves, so the halves take lanes (0, 1, 4, 5) and (2, 3, 6, 7): its
    sums then come out in lane order. Exact: a pair sum is at most 2 x 255 x 128."""
    b, lanes = ve.b, ve.lanes
    i16x16, i32x8 = ir.VectorType(I16, 16), ir.VectorType(I32, AVX2_LANES)
    madd = ve.em._declare("llvm.x86.avx2.pmadd.wd", ir.FunctionType(i32x8, [i16x16, i16x16]))
    hadd = ve.em._declare("llvm.x86.avx2.phadd.d", ir.FunctionType(i32x8, [i32x8, i32x8]))
    four = b.zext(b.bitcast(x4, ir.VectorType(I8, DOT)), ir.VectorType(I16, DOT))
    x16 = b.shuffle_vector(four, ir.Constant(four.type, ir.Undefined),
                           vector(ir.VectorType(I32, 16), [i % DOT for i in range(16)]))
    undef = ir.Constant(w.type, ir.Undefined)
    parts = []
    for start in range(0, lanes, AVX2_LANES):
        base = DOT * start
        halves = [b.sext(b.shuffle_vector(w, undef, vector(ir.VectorType(I32, 16), [
            base + DOT * lane + byte for lane in group for byte in range(DOT)])), i16x16)
            for group in ((0, 1, 4, 5), (2, 3, 6, 7))]
        sums = b.call(hadd, [b.call(madd, [x16, halves[0]]), b.call(madd, [x16, halves[1]])])
        parts.append(sums)
    if len(parts) == 1:
        return b.add(acc, parts[0])
    from .vectorize import _concat

    return b.add(acc, _concat(b, parts))


def _widened(ve: VectorEmitter, x: ir.Value, w: ir.Value) -> ir.Value:
    """The four-byte dots of ``x`` (uint8) and ``w`` (int8) as 32-bit lanes, exactly: the
    bytes widened to 16 bits, adjacent products summed in 32 bits (the shape LLVM
    selects ``vpmaddwd`` for), then adjacent pair sums."""
    b, n = ve.b, DOT * ve.lanes
    wide = ir.VectorType(I16, n)
    x16, w16 = b.zext(x, wide), b.sext(w, wide)
    (xe, xo), (we, wo) = _halves(b, x16, n), _halves(b, w16, n)
    half = ir.VectorType(I32, n // 2)
    pairs = b.add(b.mul(b.sext(xe, half), b.sext(we, half)),
                  b.mul(b.sext(xo, half), b.sext(wo, half)))
    even, odd = _halves(b, pairs, n // 2)
    return b.add(even, odd)


def _halves(b: ir.IRBuilder, v: ir.Value, n: int) -> tuple[ir.Value, ir.Value]:
    """The even and the odd lanes of ``v`` (``n`` lanes)."""
    undef = ir.Constant(v.type, ir.Undefined)
    return tuple(b.shuffle_vector(v, undef, vector(ir.VectorType(I32, n // 2),
                                                   range(first, n, 2)))
                 for first in (0, 1))  # type: ignore[return-value]
