"""The dtypes the compiler knows, by their NumPy names (the names artifacts carry too).

``bfloat16`` has no NumPy dtype of its own: importing ``ml_dtypes`` (a dependency of this
package, and of ONNX) registers one under that name, so ``np.dtype("bfloat16")``,
``astype("bfloat16")`` and the op references work on it like on any float. That import
happens here, and ``tensorsmith.ir`` imports this module before anything else.
"""

import ml_dtypes  # noqa: F401  (registers "bfloat16" with NumPy)
import numpy as np

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "uint16", "uint32", "uint64", "bool")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
#: 16-bit floats: stored and moved at half the bytes of float32, but too coarse to
#: accumulate long sums in (11 and 8 significant bits)
REDUCED_FLOATS = ("float16", "bfloat16")


def itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def accumulator(dtype: str) -> str:
    """The dtype a dot product or convolution of ``dtype`` operands sums in: float32 for
    the 16-bit floats (a float16 sum of a few hundred products already loses most of
    its digits), the operands' own dtype otherwise."""
    return "float32" if dtype in REDUCED_FLOATS else dtype


def result_dtype(*dtypes: str) -> str:
    """The dtype of an elementwise op over inputs of these dtypes (ONNX requires them equal)."""
    return str(np.result_type(*[np.dtype(d) for d in dtypes]))
