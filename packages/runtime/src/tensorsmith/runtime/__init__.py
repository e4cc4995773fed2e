"""tensorsmith-runtime: load a compiled tensorsmith artifact and run it.

    import tensorsmith.runtime as rt
    m = rt.load("model.so", device="cpu")
    outputs = m.run({"input": x})

This package imports nothing of the compiler, so a device needs only it and NumPy. It is
imported by every tool of the project, so importing it is kept cheap: the loader, NumPy
and ctypes are imported on first use, not here.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING, Any

from tensorsmith.runtime._version import __version__
from tensorsmith.runtime.errors import ArtifactError, DeviceError, InputError, TensorsmithError

if TYPE_CHECKING:
    from tensorsmith.runtime.artifact import FORMAT_VERSION, Artifact, read_artifact, write_artifact
    from tensorsmith.runtime.module import GraphModule
    from tensorsmith.runtime.profiling import ProfileReport

__all__ = [
    "FORMAT_VERSION",
    "Artifact",
    "ArtifactError",
    "DeviceError",
    "GraphModule",
    "InputError",
    "ProfileReport",
    "TensorsmithError",
    "__version__",
    "get_include",
    "load",
    "read_artifact",
    "write_artifact",
]

_LAZY = {
    "FORMAT_VERSION": "tensorsmith.runtime.artifact",
    "Artifact": "tensorsmith.runtime.artifact",
    "read_artifact": "tensorsmith.runtime.artifact",
    "write_artifact": "tensorsmith.runtime.artifact",
    "GraphModule": "tensorsmith.runtime.module",
    "ProfileReport": "tensorsmith.runtime.profiling",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tensorsmith.runtime' has no attribute {name!r}")


def load(
    path: str | os.PathLike[str], device: str = "cpu", *, num_threads: int | None = None
) -> GraphModule:
    """Load an artifact for `device`: "cpu", or "opencl" / "opencl:N" (the N-th OpenCL device),
    or "vulkan" / "vulkan:N" (the N-th Vulkan device, best first: see vulkan.list_devices()).

    Checks the file (footer, format version, checksum) and that its target runs on the
    device before any native code is loaded. `num_threads` sets the threads of this
    artifact's parallel loops (0 = one per core; default TSM_NUM_THREADS or one per core).
    """
    from tensorsmith.runtime.artifact import read_artifact
    from tensorsmith.runtime.device import TARGET_OF_DEVICE, parse_device

    dev = parse_device(device)
    artifact = read_artifact(path)
    wanted = TARGET_OF_DEVICE[dev.kind]
    if artifact.target != wanted:
        runs_on = [d for d, t in TARGET_OF_DEVICE.items() if t == artifact.target]
        hint = f"load it with device='{runs_on[0]}'" if runs_on else "recompile it"
        raise DeviceError(
            f"artifact '{artifact.path}' was compiled for target '{artifact.target}', and "
            f"device '{dev}' runs target '{wanted}' artifacts; {hint}"
        )
    from tensorsmith.runtime.module import GraphModule

    module = GraphModule(artifact, _executor(artifact, dev), dev)
    if num_threads is not None:
        module.set_num_threads(num_threads)
    return module


# Device kind -> "module:Class" of its executor. A GPU executor is built as
# Class(artifact, device); the CPU's CpuModel takes the artifact's path alone. Executors are
# imported only when used, so an optional backend's dependency (pyopencl) stays optional.
_EXECUTORS = {
    "cpu": "tensorsmith.runtime.cpu:CpuModel",
    "opencl": "tensorsmith.runtime.opencl:OpenCLModel",
    "vulkan": "tensorsmith.runtime.vulkan:VulkanModel",
}


def _executor(artifact: Artifact, dev: Any) -> Any:
    module, _, name = _EXECUTORS[dev.kind].partition(":")
    cls = getattr(import_module(module), name)
    return cls(artifact.path) if dev.kind == "cpu" else cls(artifact, dev)


def get_include() -> str:
    """The directory of tensorsmith_runtime.h, the C ABI of CPU artifacts (for -I)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
