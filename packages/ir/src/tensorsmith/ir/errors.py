"""Errors the compiler raises for bad models and bad requests.

All derive from :class:`tensorsmith.runtime.errors.TensorsmithError`, the one base the
command line catches to print a plain message (exit code 2) instead of a traceback.
"""

from tensorsmith.runtime.errors import TensorsmithError

__all__ = ["ModelError", "OptionError", "ShapeError", "TargetError", "TensorsmithError",
           "UnsupportedOpError"]


class ModelError(TensorsmithError):
    """The model is malformed or uses a feature the compiler does not take."""


class UnsupportedOpError(ModelError):
    """One or more ops have no converter; the message lists every one of them at once."""


class ShapeError(ModelError):
    """Shapes or dtypes of an op's inputs do not fit the op."""


class TargetError(TensorsmithError):
    """A target is unknown, or the distribution that provides it is not installed."""


class OptionError(TensorsmithError, ValueError):
    """A build option has a value the compiler does not take (the message names the
    option, the value and the values it takes)."""
