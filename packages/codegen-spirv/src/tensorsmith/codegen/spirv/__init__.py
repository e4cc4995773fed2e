"""tensorsmith-codegen-spirv: tensor IR to SPIR-V for Vulkan compute.

Registered as the ``vulkan`` target through the ``tensorsmith.codegen`` entry-point group.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("tensorsmith-codegen-spirv")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

__all__ = ["__version__", "codegen"]


def _not_implemented_error(message: str) -> Exception:
    """A NotImplementedError that is also a TensorsmithError, so the CLI reports it cleanly."""
    try:
        from tensorsmith.runtime.errors import TensorsmithError
    except ImportError:  # pragma: no cover - tensorsmith-runtime is a dependency via tensorsmith-ir
        return NotImplementedError(message)

    class TargetNotImplementedError(TensorsmithError, NotImplementedError):
        pass

    return TargetNotImplementedError(message)


def codegen(functions: Any, target: Any) -> Any:
    """Entry point of the ``tensorsmith.codegen`` group for the ``vulkan`` target.

    Placeholder: the SPIR-V emitter is not written yet, so this always raises.
    """
    raise _not_implemented_error(
        "the vulkan target's SPIR-V emitter is not implemented yet in "
        f"tensorsmith-codegen-spirv {__version__}"
    )
