"""The ``tensorsmith`` command line: compile ONNX models and run compiled artifacts.

``tensorsmith compile`` and ``tensorsmith run``; see ``tensorsmith --help``.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("tensorsmith")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
