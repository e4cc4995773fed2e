"""ONNX frontend: ``from_onnx(model, shape) -> (graph, params)``.

Converters are chosen by the model's opset (see :mod:`.registry`); every error is a
:class:`tensorsmith.ir.errors.ModelError` (or subclass) that names the file or node.
"""

from .importer import from_onnx
from .registry import supported_ops

__all__ = ["from_onnx", "supported_ops"]
