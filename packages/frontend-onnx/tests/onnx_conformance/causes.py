"""Why recorded failures fail: a root cause per failure, from its case name and verdict.

The verdict (check.py) says what went wrong in one line; the cause says why, in terms of
what would fix it, so the conformance table can group failures by what it would take to
fix them. First match wins; every failure gets a cause.
"""

from __future__ import annotations

import re

CAUSES: list[tuple[str, str]] = [
    (r"fp16.*values differ",
     "float16 rounding: tensorsmith accumulates in float32, the reference in float16 "
     "NumPy; 1-2 ulp apart"),
    (r"^test_dft_inverse.*values differ",
     "the reference inverts in complex64; 2e-7 apart at atol 1e-7 (tensorsmith computes "
     "in float64)"),
    (r"ConstantRequiredError: \(Loop.*trip c",
     "Loop is unrolled at import, but its trip count is computed from float inputs: frozen "
     "into initializers, they are weights, which the importer does not fold"),
    (r"only 1-D and 2-D", "3-D convolution: the op library has conv2d only"),
    (r"MaxPool.*(output 1|storage_order)", "MaxPool's indices output is not implemented"),
    (r"crash", "the compiled artifact crashed"),
    (r"timeout", "compiling or running took too long"),
    (r"unsupported op", "no converter yet"),
]


def cause(name: str, reason: str) -> str:
    """The root cause of the failure of case ``name`` with verdict ``reason``."""
    text = f"{name}: {reason}"
    for pattern, why in CAUSES:
        if re.search(pattern, text):
            return why
    return "other (see the verdict)"
