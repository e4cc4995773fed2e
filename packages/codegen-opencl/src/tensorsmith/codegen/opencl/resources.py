"""The device an ``opencl`` target compiles for: the target options that describe it.

OpenCL C is compiled by the driver on the machine that runs it, but what the kernels
compute is decided here, on the build host, which need not have the device. So the one
choice that depends on the device is said in the target string, and the runtime refuses,
at load, an artifact whose program needs an extension the device lacks:

* ``-float16-arithmetic=1``: compute float16 values in ``half`` (the device needs
  ``cl_khr_fp16``, which the artifact then lists). Without it (the default) float16
  tensors still live in memory as ``half``, read and written with ``vload_half`` /
  ``vstore_half_rte``, which every OpenCL device has, and are computed in ``float``,
  rounded to float16 wherever the ``half`` arithmetic would round (see emit.py). Both
  give the same values for + - * /; the default runs on every device, PoCL on CPUs
  included, and ``half`` arithmetic is faster where the device has it.
* ``-build-options=...``: passed to the driver's compiler (kernels.py).
"""

from __future__ import annotations

from dataclasses import replace

from tensorsmith.ir.target import BASELINE_GPU, GpuResources, Target


def describe_gpu(target: Target) -> GpuResources:
    """The ``describe_gpu`` of the ``opencl`` target's record (see the module docstring)."""
    return replace(BASELINE_GPU, float16_arithmetic=target.flag("float16-arithmetic"))


__all__ = ["describe_gpu"]
