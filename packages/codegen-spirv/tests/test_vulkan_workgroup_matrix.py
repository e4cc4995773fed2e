"""Matrices a whole workgroup holds (``vulkan -workgroup-matrix=16x16x16/256``, NVIDIA's
VK_NV_cooperative_matrix2): the target option, the SPIR-V 1.6 module with Workgroup-scope
matrices, the artifact's requirements, and what lavapipe (no such extension) does with
it: refuses it at load, naming the extension.

The kernel's tensor IR is run by the interpreter in
packages/ir/tests/test_gpu_coop_workgroup.py; it runs on a GPU in bench/gpu_coop.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_vulkan_coop import COOP, matmul_graph, new_enough_tools, opcodes

import tensorsmith.runtime as rt
from tensorsmith.codegen.spirv import describe_gpu
from tensorsmith.codegen.spirv.spec import OP, SCOPE_WORKGROUP, VERSION_1_6
from tensorsmith.codegen.spirv.tools import disassemble
from tensorsmith.ir import build
from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import Target, WorkgroupMatrix
from tensorsmith.runtime.errors import DeviceError

HELD = COOP + " -max-invocations=1024 -workgroup-matrix=32x32x16/256"


def test_target_option_describes_the_blocks() -> None:
    facts = describe_gpu(Target.parse(HELD))
    assert facts.workgroup_matrices == (WorkgroupMatrix(32, 32, 16, 256, 256),)
    two = describe_gpu(Target.parse("vulkan -workgroup-matrix=16x16x16/128,32x16x16/256 "
                                    "-workgroup-matrix-max=128"))
    assert two.workgroup_matrices[1] == WorkgroupMatrix(32, 16, 16, 256, 128)
    assert two.shared_bytes == 32768
    assert describe_gpu(Target.parse(COOP)).workgroup_matrices == ()
    with pytest.raises(TargetError, match="'16x16x16' is not MxNxK/invocations"):
        describe_gpu(Target.parse("vulkan -workgroup-matrix=16x16x16"))


def test_module_holds_matrices_in_the_workgroup() -> None:
    lib = build(matmul_graph(2048, 256, 4096), target=HELD)
    (module,) = lib.kernels.modules()
    assert module.version == VERSION_1_6 and module.binary[4:8] == b"\x00\x06\x01\x00"
    assert module.workgroup_matrix_shapes == ["128x256x64/256 float16*float16+float32"]
    assert module.matrix_shapes == [] and module.workgroup_size == (256, 1, 1)
    code = opcodes(module.binary)
    types = [ops for op, ops in code if op == OP["TypeCooperativeMatrixKHR"]]
    scopes = {dict((ops[1], ops[2]) for op, ops in code if op == OP["Constant"])[t[2]]
              for t in types}
    assert scopes == {SCOPE_WORKGROUP}
    # SPIR-V 1.4+: the entry point lists every global variable, the buffers included
    (entry,) = [ops for op, ops in code if op == OP["EntryPoint"]]
    variables = [ops[1] for op, ops in code if op == OP["Variable"] and ops[2] != 7]
    assert set(variables) <= set(entry)
    meta = lib.kernels.metadata()
    assert (meta["spirv_version"], meta["vulkan_version"]) == ("1.6", "1.3")
    assert meta["workgroup_matrix"] == {"shapes": ["128x256x64/256 float16*float16+float32"]}
    assert {"cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions"} <= set(
        meta["features"])


def test_spirv_val_accepts_the_kernel() -> None:
    new_enough_tools()
    lib = build(matmul_graph(4096, 4096, 4096), target=HELD)
    lib.kernels.validate()  # with --target-env vulkan1.3, as SPIR-V 1.6 needs
    text = disassemble(lib.kernels.modules()[0].binary)
    assert text is not None
    for line in ['OpExtension "SPV_NV_cooperative_matrix2"',
                 "OpExecutionMode %tsm_kernel_0_d0 LocalSize 256 1 1",
                 # scope Workgroup (2), a 128 x 64 A, a 64 x 256 B, a 128 x 256 accumulator
                 "OpTypeCooperativeMatrixKHR %half %uint_2 %uint_128 %uint_64 %uint_0",
                 "OpTypeCooperativeMatrixKHR %half %uint_2 %uint_64 %uint_256 %uint_1",
                 "OpTypeCooperativeMatrixKHR %float %uint_2 %uint_128 %uint_256 %uint_2"]:
        assert line in text, line
    assert "OpControlBarrier" not in text  # nothing staged by the kernel
    assert text.count("OpCooperativeMatrixMulAddKHR") == 2  # two steps of 64 a trip


def test_artifact_is_refused_without_the_extension(tmp_path: Path) -> None:
    lib = build(matmul_graph(2048, 256, 4096), target=HELD)
    lib.export_library(tmp_path / "held.tsm")
    manifest = json.loads(lib.export_spirv(tmp_path / "spv").read_text())
    needs = manifest["requirements"]
    assert (needs["spirv_version"], needs["vulkan_version"]) == ("1.6", "1.3")
    assert needs["workgroup_matrix"] == {"shapes": ["128x256x64/256 float16*float16+float32"]}
    assert "VK_NV_cooperative_matrix2" in needs["device_extensions_vulkan_1_1"]
    with pytest.raises(DeviceError, match=r"built for matrices a workgroup holds \(its "
                       r"kernels multiply 128x256x64/256 float16\*float16\+float32\), and "
                       r"device .* has no VK_NV_cooperative_matrix2 with workgroup scope; "
                       r"build it without -workgroup-matrix"):
        rt.load(tmp_path / "held.tsm", device="vulkan")
