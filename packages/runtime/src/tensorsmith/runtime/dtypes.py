"""The dtype names artifacts use for inputs and outputs, and their NumPy dtypes.

Artifacts name dtypes as NumPy does ("float32", "int64", "bool"), in the host's byte
order; this table is the one place that says which names this runtime can hand to NumPy.

NumPy has no bfloat16: a model whose inputs or outputs are bfloat16 hands over
``ml_dtypes.bfloat16`` arrays, which the ``bfloat16`` extra installs (most models never
need it: a float32 model compiled with ``precision="bf16"`` keeps float32 inputs and
outputs, so the runtime stays NumPy-only).
"""

from __future__ import annotations

import numpy as np

from tensorsmith.runtime.errors import ArtifactError

__all__ = ["numpy_dtype"]

_SUPPORTED = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)


def numpy_dtype(name: str, where: str) -> np.dtype:
    """The NumPy dtype for an artifact's dtype name; `where` names the tensor for errors."""
    if name not in _SUPPORTED:
        raise ArtifactError(
            f"{where} has dtype {name!r}, which this tensorsmith-runtime cannot represent "
            f"(it knows {', '.join(_SUPPORTED)}); upgrade tensorsmith-runtime"
        )
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ArtifactError(
                f"{where} has dtype 'bfloat16', which NumPy represents only with the "
                "ml_dtypes package: pip install 'tensorsmith-runtime[bfloat16]'") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
