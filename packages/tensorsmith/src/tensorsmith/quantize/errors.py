"""The one error of the quantizer: a user's mistake (a calibration set that does not fit
the model, an unknown method, a model it cannot rewrite).

It derives from :class:`tensorsmith.runtime.errors.TensorsmithError`, so the command line
prints its message as ``error: ...`` with exit status 2 instead of a traceback.
"""

from __future__ import annotations

from tensorsmith.runtime.errors import TensorsmithError


class QuantizeError(TensorsmithError):
    """Quantization cannot go on; the message says what to change."""
