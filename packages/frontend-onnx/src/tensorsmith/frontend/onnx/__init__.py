"""ONNX frontend: ``from_onnx(model, shape, dims=..., static=...) -> (graph, params)``.

Converters are chosen by the model's opset (see :mod:`.registry`); every error is a
:class:`tensorsmith.ir.errors.ModelError` (or subclass) that names the file or node.
"""

from importlib import metadata as _metadata

from .importer import from_onnx
from .inputs import require_static
from .registry import supported_ops

try:
    __version__ = _metadata.version("tensorsmith-frontend-onnx")
except _metadata.PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__

__all__ = ["__version__", "from_onnx", "require_static", "supported_ops"]
