"""The dtypes the compiler knows, by their NumPy names (the names artifacts carry too)."""

import numpy as np

DTYPES = ("float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "uint16",
          "uint32", "uint64", "bool")
FLOAT_DTYPES = ("float32", "float16", "float64")


def itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def result_dtype(*dtypes: str) -> str:
    """The dtype of an elementwise op over inputs of these dtypes (ONNX requires them equal)."""
    return str(np.result_type(*[np.dtype(d) for d in dtypes]))
