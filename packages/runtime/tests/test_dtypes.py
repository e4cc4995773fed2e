"""The runtime's dtype table: bfloat16 is handed to NumPy as ``ml_dtypes.bfloat16``
(the optional ``bfloat16`` extra), and its absence is a plain error naming the tensor."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tensorsmith.runtime.dtypes import numpy_dtype
from tensorsmith.runtime.errors import ArtifactError


def test_bfloat16_is_ml_dtypes() -> None:
    import ml_dtypes  # (a test dependency, through onnx)

    dt = numpy_dtype("bfloat16", "output 'y'")
    assert dt == np.dtype(ml_dtypes.bfloat16) and dt.itemsize == 2


def test_bfloat16_without_ml_dtypes_names_the_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails as if not installed
    with pytest.raises(ArtifactError, match=r"output 'y' has dtype 'bfloat16'.*"
                       r"tensorsmith-runtime\[bfloat16\]"):
        numpy_dtype("bfloat16", "output 'y'")


def test_unknown_dtype_names_the_tensor() -> None:
    with pytest.raises(ArtifactError, match="input 'x' has dtype 'float8'"):
        numpy_dtype("float8", "input 'x'")
