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
    from tensorsmith.runtime.plan import Plan
    from tensorsmith.runtime.profiling import ProfileReport

__all__ = [
    "FORMAT_VERSION",
    "Artifact",
    "ArtifactError",
    "DeviceError",
    "GraphModule",
    "InputError",
    "Plan",
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
    "Plan": "tensorsmith.runtime.plan",
    "ProfileReport": "tensorsmith.runtime.profiling",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tensorsmith.runtime' has no attribute {name!r}")


def load(
    path: str | os.PathLike[str], device: str | None = None, *, num_threads: int | None = None
) -> GraphModule:
    """Load an artifact for `device`: "cpu", or "opencl" / "opencl:N" (the N-th OpenCL device),
    or "vulkan" / "vulkan:N" (the N-th Vulkan device, best first: see vulkan.list_devices()).
    None (the default) is the first device of the kind the artifact was compiled for (its
    plan's device), so `load("model.vulkan.tsm")` runs on Vulkan as `load("model.so")` runs
    on the CPU.

    Checks the file (footer, format version, checksum) and that its target runs on the
    device before any native code is loaded. `num_threads` sets the threads of this
    artifact's parallel loops (0 = one per core; default TSM_NUM_THREADS or one per core).
    """
    from pathlib import Path

    from tensorsmith.runtime.artifact import open_artifact, read_artifact_file
    from tensorsmith.runtime.device import parse_device
    from tensorsmith.runtime.module import GraphModule

    # One open file for the checks and the loading, so what runs is what was checked.
    with open_artifact(path) as f:
        artifact = read_artifact_file(f, Path(path))
        dev = parse_device(device if device is not None else _own_device(artifact))
        _check_target(artifact, dev)
        module = GraphModule(artifact, _executor(artifact, dev, f.fileno()), dev)
    if num_threads is not None:
        module.set_num_threads(num_threads)
    return module


def _check_target(artifact: Artifact, dev: Any) -> None:
    """Refuse an artifact the device does not run, before any of its code is loaded."""
    from tensorsmith.runtime.device import EXECUTORS

    runs_on = artifact.plan.runs_on
    if runs_on != dev.kind:
        hint = (f"load it with device='{runs_on}'" if runs_on in EXECUTORS
                else "recompile it for a target whose artifacts this runtime runs")
        raise DeviceError(
            f"artifact '{artifact.path}' was compiled for target '{artifact.target}', and "
            f"device '{dev}' does not run it (it runs on device '{runs_on or 'unknown'}'); "
            f"{hint}"
        )


def _own_device(artifact: Artifact) -> str:
    """The device kind the artifact's plan runs on, for ``load`` without a device."""
    runs_on = artifact.plan.runs_on
    if runs_on is None:
        raise DeviceError(f"artifact '{artifact.path}' does not say which device runs it "
                          f"(target '{artifact.target}'); pass device='cpu', 'vulkan' or "
                          "'opencl'")
    return runs_on


def _executor(artifact: Artifact, dev: Any, fd: int) -> Any:
    from tensorsmith.runtime.device import EXECUTORS

    module, _, name = EXECUTORS[dev.kind].partition(":")
    cls = getattr(import_module(module), name)
    return cls(artifact, fd) if dev.kind == "cpu" else cls(artifact, dev)


def get_include() -> str:
    """The directory of tensorsmith_runtime.h, the C ABI of CPU artifacts (for -I)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
