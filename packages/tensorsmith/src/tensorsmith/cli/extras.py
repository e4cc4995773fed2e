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

import importlib
import importlib.util

from tensorsmith.cli._common import CliError

#: target kind -> the module the runtime drives that kind of device with
DEVICE_BINDINGS = {"vulkan": "vulkan", "opencl": "pyopencl"}
#: target kind -> Debian packages of a loader and a driver that runs on any CPU
SYSTEM_PACKAGES = {"vulkan": "libvulkan1 mesa-vulkan-drivers",
                   "opencl": "ocl-icd-libopencl1 pocl-opencl-icd"}


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
    CPU). ``purpose`` says what needs the device, for the message."""
    module = DEVICE_BINDINGS.get(kind)
    if module is None:
        return
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise CliError(f"{purpose} runs on a {kind} device, which needs the Python package "
                       f"'{module}' ({e}); install it with: {install_hint(kind)}") from None
    except OSError as e:  # the binding is there, the system's library it opens is not
        raise CliError(f"{purpose} runs on a {kind} device, but the package '{module}' "
                       f"cannot load the system's {kind} library ({e}); install a loader and a "
                       f"driver (on Debian, for any CPU: apt-get install "
                       f"{SYSTEM_PACKAGES[kind]}; for a GPU, its vendor's driver)") from None
