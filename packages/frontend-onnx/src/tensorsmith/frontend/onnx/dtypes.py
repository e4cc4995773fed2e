"""ONNX element types and the NumPy dtype names the graph IR uses.

Only the types the graph IR holds are mapped; anything else (strings, float8, 4-bit
integers, complex) is refused at import with the type's ONNX name, rather than surfacing
later as a codegen failure. bfloat16 tensors read as ``ml_dtypes`` arrays, which
``tensorsmith.ir`` registers with NumPy under that name (ir/dtypes.py).
"""

from __future__ import annotations

from onnx import TensorProto

from tensorsmith.ir.errors import ModelError

ONNX_TO_NUMPY: dict[int, str] = {
    TensorProto.FLOAT: "float32",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.DOUBLE: "float64",
    TensorProto.INT64: "int64",
    TensorProto.INT32: "int32",
    TensorProto.INT16: "int16",
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "uint8",
    TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64",
    TensorProto.BOOL: "bool",
}
NUMPY_TO_ONNX: dict[str, int] = {v: k for k, v in ONNX_TO_NUMPY.items()}


def onnx_type_name(elem_type: int) -> str:
    """``TensorProto.FLOAT`` -> ``"FLOAT"``; unknown numbers print as such."""
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"element type {elem_type}"


def to_numpy_dtype(elem_type: int, what: str) -> str:
    """The NumPy name of an ONNX element type; ``what`` names the tensor for the error."""
    try:
        return ONNX_TO_NUMPY[elem_type]
    except KeyError:
        supported = ", ".join(ONNX_TO_NUMPY.values())
        raise ModelError(f"{what} has dtype {onnx_type_name(elem_type)}, which tensorsmith "
                         f"does not support (supported: {supported})") from None


def check_numpy_dtype(dtype: str, what: str) -> str:
    """Accept a NumPy dtype name we support (initializers and constants come as arrays)."""
    if dtype not in NUMPY_TO_ONNX:
        supported = ", ".join(ONNX_TO_NUMPY.values())
        raise ModelError(f"{what} has dtype {dtype}, which tensorsmith does not support "
                         f"(supported: {supported})")
    return dtype
