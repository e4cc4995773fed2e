"""Fit the rational erf of codegen/llvm/fastmath.py: erf(x) ~ x P(x^2) / Q(x^2) on [0, c].

A relative minimax fit by Lawson's method: weighted linear least squares of
``x P(t) - erf(x) Q(t)`` (Q(0) = 1), each pass dividing by the last Q and raising the
weights where the error was largest. Prints the coefficients (highest power first, as
``_poly`` takes them) and the error of a float32 evaluation over the whole line.

    python packages/codegen-llvm/scripts/fit_erf.py --p 6 --q 4 --clamp 3.92
"""

from __future__ import annotations

import argparse
import math

import numpy as np


def fit(p_degree: int, q_degree: int, clamp: float, passes: int = 400
        ) -> tuple[float, np.ndarray, np.ndarray]:
    x = clamp * (1 - np.cos(np.linspace(0, np.pi, 6000))) / 2  # dense at both ends
    x = x[x > 0]
    f = np.array([math.erf(v) for v in x])
    t = x * x
    cols_p = np.stack([x * t**i for i in range(p_degree + 1)], 1)
    cols_q = np.stack([f * t**j for j in range(1, q_degree + 1)], 1)
    weight, last_q = np.ones_like(x), np.ones_like(x)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(passes):
        scale = weight / (f * last_q)  # relative error, linearized around the last Q
        system = np.concatenate([cols_p, -cols_q], 1) * scale[:, None]
        sol, *_ = np.linalg.lstsq(system, f * scale, rcond=None)
        p, q = sol[:p_degree + 1], np.concatenate([[1.0], sol[p_degree + 1:]])
        last_q = np.polyval(q[::-1], t)
        err = np.abs(x * np.polyval(p[::-1], t) / last_q / f - 1)
        if best is None or err.max() < best[0]:
            best = (float(err.max()), p.copy(), q.copy())
        weight = weight * np.sqrt(err / err.max()) + 1e-12
        weight /= weight.max()
    assert best is not None
    return best


def float32_error(p: np.ndarray, q: np.ndarray, clamp: float) -> tuple[float, float]:
    """Max absolute error and max error in ulp of a float32 Horner evaluation."""
    xs = np.concatenate([np.linspace(-6, 6, 400001), np.linspace(-1e-3, 1e-3, 2001)])
    xc = np.clip(xs.astype(np.float32), np.float32(-clamp), np.float32(clamp))
    t = xc * xc
    num, den = np.float32(p[-1]), np.float32(q[-1])
    for c in p[-2::-1]:
        num = num * t + np.float32(c)
    for c in q[-2::-1]:
        den = den * t + np.float32(c)
    got = (xc * num / den).astype(np.float32)
    want = np.array([math.erf(v) for v in xs])
    ulp = np.spacing(np.maximum(np.abs(want), 1e-38).astype(np.float32))
    return float(np.abs(got - want).max()), float((np.abs(got - want) / ulp).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=6, help="degree of P in x^2")
    ap.add_argument("--q", type=int, default=4, help="degree of Q in x^2")
    ap.add_argument("--clamp", type=float, default=3.92, help="|x| beyond which erf is 1")
    args = ap.parse_args()
    rel, p, q = fit(args.p, args.q, args.clamp)
    print(f"max relative error, exact arithmetic: {rel:.3g}")
    print("ERF_P =", [float(c) for c in p[::-1]])
    print("ERF_Q =", [float(c) for c in q[::-1]])
    print("float32 Horner: max abs error {:.3g}, max {:.2f} ulp".format(
        *float32_error(p, q, args.clamp)))


if __name__ == "__main__":
    main()
