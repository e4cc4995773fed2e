"""tensorsmith-codegen-spirv: tensor IR to SPIR-V for Vulkan compute.

Registered as the ``vulkan`` target through the ``tensorsmith.codegen`` entry-point group.
Every GPU-scheduled kernel is split into dispatches (``tensorsmith.ir.te.dispatch``), and
each dispatch becomes one SPIR-V 1.3 module with one GLCompute entry point, written by
the project's own binary emitter (no shader compiler involved).

Target options: ``vulkan -validate=1`` runs spirv-val on every module at build time;
``-cooperative-matrix=16x16x16``, ``-subgroup-size=32`` and ``-shared-memory=49152``
describe the GPU (resources.py): float16 matrix products then run on cooperative
matrices, and the artifact loads only on a device that has them;
``-float16-arithmetic=1`` computes float16 values in float16.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from tensorsmith.ir.target import Target
from tensorsmith.ir.targets import TargetInfo
from tensorsmith.ir.te.dispatch import split_dispatches
from tensorsmith.ir.te.stmt import PrimFunc

from .emit import SpirvModule, emit_dispatch
from .kernels import SpirvKernels
from .resources import describe_gpu

try:
    __version__ = _metadata.version("tensorsmith-codegen-spirv")
except _metadata.PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__

__all__ = ["TARGET", "SpirvKernels", "SpirvModule", "__version__", "codegen", "describe_gpu"]

#: The ``vulkan`` target: GPU kernels as SPIR-V, run by the runtime's Vulkan device.
TARGET = TargetInfo(kind="vulkan", family="gpu", device="vulkan", suffix=".vulkan.tsm",
                    tunable=True, describe_gpu=describe_gpu,
                    refused_dtypes=frozenset({"bfloat16"}))


def codegen(functions: list[PrimFunc], target: Target) -> SpirvKernels:
    """The ``vulkan`` entry point of the ``tensorsmith.codegen`` group."""
    gpu = describe_gpu(target)
    kernels = {f.name: [emit_dispatch(f, d, gpu.float16_arithmetic, gpu.integer_dot_product)
                        for d in split_dispatches(f)]
               for f in functions}
    result = SpirvKernels(kernels, target)
    if target.options.get("validate", "0") not in ("0", "false", "no"):
        result.validate()
    return result
