"""ONNX converters, one module per op family; importing this package registers them."""

from . import (  # noqa: F401
    activations,
    attention,
    constants,
    control,
    conv,
    detection,
    elementwise,
    indexing,
    linalg,
    losses,
    nn,
    normalization,
    quantize,
    recurrent,
    reduce,
    resize,
    sampling,
    shape,
    signal,
    text,
)
