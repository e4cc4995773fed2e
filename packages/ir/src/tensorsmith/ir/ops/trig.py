"""Trigonometric and hyperbolic functions. ``sin`` and ``cos`` are what rotary position
embeddings (LLaMA and kin) take of position frequencies, mostly constants that fold at
import; the others are ONNX's elementwise Tan, Asin, ..., Atanh. Every run-time use
lowers to an LLVM intrinsic or libm."""

from __future__ import annotations

import numpy as np

from ..te.expr import call
from .elementwise import unary

unary("sin", lambda x, a: call("sin", x), lambda x, a: np.sin(x))
unary("cos", lambda x, a: call("cos", x), lambda x, a: np.cos(x))

_NUMPY = {"tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
          "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
          "atanh": np.arctanh}
for _fn, _np in _NUMPY.items():
    unary(_fn, lambda x, a, fn=_fn: call(fn, x), lambda x, a, f=_np: f(x))
