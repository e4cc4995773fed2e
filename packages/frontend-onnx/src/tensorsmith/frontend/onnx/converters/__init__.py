"""ONNX converters, one module per op family; importing this package registers them."""

from . import (  # noqa: F401
    activations,
    constants,
    elementwise,
    nn,
    normalization,
    reduce,
    shape,
)
