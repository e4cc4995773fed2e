"""Inline float32 exp, erf and tanh that LLVM can vectorize.

LLVM lowers ``llvm.exp`` on vectors to one ``expf`` call per lane, and libm's erf and
tanh block vectorization altogether; elementwise epilogues (GELU, sigmoid, softmax) then
run at scalar speed. These polynomial forms work on scalars and vectors alike:
- exp: range reduction x = k ln2 + r, a degree-6 minimax polynomial in r (Cephes),
  2^k by building the float's exponent bits — about 1 ulp;
- erf: one rational function of x^2 (times x) on the clamped argument: no exp, no
  branch, one division — a few ulp;
- tanh: odd Taylor series below |x| < 0.3, else 1 - 2 / (exp(2|x|) + 1), signed;
- log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f) for
  f = m - 1 (Cephes' degree-8 polynomial), plus e ln2 in two parts; subnormal inputs
  scaled into the normal range first -- about 1 ulp.
"""

from __future__ import annotations

from llvmlite import ir

from .constants import constant

F32 = ir.FloatType()
I32 = ir.IntType(32)




def _int_type(ty: ir.Type) -> ir.Type:
    return ir.VectorType(I32, ty.count) if isinstance(ty, ir.VectorType) else I32


# ``contract`` lets LLVM fuse each multiply-add into one FMA (which rounds once: never
# less accurate), halving the work of the polynomials and range reductions below.
_CONTRACT = ("contract",)


def _fadd(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fadd(x, y, flags=_CONTRACT)


def _fsub(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fsub(x, y, flags=_CONTRACT)


def _fmul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fmul(x, y, flags=_CONTRACT)


def _fdiv(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fdiv(x, y, flags=_CONTRACT)


def _poly(b: ir.IRBuilder, x: ir.Value, coeffs: list[float]) -> ir.Value:
    """Horner: coeffs from the highest power down."""
    acc = constant(x.type, coeffs[0])
    for c in coeffs[1:]:
        acc = _fadd(b, _fmul(b, acc, x), constant(x.type, c))
    return acc


def _intrinsic(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    ty = x.type
    suffix = f"v{ty.count}f32" if isinstance(ty, ir.VectorType) else "f32"
    module = b.module
    full = f"{name}.{suffix}"
    fn = module.globals.get(full) or ir.Function(module, ir.FunctionType(ty, [ty]), full)
    return b.call(fn, [x])


def _select(b: ir.IRBuilder, cond: ir.Value, a: ir.Value, c: ir.Value) -> ir.Value:
    return b.select(cond, a, c)


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    hi = b.fcmp_ordered(">", x, constant(ty, 88.72283))
    lo = b.fcmp_ordered("<", x, constant(ty, -87.33654))
    xc = _select(b, hi, constant(ty, 88.72283), _select(b, lo, constant(ty, -87.33654), x))
    k = _intrinsic(b, "llvm.roundeven", _fmul(b, xc, constant(ty, 1.4426950408889634)))
    r = _fsub(b, _fsub(b, xc, _fmul(b, k, constant(ty, 0.693359375))),
              _fmul(b, k, constant(ty, -2.12194440e-4)))
    p = _poly(b, r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                     1.6666665459e-1, 5.0000001201e-1])
    r2 = _fmul(b, r, r)
    y = _fadd(b, _fadd(b, _fmul(b, p, r2), r), constant(ty, 1.0))
    # 2^k as 2^(k>>1) * 2^(k - (k>>1)): each factor's exponent stays representable at
    # both ends of the range (k runs from -126 to 128).
    ity = _int_type(ty)
    ki = b.fptosi(k, ity)
    k1 = b.ashr(ki, constant(ity, 1))
    k2 = b.sub(ki, k1)
    s1 = b.bitcast(b.shl(b.add(k1, constant(ity, 127)), constant(ity, 23)), ty)
    s2 = b.bitcast(b.shl(b.add(k2, constant(ity, 127)), constant(ity, 23)), ty)
    out = _fmul(b, _fmul(b, y, s1), s2)
    out = _select(b, hi, constant(ty, float("inf")), out)
    out = _select(b, lo, constant(ty, 0.0), out)
    return _select(b, b.fcmp_unordered("uno", x, x), x, out)  # NaN stays NaN


# erf(x) = x P(x^2) / Q(x^2) on |x| <= ERF_CLAMP, a relative minimax fit (max relative
# error 5e-8 in exact arithmetic; scripts/fit_erf.py makes these). Past the clamp erf is
# 1 to float32 precision.
ERF_CLAMP = 3.92
ERF_P = [1.992428790572205e-08, -1.9578417011029044e-06, 0.00014185122767856396,
         0.0037016341277884284, 0.05057339945195904, 0.19992503898615946, 1.128379108983215]
ERF_Q = [0.0009560456367998302, 0.014353250910135203, 0.11499862897771822,
         0.5105106075041299, 1.0]


def erf_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    hi = b.fcmp_ordered(">", x, constant(ty, ERF_CLAMP))
    lo = b.fcmp_ordered("<", x, constant(ty, -ERF_CLAMP))
    xc = _select(b, hi, constant(ty, ERF_CLAMP), _select(b, lo, constant(ty, -ERF_CLAMP), x))
    t = _fmul(b, xc, xc)
    return _fdiv(b, _fmul(b, xc, _poly(b, t, ERF_P)), _poly(b, t, ERF_Q))


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    ax = _intrinsic(b, "llvm.fabs", x)
    e = exp_f32(b, _fmul(b, ax, constant(ty, 2.0)))
    mag = _fsub(b, constant(ty, 1.0), _fdiv(b, constant(ty, 2.0), _fadd(b, e, constant(ty, 1.0))))
    negative = b.fcmp_ordered("<", x, constant(ty, 0.0))
    signed = _select(b, negative, _fsub(b, constant(ty, 0.0), mag), mag)
    # Near 0 the formula cancels: the odd Taylor series is exact to float32 below 0.3.
    x2 = _fmul(b, x, x)
    series = _fmul(b, x, _poly(b, x2, [-1382 / 155925, 62 / 2835, -17 / 315, 2 / 15, -1 / 3,
                                     1.0]))
    return _select(b, b.fcmp_ordered("<", ax, constant(ty, 0.3)), series, signed)


LOG_P = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
         1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
         3.3333331174e-1]
SMALLEST_NORMAL = 1.1754943508222875e-38


def log_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    ity = _int_type(ty)
    subnormal = b.fcmp_ordered("<", x, constant(ty, SMALLEST_NORMAL))
    scaled = _select(b, subnormal, _fmul(b, x, constant(ty, 8388608.0)), x)  # x 2^23
    bits = b.bitcast(scaled, ity)
    e = b.sub(b.ashr(bits, constant(ity, 23)), constant(ity, 127))
    m = b.bitcast(b.or_(b.and_(bits, constant(ity, 0x007FFFFF)), constant(ity, 0x3F800000)), ty)
    halve = b.fcmp_ordered(">", m, constant(ty, 1.4142135623730951))
    m = _select(b, halve, _fmul(b, m, constant(ty, 0.5)), m)
    e = b.add(e, b.zext(halve, ity))
    e = b.sub(e, b.select(subnormal, constant(ity, 23), constant(ity, 0)))
    f = _fsub(b, m, constant(ty, 1.0))
    z = _fmul(b, f, f)
    y = _fmul(b, _fmul(b, f, z), _poly(b, f, LOG_P))
    ef = b.sitofp(e, ty)
    y = _fadd(b, y, _fmul(b, ef, constant(ty, -2.12194440e-4)))
    y = _fsub(b, y, _fmul(b, z, constant(ty, 0.5)))
    out = _fadd(b, _fadd(b, f, y), _fmul(b, ef, constant(ty, 0.693359375)))
    out = _select(b, b.fcmp_ordered("==", x, constant(ty, 0.0)), constant(ty, float("-inf")),
                  out)
    out = _select(b, b.fcmp_ordered("==", x, constant(ty, float("inf"))),
                  constant(ty, float("inf")), out)
    # negative or NaN: NaN
    return _select(b, b.fcmp_unordered("<", x, constant(ty, 0.0)), constant(ty, float("nan")),
                   out)


INLINE_F32 = {"exp": exp_f32, "erf": erf_f32, "tanh": tanh_f32, "log": log_f32}
