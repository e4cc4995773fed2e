"""The dtype names artifacts use for inputs and outputs, and their NumPy dtypes.

Artifacts name dtypes as NumPy does ("float32", "int64", "bool"), in the host's byte
order; this table is the one place that says which names this runtime can hand to NumPy.
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
    return np.dtype(name)
