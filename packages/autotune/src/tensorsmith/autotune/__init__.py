"""tensorsmith-autotune: searches schedules for tensorsmith's tensor programs.

Planned contents (see shared DESIGN.md): task extraction from a graph, the search
space of schedule steps, features and a gradient-boosted cost model, measurement
(local processes, Dask distributed past one machine), JSON-lines tuning records,
and a task scheduler. Nothing is implemented yet.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("tensorsmith-autotune")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
