"""The errors tensorsmith shows to its users.

Every error a user can cause or fix -- a bad model, a damaged file, a wrong input, a
missing device -- derives from :class:`TensorsmithError`, in every distribution of the
project. The command line catches exactly this class, prints the message and exits with
status 2, so the message must stand alone: it names the problem and the place, and says
what to do. Anything else that escapes is a bug and keeps its traceback.
"""

__all__ = ["ArtifactError", "DeviceError", "InputError", "TensorsmithError"]


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
