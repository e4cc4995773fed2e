"""Importing the ``vulkan`` package, with errors that say what to install.

The package (cffi bindings) is an optional extra of tensorsmith-runtime and opens the
Vulkan loader (libvulkan.so.1) when imported, so two things can be missing: the Python
package, or the system's loader. Each gets its own message and fix; a missing driver
(ICD) is found later, when the instance is created (instance.py).
"""

from __future__ import annotations

from types import ModuleType

from tensorsmith.runtime.errors import DeviceError

__all__ = ["INSTALL_DRIVER", "INSTALL_PACKAGE", "import_vulkan"]

INSTALL_PACKAGE = "pip install tensorsmith-runtime[vulkan]"
INSTALL_LOADER = "apt-get install libvulkan1"
INSTALL_DRIVER = (
    "install a Vulkan driver (ICD): Mesa's lavapipe runs on any CPU "
    "(apt-get install mesa-vulkan-drivers libvulkan1); for a GPU, install its vendor's "
    "driver. Drivers register in /usr/share/vulkan/icd.d/*.json (or the files named by "
    "VK_DRIVER_FILES / VK_ICD_FILENAMES)"
)


def import_vulkan() -> ModuleType:
    """The ``vulkan`` module, or a DeviceError naming the package or library to install."""
    try:
        import vulkan
    except ImportError as e:
        raise DeviceError(
            f"device 'vulkan' needs the Python package 'vulkan', which cannot be imported "
            f"({e}); install it with: {INSTALL_PACKAGE}"
        ) from None
    except OSError as e:  # the package found no libvulkan.so.1 to open
        raise DeviceError(
            f"device 'vulkan' needs the Vulkan loader library libvulkan.so.1, which cannot "
            f"be loaded ({e}); install it ({INSTALL_LOADER}) and a driver: {INSTALL_DRIVER}"
        ) from None
    return vulkan
