"""Trigonometric and hyperbolic functions. ``sin`` and ``cos`` are what rotary position
embeddings (LLaMA and kin) take of position frequencies, mostly constants that fold at
import; the others are ONNX's elementwise Tan, Asin, ..., Atanh. Every run-time use
lowers to an LLVM intrinsic or libm."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..op_registry import Attrs
from ..te.expr import Expr, call
from .elementwise import unary

unary("sin", lambda x, a: call("sin", x), lambda x, a: np.sin(x))
unary("cos", lambda x, a: call("cos", x), lambda x, a: np.cos(x))

_NUMPY = {"tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
          "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
          "atanh": np.arctanh}


def _libm(fn: str) -> Callable[[Expr, Attrs], Expr]:
    return lambda x, a: call(fn, x)


def _numpy(f: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray, Attrs], np.ndarray]:
    return lambda x, a: f(x)


for _fn, _np in _NUMPY.items():
    unary(_fn, _libm(_fn), _numpy(_np))
