"""The ``tensorsmith`` command line: compile ONNX models and run compiled artifacts.

``tensorsmith compile`` and ``tensorsmith run``; see ``tensorsmith --help``.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("tensorsmith")
except _metadata.PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__

__all__ = ["__version__"]
