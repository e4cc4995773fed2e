"""Float32 math that GLSL.std.450 lacks or gets wrong for our purposes: erf, tanh, pow.

* ``erf`` has no GLSL.std.450 instruction. It is evaluated as ``x * P(x^2)`` for
  ``|x| <= 1`` and as ``1 - exp(Q(u) - t^2)`` for ``1 < t = |x|``, where ``Q`` fits
  ``log(erfc(t)) + t^2`` on ``[1, 4]`` in ``u = (t - 2.5) / 1.5`` (erf rounds to 1 in
  float32 beyond 4, so ``t`` is clamped there). Coefficients: weighted least squares on
  Chebyshev nodes with Lawson reweighting toward minimax (fit error < 1e-9); evaluated in
  float32 the worst absolute error is 1.25e-7 (at |x| near 1), checked in the tests on
  the device against ``math.erf``.
* ``tanh``: GLSL's ``Tanh`` precision is "inherited from sinh/cosh", which drivers
  implement as ``(e^2x - 1) / (e^2x + 1)``: it loses all relative precision near 0 and
  some overflow to NaN for large |x|. Here: ``x + x^3 P(x^2)`` below 0.625, else
  ``1 - 2 / (exp(2|x|) + 1)`` with the sign of x (max abs error ~1e-7, exact limits).
* ``pow``: GLSL's ``Pow`` is undefined for ``x < 0``; ONNX Pow follows C: negative bases
  with integral exponents are fine. The sign is handled around ``Pow(|x|, y)``.

All functions emit straight-line code (both sides computed, then ``OpSelect``): no
control flow, so they can be used inside any expression.
"""

from __future__ import annotations

from .builder import FunctionBuilder
from .spec import GLSL

# erf(x) / x as a polynomial in s = x^2, for |x| <= 1.
ERF_SMALL = (1.1283791065216064, -0.3761260509490967, 0.11283430457115173,
             -0.02684859186410904, 0.005179750733077526, -0.000794236664660275,
             7.647147867828608e-05)
# log(erfc(t)) + t^2 as a polynomial in u = (t - 2.5) / 1.5, for 1 <= t <= 4.
ERF_LARGE = (-1.556815266609192, -0.5290209054946899, 0.12624335289001465,
             -0.03663055971264839, 0.010968015529215336, -0.0032722707837820053,
             0.0007041225908324122, -0.000370541907614097)
ERF_SPLIT, ERF_CLAMP_HI = 1.0, 4.0
# (tanh(x) / x - 1) / x^2 as a polynomial in s = x^2, for |x| < 0.625.
TANH_SMALL = (-0.33333247900009155, 0.13330769538879395, -0.053693659603595734,
              0.020510196685791016, -0.005577906500548124)
TANH_SPLIT = 0.625


class Float32Math:
    """Small float32 instruction helpers over a function builder."""

    def __init__(self, fb: FunctionBuilder, f32: int, boolean: int) -> None:
        self.fb, self.f32, self.bool = fb, f32, boolean

    def c(self, value: float) -> int:
        return self.fb.module.const(self.f32, value)

    def add(self, a: int, b: int) -> int:
        return self.fb.op("FAdd", self.f32, a, b)

    def sub(self, a: int, b: int) -> int:
        return self.fb.op("FSub", self.f32, a, b)

    def mul(self, a: int, b: int) -> int:
        return self.fb.op("FMul", self.f32, a, b)

    def div(self, a: int, b: int) -> int:
        return self.fb.op("FDiv", self.f32, a, b)

    def neg(self, a: int) -> int:
        return self.fb.op("FNegate", self.f32, a)

    def glsl(self, name: str, *args: int) -> int:
        return self.fb.ext(self.f32, GLSL[name], *args)

    def select(self, cond: int, a: int, b: int) -> int:
        return self.fb.op("Select", self.f32, cond, a, b)

    def cmp(self, op: str, a: int, b: int) -> int:
        return self.fb.op(op, self.bool, a, b)

    def horner(self, x: int, coefficients: tuple[float, ...]) -> int:
        acc = self.c(coefficients[-1])
        for k in reversed(coefficients[:-1]):
            acc = self.add(self.mul(acc, x), self.c(k))
        return acc

    def copysign(self, magnitude: int, sign_of: int) -> int:
        negative = self.cmp("FOrdLessThan", sign_of, self.c(0.0))
        return self.select(negative, self.neg(magnitude), magnitude)


def erf(m: Float32Math, x: int) -> int:
    t = m.glsl("FAbs", x)
    small = m.mul(x, m.horner(m.mul(x, x), ERF_SMALL))
    tb = m.glsl("FMin", m.glsl("FMax", t, m.c(ERF_SPLIT)), m.c(ERF_CLAMP_HI))
    u = m.mul(m.sub(tb, m.c(2.5)), m.c(1.0 / 1.5))
    q = m.sub(m.horner(u, ERF_LARGE), m.mul(tb, tb))
    large = m.copysign(m.sub(m.c(1.0), m.glsl("Exp", q)), x)
    # NaN compares false and takes the small branch, which propagates it.
    return m.select(m.cmp("FOrdGreaterThan", t, m.c(ERF_SPLIT)), large, small)


def tanh(m: Float32Math, x: int) -> int:
    t = m.glsl("FAbs", x)
    s = m.mul(x, x)
    small = m.add(x, m.mul(m.mul(x, s), m.horner(s, TANH_SMALL)))
    e = m.glsl("Exp", m.mul(t, m.c(2.0)))  # +inf for large t: the quotient becomes 0
    large = m.copysign(m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e, m.c(1.0)))), x)
    return m.select(m.cmp("FOrdGreaterThanEqual", t, m.c(TANH_SPLIT)), large, small)


def pow_(m: Float32Math, x: int, y: int) -> int:
    """C ``pow``: negative bases with integral exponents keep their sign; others give NaN."""
    r = m.glsl("Pow", m.glsl("FAbs", x), y)
    integral = m.cmp("FOrdEqual", m.glsl("Floor", y), y)
    half = m.mul(y, m.c(0.5))
    odd = m.fb.op("LogicalAnd", m.bool, integral, m.cmp("FOrdNotEqual", m.glsl("Floor", half),
                                                         half))
    signed = m.select(odd, m.neg(r), r)
    negative_base = m.select(integral, signed, m.c(float("nan")))
    result = m.select(m.cmp("FOrdLessThan", x, m.c(0.0)), negative_base, r)
    return m.select(m.cmp("FOrdEqual", y, m.c(0.0)), m.c(1.0), result)


__all__ = ["Float32Math", "erf", "pow_", "tanh"]
