"""tensorsmith-ir: the graph IR, tensor IR, op library, passes, targets and ``build``."""

from importlib.metadata import PackageNotFoundError, version

from . import dtypes  # noqa: F401, I001  (first: registers bfloat16 with NumPy)
from .build import build
from .builder import GraphBuilder
from .errors import ModelError, ShapeError, TargetError, TensorsmithError, UnsupportedOpError
from .graph import Graph, Node, Value
from .interpreter import run_graph
from .module import CompiledModule
from .target import Target
from .text import parse_graph, print_graph

try:
    __version__ = version("tensorsmith-ir")
except PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__

__all__ = ["CompiledModule", "Graph", "GraphBuilder", "ModelError", "Node", "ShapeError",
           "Target", "TargetError", "TensorsmithError", "UnsupportedOpError", "Value",
           "__version__", "build", "parse_graph", "print_graph", "run_graph"]
