"""The execution plan of a ``vulkan`` artifact (its ``Plan`` and ``vulkan`` dispatch
table), checked.

Everything the executor trusts about the file is checked here, once, so a damaged or
mismatched artifact fails at load with an ArtifactError naming the field, instead of
failing later inside the driver. The layout of the ``vulkan`` key is documented in
docs/spirv-manifest.md ("The artifact's vulkan metadata").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, TypeGuard

from tensorsmith.runtime.artifact import Artifact
from tensorsmith.runtime.cpu import TensorSpec
from tensorsmith.runtime.errors import ArtifactError
from tensorsmith.runtime.gpu_plan import (
    Declared,
    GpuDispatch,
    GpuStep,
    check_plan,
    run_checks,
)
from tensorsmith.runtime.plan import PARAMS_SECTION, Buffer, Check, Tensor
from tensorsmith.runtime.shapes import size_expr

__all__ = ["METADATA_VERSION", "DispatchSpec", "StepSpec", "VulkanPlan", "held_shape", "parse"]

#: The newest ``vulkan`` metadata version this runtime reads.
METADATA_VERSION = 1
#: The compiler folds wider grids into two axes (docs/spirv-manifest.md, "Limits").
MAX_GRID = 65535


@dataclass(frozen=True)
class DispatchSpec:
    name: str
    section: str
    entry_point: str
    #: workgroup counts: ints, or (a plan with symbols) size expressions as text
    grid: tuple[int | str, int | str, int | str]
    workgroup: tuple[int, int, int]
    bindings: tuple[tuple[int, int], ...]  # (binding number, index into the step's args)


@dataclass(frozen=True)
class StepSpec:
    name: str
    kernel: str
    args: tuple[int, ...]  # plan buffer of each kernel parameter
    dispatches: tuple[DispatchSpec, ...]


@dataclass(frozen=True)
class IOSpec:
    tensor: TensorSpec
    buffer: int


@dataclass
class VulkanPlan:
    buffers: list[Buffer]
    steps: list[StepSpec]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    features: list[str]
    workspace_bytes: int
    params_bytes: int
    checks: tuple[Check, ...]
    #: what the kernels assume of cooperative matrices: ``{"shapes": ["16x16x16
    #: float16*float16+float32"], "subgroup_size": 32}``, or None when they use none
    cooperative_matrix: dict[str, Any] | None = None
    #: what they assume of matrices a whole workgroup holds: ``{"shapes": ["128x256x32/256
    #: float16*float16+float32"]}`` (block, workgroup invocations, types), or None
    workgroup_matrix: dict[str, Any] | None = None


def parse(artifact: Artifact) -> VulkanPlan:
    """The artifact's plan (``artifact.plan``) with its ``vulkan`` dispatch table, checked
    against the SPIR-V modules."""
    meta, plan = artifact.metadata, artifact.plan
    where = f"artifact '{artifact.path}'"

    def bad(what: str) -> ArtifactError:
        return ArtifactError(f"{where} is inconsistent: {what}; re-export it")

    info = meta.get("vulkan")
    if not isinstance(info, dict) or not isinstance(info.get("kernels"), list):
        raise ArtifactError(f"{where} has no 'vulkan' dispatch table in its metadata; it was "
                            "not built for target 'vulkan' by a compatible tensorsmith: "
                            "re-export it")
    version = info.get("version")
    if not isinstance(version, int) or version > METADATA_VERSION:
        raise ArtifactError(f"{where} has vulkan metadata version {version!r} and this "
                            f"tensorsmith-runtime reads up to {METADATA_VERSION}; upgrade "
                            "tensorsmith-runtime")
    buffers = []
    for i, b in enumerate(plan.buffers):
        if b.kind not in ("param", "workspace"):
            raise bad(f"buffer {i} is {b.to_json()!r}")
        buffers.append(b)
    kernels = {}
    for k in info["kernels"]:
        if not isinstance(k, dict) or not isinstance(k.get("dispatches"), list):
            raise bad(f"vulkan kernel entry {k!r}")
        kernels[k.get("name")] = k["dispatches"]
    steps = []
    for s in plan.steps:
        kernel, args = s.kernel, s.args
        if kernel not in kernels:
            raise bad(f"step kernel {kernel!r} has no entry in the vulkan dispatch table")
        if not all(_index(a, len(buffers)) for a in args):
            raise bad(f"step {kernel!r} has arguments {list(args)!r} for {len(buffers)} "
                      "buffers")
        dispatches = tuple(_dispatch(d, len(args), bad, bool(plan.symbols))
                           for d in kernels[kernel])
        steps.append(StepSpec(s.label, kernel, args, dispatches))
    inputs = [_io(io, buffers, "input", bad) for io in plan.inputs]
    outputs = [_io(io, buffers, "output", bad) for io in plan.outputs]
    features = info.get("features", [])
    if not isinstance(features, list):
        raise bad(f"vulkan features {features!r}")
    matrices = info.get("cooperative_matrix")
    if matrices is not None and not (isinstance(matrices, dict)
                                     and isinstance(matrices.get("shapes"), list)
                                     and isinstance(matrices.get("subgroup_size"), int)):
        raise bad(f"vulkan cooperative_matrix {matrices!r}")
    held = info.get("workgroup_matrix")
    if held is not None and not (isinstance(held, dict) and isinstance(held.get("shapes"), list)
                                 and all(_held_shape(s) for s in held["shapes"])):
        raise bad(f"vulkan workgroup_matrix {held!r}")
    parsed = VulkanPlan(buffers, steps, inputs, outputs, [str(f) for f in features],
                        plan.workspace_bytes, plan.params_bytes, run_checks(artifact.path, plan),
                        matrices, held)
    check(artifact, parsed)
    return parsed


def check(artifact: Artifact, plan: VulkanPlan) -> None:
    """The shared GPU plan check, each dispatch against what its SPIR-V module declares."""
    declared: dict[str, Declared] = {}
    steps = []
    for s in plan.steps:
        dispatches = []
        for d in s.dispatches:
            if d.section not in declared:
                code = artifact.section(d.section)
                if not is_spirv(code):
                    raise ArtifactError(f"artifact '{artifact.path}': section {d.section!r} "
                                        "is not a SPIR-V module")
                declared[d.section] = declarations(code)
            dispatches.append(GpuDispatch(d.name, d.grid, d.workgroup, d.bindings,
                                          declared[d.section]))
        steps.append(GpuStep(s.name, s.args, tuple(dispatches)))
    has_params = PARAMS_SECTION in artifact.section_names()
    check_plan(artifact.path, artifact.plan.buffers, steps,
               params_bytes=artifact.section_length(PARAMS_SECTION) if has_params else 0,
               workspace_bytes=plan.workspace_bytes, max_grid=MAX_GRID)


def is_spirv(code: bytes) -> bool:
    """Whether ``code`` starts like a SPIR-V module (whole words, its magic number, a
    header)."""
    return len(code) % 4 == 0 and len(code) >= 20 and code[:4] == b"\x03\x02\x23\x07"


def declarations(module: bytes) -> Declared:
    """A SPIR-V module's LocalSize and Binding numbers, read from its instructions
    (OpExecutionMode 16 with mode LocalSize 17; OpDecorate 71 with Binding 33)."""
    words = struct.unpack(f"<{len(module) // 4}I", module)
    size: tuple[int, int, int] | None = None
    bindings: set[int] = set()
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        ops = words[i + 1:i + count]
        if opcode == 16 and len(ops) >= 5 and ops[1] == 17:
            size = (ops[2], ops[3], ops[4])
        elif opcode == 71 and len(ops) >= 3 and ops[1] == 33:
            bindings.add(ops[2])
        i += max(count, 1)
    return Declared(size, frozenset(bindings))


def _dispatch(d: Any, nargs: int, bad: Any, symbolic: bool) -> DispatchSpec:
    grid, wg = _triple(d.get("grid"), symbolic), _triple(d.get("workgroup_size"))
    names = all(isinstance(d.get(k), str) for k in ("name", "section", "entry_point"))
    bindings = d.get("bindings")
    pairs: list[tuple[int, int]] = []
    for b in bindings if isinstance(bindings, list) else []:
        n, p = (b.get("binding"), b.get("param")) if isinstance(b, dict) else (None, None)
        if isinstance(n, int) and n >= 0 and _index(p, nargs):
            pairs.append((n, p))
    ok = names and isinstance(bindings, list) and len(pairs) == len(bindings)
    if grid is None or wg is None or not ok:
        raise bad(f"dispatch {d!r}")
    return DispatchSpec(d["name"], d["section"], d["entry_point"], grid, wg, tuple(pairs))


def _io(io: Tensor, buffers: list[Buffer], kind: str, bad: Any) -> IOSpec:
    if not _index(io.buffer, len(buffers)):
        raise bad(f"{kind} {io.to_json()!r}")
    if io.is_symbolic:  # its shape and bytes per run (shapes.Binder); none at load
        return IOSpec(TensorSpec(io.name, io.dtype, io.shape, 0), io.buffer)  # type: ignore[arg-type]
    spec = TensorSpec(io.name, io.dtype, io.shape, buffers[io.buffer].nbytes)  # type: ignore[arg-type]
    return IOSpec(spec, io.buffer)


def _index(value: Any, count: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count


def _triple(value: Any, sizes: bool = False) -> Any:
    """Three counts (ints >= 0; with ``sizes``, also size expressions), or None."""
    ok = isinstance(value, list) and len(value) == 3
    if not ok or not all((isinstance(v, int) and v >= 0) or (sizes and _is_size(v))
                         for v in value):
        return None
    return (value[0], value[1], value[2])


def _is_size(text: Any) -> bool:
    try:
        size_expr(text)
    except (ValueError, SyntaxError, TypeError):
        return False
    return True


def held_shape(text: str) -> tuple[int, int, int, int, str, str] | None:
    """``"128x256x32/256 float16*float16+float32"`` as (m, n, k, invocations, input type,
    accumulator type), or None where it is not that."""
    try:
        dims, types = text.split(" ")
        block, invocations = dims.split("/")
        m, n, k = (int(d) for d in block.split("x"))
        inputs, c = types.split("+")
        a, b = inputs.split("*")
        return (m, n, k, int(invocations), a, c) if a == b else None
    except ValueError:
        return None


def _held_shape(text: object) -> bool:
    return isinstance(text, str) and held_shape(text) is not None
