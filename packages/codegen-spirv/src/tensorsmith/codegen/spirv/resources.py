"""The GPU a ``vulkan`` target compiles for: the target options that describe it.

Kernels are compiled on a build host that need not have the GPU, so what a kernel may
use beyond what every Vulkan 1.1 device offers is said in the target string, and the
runtime refuses, at load, an artifact whose kernels need what the device lacks:

* ``-cooperative-matrix=16x16x16`` (several separated by commas): the cooperative-matrix
  products (VK_KHR_cooperative_matrix) the device offers at subgroup scope, M x N x K,
  float16 inputs and float32 accumulators unless written ``16x16x16:f16:f16`` (input
  and accumulator types). ``tensorsmith devices`` lists a device's shapes and the
  target string that uses them.
* ``-workgroup-matrix=16x16x16/256`` (several separated by commas): cooperative
  matrices a whole workgroup holds (VK_NV_cooperative_matrix2, workgroup scope with
  flexible dimensions): blocks of any multiple of M x N x K, float16 inputs and float32
  accumulators, in workgroups of that many invocations; ``-workgroup-matrix-max=256``
  the largest dimension (default 256). The driver then stages the operands itself.
* ``-subgroup-size=32``: invocations of a subgroup (the kernels assume this many hold a
  cooperative matrix; the runtime checks the device's).
* ``-shared-memory=49152``: bytes of workgroup memory a kernel may declare (default
  16384, every device's minimum; 32768 with cooperative matrices, which every device
  offering them has).
* ``-max-invocations=1024``: invocations of one workgroup at most (default 256, every
  device's minimum; the runtime checks each dispatch's workgroup against the device's
  maxComputeWorkGroupInvocations at load).
* ``-float16-arithmetic=1``: compute float16 values in float16 (the device needs
  shaderFloat16, which the artifact then lists) instead of widening each to float32;
  what the graph computes in float32 (matmul sums of float16, casts) stays float32.
* ``-integer-dot-product=1``: the integer ops' four-byte dots are one packed dot
  instruction (the device needs shaderIntegerDotProduct, which the artifact then lists:
  Vulkan 1.3, or VK_KHR_shader_integer_dot_product).
"""

from __future__ import annotations

from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import (
    BASELINE_GPU,
    GpuResources,
    MatrixShape,
    Target,
    WorkgroupMatrix,
)

#: Short names of component types in ``-cooperative-matrix``.
TYPES = {"f16": "float16", "f32": "float32", "float16": "float16", "float32": "float32"}
#: Workgroup memory assumed with cooperative matrices when ``-shared-memory`` is not given.
COOPERATIVE_SHARED_BYTES = 32768
#: The largest dimension of a workgroup-held matrix when ``-workgroup-matrix-max`` is not
#: given (what NVIDIA's drivers report).
WORKGROUP_MATRIX_MAX = 256


def parse_shape(text: str, target: Target) -> MatrixShape:
    """``MxNxK`` or ``MxNxK:input:accumulator`` as a :class:`MatrixShape`."""
    dims, *types = text.split(":")
    parts = dims.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts) or \
            len(types) not in (0, 2) or any(t not in TYPES for t in types):
        raise TargetError(f"target '{target}': cooperative-matrix shape {text!r} is not "
                          "MxNxK or MxNxK:f16:f32 (e.g. -cooperative-matrix=16x16x16)")
    m, n, k = (int(p) for p in parts)
    a, c = (TYPES[types[0]], TYPES[types[1]]) if types else ("float16", "float32")
    return MatrixShape(m, n, k, a, a, c)


def parse_workgroup_matrix(text: str, largest: int, target: Target) -> WorkgroupMatrix:
    """``MxNxK/invocations`` as a :class:`WorkgroupMatrix`."""
    dims, _, invocations = text.partition("/")
    parts = dims.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts) or \
            not invocations.isdigit() or int(invocations) < 1:
        raise TargetError(f"target '{target}': workgroup matrix {text!r} is not "
                          "MxNxK/invocations (e.g. -workgroup-matrix=16x16x16/256)")
    m, n, k = (int(p) for p in parts)
    return WorkgroupMatrix(m, n, k, int(invocations), largest)


def describe_gpu(target: Target) -> GpuResources:
    """The ``describe_gpu`` of the ``vulkan`` target's record (see the module docstring)."""
    options = target.options
    text = options.get("cooperative-matrix", "")
    shapes = tuple(parse_shape(t, target) for t in text.split(",") if t) if text else ()
    held_text = options.get("workgroup-matrix", "")
    largest = _int(target, "workgroup-matrix-max", WORKGROUP_MATRIX_MAX)
    held = tuple(parse_workgroup_matrix(t, largest, target) for t in held_text.split(",")
                 if t)
    default_shared = COOPERATIVE_SHARED_BYTES if shapes or held else BASELINE_GPU.shared_bytes
    return GpuResources(shapes, _int(target, "subgroup-size", BASELINE_GPU.subgroup_size),
                        _int(target, "shared-memory", default_shared),
                        target.flag("float16-arithmetic"),
                        _int(target, "max-invocations", BASELINE_GPU.max_invocations),
                        workgroup_matrices=held,
                        integer_dot_product=target.flag("integer-dot-product"))


def _int(target: Target, key: str, default: int) -> int:
    value = target.options.get(key)
    if value is None:
        return default
    if not value.isdigit() or int(value) < 1:
        raise TargetError(f"target '{target}': -{key}={value} is not a positive integer")
    return int(value)


__all__ = ["COOPERATIVE_SHARED_BYTES", "WORKGROUP_MATRIX_MAX", "describe_gpu", "parse_shape",
           "parse_workgroup_matrix"]
