"""ONNX converters, one module per op family; importing this package registers them."""

from . import (  # noqa: F401
    activations,
    constants,
    conv,
    elementwise,
    nn,
    normalization,
    recurrent,
    reduce,
    shape,
)
