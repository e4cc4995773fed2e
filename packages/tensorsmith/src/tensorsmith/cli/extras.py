"""What a command needs beyond the plain ``pip install tensorsmith``, checked up front.

The plain install compiles for every target but runs and tunes on the CPU only: the
auto-tuner (with scikit-learn) is the ``tune`` extra, and the Python bindings that drive
Vulkan and OpenCL devices are the ``vulkan`` and ``opencl`` extras. Without these checks
a missing piece would show late and badly: a missing tuner as an ImportError (reported
as a bug), a missing binding as every tuning measurement recorded as an error while the
command still exits 0. Each check ends the command with exit 2 and the pip command that
installs what is missing.
"""

from __future__ import annotations

import importlib.util

from tensorsmith.cli._common import CliError

#: device kind -> the module the runtime drives it with (its extra has the kind's name)
DEVICE_BINDINGS = {"vulkan": "vulkan", "opencl": "pyopencl"}


def install_hint(extra: str) -> str:
    return f"pip install 'tensorsmith[{extra}]'"


def require_tuner() -> None:
    """The auto-tuner is installed (``tensorsmith[tune]``)."""
    if importlib.util.find_spec("tensorsmith.autotune") is None:
        raise CliError("tensorsmith tune needs the auto-tuner (tensorsmith-autotune, with "
                       f"scikit-learn), which is not installed; install it with: "
                       f"{install_hint('tune')}")


def require_device_binding(kind: str, purpose: str) -> None:
    """The Python binding that runs ``kind``'s devices imports (nothing to check for the
    CPU); the runtime says what is missing. ``purpose`` says what needs the device."""
    if kind not in DEVICE_BINDINGS:
        return
    from tensorsmith.runtime.device import import_binding
    from tensorsmith.runtime.errors import DeviceError

    try:
        import_binding(kind)
    except DeviceError as e:
        raise CliError(f"{purpose} runs on a {kind} device: {e} (with the full stack: "
                       f"{install_hint(kind)})") from None
