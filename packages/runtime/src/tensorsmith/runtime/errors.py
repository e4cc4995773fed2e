"""The errors tensorsmith shows to its users.

Every error a user can cause or fix -- a bad model, a damaged file, a wrong input, a
missing device -- derives from :class:`TensorsmithError`, in every distribution of the
project. The command line catches exactly this class, prints the message and exits with
status 2, so the message must stand alone: it names the problem and the place, and says
what to do. Anything else that escapes is a bug and keeps its traceback.
"""

from collections.abc import Sequence

__all__ = [
    "ArtifactError",
    "DeviceError",
    "InputError",
    "TensorsmithError",
    "UnsupportedCpuError",
]


class TensorsmithError(Exception):
    """Base of every user-facing tensorsmith error."""


class ArtifactError(TensorsmithError):
    """A file is not an artifact, is damaged, or has a format this runtime cannot read;
    or an artifact cannot be written where the user asked."""


class InputError(TensorsmithError):
    """A call on a loaded model got a wrong input or output name, index, dtype or shape,
    an input was never set, or the model was closed."""


class DeviceError(TensorsmithError):
    """A device is unknown, unavailable here, or does not run the artifact's target."""


class UnsupportedCpuError(DeviceError):
    """This CPU lacks instruction-set extensions that a CPU artifact's code was compiled
    for (its metadata's ``cpu_features``). ``missing`` names them as LLVM does, so a
    program that ships builds for several CPUs can catch this and load the next one."""

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)
