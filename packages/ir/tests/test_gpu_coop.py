"""float16 matrix products on cooperative matrices (schedules/gpu_coop.py,
te/matrix_lower.py): which products the rule takes, the tensor IR it lowers to, and its
results run by the tensor-IR interpreter (which models the workgroup's barriers and
shared memory, and each subgroup's fragments as whole matrices) against NumPy; the same
for matrices a whole workgroup holds (``-workgroup-matrix``, at the end)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.schedules import KnobConflict, rule_knobs, schedule_gpu
from tensorsmith.ir.target import GpuResources, MatrixShape, WorkgroupMatrix
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.expr import call
from tensorsmith.ir.te.matrix import FragmentMulAdd, FragmentStore
from tensorsmith.ir.te.visit import walk_stmts

COOP = GpuResources((MatrixShape(16, 16, 16),), subgroup_size=32, shared_bytes=49152)
#: An NVIDIA GPU's workgroups: up to 1024 invocations (``-max-invocations=1024``).
WIDE = GpuResources((MatrixShape(16, 16, 16),), subgroup_size=32, shared_bytes=49152,
                    max_invocations=1024)
rng = np.random.default_rng(11)


def knobs(**answers: Any) -> Callable[..., Any]:
    return lambda st, knob, default, choices=(): answers.get(knob, default)


def matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str = "float16",
           bias: bool = False) -> tuple[list[te.Tensor], list[te.Tensor]]:
    op = get_op("matmul")
    inputs = [te.placeholder(s, dtype, f"in{i}") for i, s in enumerate((a_shape, b_shape))]
    out = op.infer([TensorType(a_shape, dtype), TensorType(b_shape, dtype)], {})
    (c,) = op.compute(inputs, {}, out, "t0")  # type: ignore[misc]
    if bias:
        n = b_shape[-1]
        v = te.placeholder((n,), dtype, "in2")
        inputs.append(v)
        c = te.compute(c.shape, lambda *i: call("tanh", c[i] + v[i[-1]]), name="t1")
    return inputs, [c]


def lowered(inputs: list[te.Tensor], outputs: list[te.Tensor],
            resources: GpuResources = COOP, **answers: Any) -> tuple[te.PrimFunc, te.Schedule]:
    s = schedule_gpu(outputs, resources=resources, choose=knobs(**answers))
    return te.lower(s, inputs, outputs), s


def run(a_shape: tuple[int, ...], b_shape: tuple[int, ...], bias: bool = False,
        resources: GpuResources = COOP, **answers: Any) -> te.PrimFunc:
    """Lower, interpret and compare with NumPy (float32 sums of the float16 inputs)."""
    inputs, outputs = matmul(a_shape, b_shape, bias=bias)
    func, s = lowered(inputs, outputs, resources, **answers)
    assert any(st.tensorized for st in s.stages), "not tensorized"
    arrays = [rng.standard_normal(t.shape).astype("float16") for t in inputs]
    bufs = [*arrays, *(np.zeros(b.shape, b.dtype) for b in func.params[len(arrays):])]
    run_func(func, bufs)
    want = np.matmul(arrays[0].astype("float32"), arrays[1].astype("float32"))
    if bias:
        want = np.tanh(want + arrays[2].astype("float32"))
    np.testing.assert_allclose(bufs[len(arrays)].astype("float32"), want, rtol=2e-3,
                               atol=1e-2)
    return func


def test_product_lowers_to_fragment_statements() -> None:
    inputs, outputs = matmul((32, 32), (32, 32))
    func, _ = lowered(inputs, outputs, warps_m=1, warps_n=1, frags_m=2, frags_n=2, kt=16)
    text = str(func)
    for line in [
        "for blockIdx.y by in 0..1:",
        "for blockIdx.x bx in 0..1:",
        "for threadIdx.x t in 0..32:",
        # 16-byte words: 2 steps x 32 rows x (16 + 8) / 8, 2 steps x 16 rows x (32 + 8) / 8
        "alloc t0.A_shared: uint32x4[192] shared",
        "alloc t0.B_shared: uint32x4[160] shared",
        # a chunk is one word of a tile row (3 words a row of A, 5 of B)
        "store_chunk(t0.A_shared[((((t + (r * 32)) // 2) * 3) + ((t + (r * 32)) % 2))]) = "
        "t0.chunks[r]",
        "alloc t0.acc: fragment<accumulator, float32, 16x16>[4]",
        "alloc t0.a: fragment<a, float16, 16x16>[2]",
        "alloc t0.b: fragment<b, float16, 16x16>[2]",
        "fill t0.acc[f] = 0.0",
        "for ko in 0..2:",
        "t0.acc[((fi * 2) + fj)] += t0.a[fi] @ t0.b[fj]",
        "barrier",
    ]:
        assert line in text, line
    # the block divides C and the only epilogue is the cast: fragments go straight out
    stores = [s for s in walk_stmts(func.body) if isinstance(s, FragmentStore)]
    assert [s.dst.name for s in stores] == ["t0_cast"]
    assert "store_matrix(t0_cast[" in text and "C_shared" not in text


def test_default_tile_of_a_large_product() -> None:
    inputs, outputs = matmul((4096, 4096), (4096, 4096))
    func, s = lowered(inputs, outputs)
    assert s.steps[0].kind == "tensorize"
    params = s.steps[0].args[1]
    assert (params["warps_m"], params["warps_n"], params["frags_m"], params["frags_n"],
            params["kt"], params["preload"], params["prefetch"], params["raster"]
            ) == (2, 4, 4, 4, 16, 1, 2, 8)
    muladds = [x for x in walk_stmts(func.body) if isinstance(x, FragmentMulAdd)]
    assert len(muladds) == 2  # in unrolled loops, 4 x 4 per step: one per fragment set
    text = str(func)
    assert "for threadIdx.x t in 0..256:" in text
    assert "for blockIdx.y by in 0..32:" in text and "for blockIdx.x bx in 0..16:" in text
    assert "C_shared" not in text  # the fast path: no scratch, no guards


@pytest.mark.parametrize(("a", "b", "answers"), [
    ((32, 48), (48, 32), {}),
    ((40, 24), (24, 56), {}),  # no tile divides: guarded write-back
    ((2, 40, 24), (24, 56), {}),  # batched, B shared by the batch
    ((3, 20, 32), (3, 32, 16), {}),  # batched on both sides
    ((70, 40), (40, 72), {"warps_m": 2, "warps_n": 1, "frags_m": 1, "frags_n": 2,
                          "kt": 32}),  # two subgroups, K not a multiple of the step
    ((64, 64), (64, 64), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1,
                          "kt": 16}),
    # the default block of large products (the 4096^3 one), whole and over the edge
    ((128, 64), (64, 128), {"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 2,
                            "kt": 32}),
    ((136, 48), (48, 136), {"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 2,
                            "kt": 32}),
    ((2, 128, 32), (32, 256), {"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 4,
                               "kt": 16}),
    # shared tiles of float16 elements instead of 16-byte words
    ((136, 48), (48, 136), {"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 2,
                            "kt": 32, "tile_lanes": 1}),
    ((40, 24), (24, 56), {"tile_lanes": 1}),
    # two steps prefetched: an even and an odd step count (one step of zero tiles),
    # over the edge of M, N and K
    ((64, 64), (64, 64), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1,
                          "kt": 16, "prefetch": 2}),
    ((70, 40), (40, 72), {"warps_m": 2, "warps_n": 1, "frags_m": 1, "frags_n": 2,
                          "kt": 16, "prefetch": 2}),
    ((2, 40, 88), (88, 56), {"prefetch": 2}),
    # the registers stored after the first of two sub-steps, with one and two steps ahead
    ((64, 96), (96, 64), {"warps_m": 2, "warps_n": 2, "frags_m": 1, "frags_n": 1,
                          "kt": 32, "stash_after": 1}),
    ((40, 80), (80, 56), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1,
                          "kt": 32, "stash_after": 1, "prefetch": 2}),
    # workgroups in groups of 2 and 4 block rows (a permutation of the blocks), guarded
    # write-back included; wider row padding
    ((128, 32), (32, 96), {"warps_m": 1, "warps_n": 1, "frags_m": 2, "frags_n": 2,
                           "kt": 16, "raster": 4}),
    ((2, 64, 32), (32, 40), {"warps_m": 1, "warps_n": 1, "frags_m": 1, "frags_n": 1,
                             "kt": 16, "raster": 2, "pad": 24}),
    ((64, 64), (64, 64), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1,
                          "kt": 32, "pad": 16, "raster": 2, "prefetch": 2,
                          "stash_after": 1}),
    # fragments loaded a step ahead: even and odd step counts, one and two steps
    # prefetched, over the edges, batched
    ((64, 64), (64, 64), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1,
                          "kt": 16, "preload": 1}),
    ((70, 40), (40, 72), {"warps_m": 2, "warps_n": 1, "frags_m": 1, "frags_n": 2,
                          "kt": 16, "preload": 1}),
    ((70, 56), (56, 72), {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 2,
                          "kt": 16, "preload": 1, "prefetch": 2}),
    ((2, 64, 48), (48, 64), {"warps_m": 2, "warps_n": 1, "frags_m": 1, "frags_n": 2,
                             "kt": 16, "preload": 1, "prefetch": 2, "raster": 2}),
    ((40, 16), (16, 56), {"preload": 1, "prefetch": 2}),  # a single step
    # bench/gpu_coop.py's blocks with their knobs: the default's with all of them (2 x 2
    # blocks, 3 steps), the step of 32 stored after its first sub-step
    ((512, 48), (48, 256), {"warps_m": 4, "warps_n": 2, "frags_m": 4, "frags_n": 4,
                            "kt": 16, "preload": 1, "prefetch": 2, "raster": 2}),
    ((256, 96), (96, 256), {"warps_m": 2, "warps_n": 2, "frags_m": 4, "frags_n": 4,
                            "kt": 32, "stash_after": 1, "raster": 2}),
])
def test_results_match_numpy(a: tuple[int, ...], b: tuple[int, ...],
                             answers: dict[str, int]) -> None:
    run(a, b, **answers)


#: Two subgroups, 2 x 1 fragments each: blocks of 32 x 16 (or 16 x 32), steps of 16.
_TWO = {"warps_m": 1, "warps_n": 2, "frags_m": 2, "frags_n": 1, "kt": 16}


@pytest.mark.parametrize(("a", "b", "answers"), [
    # B's fragments from global memory: one step prefetched (4 steps), two (3 steps: a
    # step of zeros), preloaded (the step after the last filled with zeros), batched
    ((64, 64), (64, 64), {**_TWO, "b_global": 1}),
    ((64, 48), (48, 64), {**_TWO, "b_global": 1, "prefetch": 2}),
    ((2, 64, 48), (48, 64), {**_TWO, "b_global": 1, "preload": 1, "raster": 2}),
    ((3, 32, 32), (3, 32, 32), {**_TWO, "b_global": 1, "preload": 1, "prefetch": 2}),
    # two sub-steps a step, the registers stored after the first
    ((32, 96), (96, 64), {**_TWO, "kt": 32, "stash_after": 1, "b_global": 1}),
    # A's: the same, and both (nothing staged: no shared tiles)
    ((64, 64), (64, 64), {**_TWO, "a_global": 1}),
    ((2, 64, 48), (48, 64), {**_TWO, "a_global": 1, "preload": 1, "prefetch": 2}),
    ((32, 48), (48, 64), {**_TWO, "a_global": 1, "b_global": 1, "preload": 1}),
    # a fused epilogue through the scratch, the block dividing C
    ((64, 64), (64, 64), {**_TWO, "b_global": 1, "preload": 1, "bias": True}),
])
def test_fragments_from_global_memory(a: tuple[int, ...], b: tuple[int, ...],
                                      answers: dict[str, int]) -> None:
    func = run(a, b, **answers)
    text = str(func)
    for operand in "AB":
        staged = f"{operand}_shared" in text
        assert staged == (not answers.get(f"{operand.lower()}_global")), operand
    if answers.get("a_global"):
        assert "load_matrix(in0[" in text
    if answers.get("b_global"):
        assert "load_matrix(in1[" in text


@pytest.mark.parametrize(("a", "b", "answers"), [
    # 32 chunks of A a step among 64 invocations, over the edge of M and N
    ((40, 48), (48, 72), {"warps_m": 1, "warps_n": 2, "frags_m": 1, "frags_n": 1,
                          "kt": 16}),
    # 32 chunks of B among 64, two steps prefetched, preloaded (odd step count)
    ((64, 48), (48, 16), {"warps_m": 2, "warps_n": 1, "frags_m": 1, "frags_n": 1,
                          "kt": 16, "prefetch": 2, "preload": 1}),
])
def test_chunks_fewer_than_invocations(a: tuple[int, ...], b: tuple[int, ...],
                                       answers: dict[str, int]) -> None:
    text = str(run(a, b, **answers))
    assert "if ((t + (r * 64)) < 32):" in text  # the idle invocations store nothing


def _a_store_banks(**answers: Any) -> list[int]:
    """Per quarter subgroup (8 invocations: what shared memory serves at once for
    16-byte stores) of the first round of A's chunk stores in the default block (pad 8,
    kt 16), the most stores that fall in one bank (16-byte word index modulo 8)."""
    from tensorsmith.ir.te.evaluate import _Interp
    from tensorsmith.ir.te.matrix import ChunkStore
    from tensorsmith.ir.te.visit import free_vars

    inputs, outputs = matmul((256, 64), (64, 256))
    func, _ = lowered(inputs, outputs, warps_m=2, warps_n=4, frags_m=4, frags_n=4, kt=16,
                      **answers)
    store = next(x for x in walk_stmts(func.body)
                 if isinstance(x, ChunkStore) and x.dst.name.endswith("A_shared"))
    names = {v.name: v for v in free_vars(store.index)}
    assert set(names) == {"t", "r"}
    words = [int(_Interp({}, {id(names["t"]): t, id(names["r"]): 0}, None).expr(
        store.index)) for t in range(256)]  # type: ignore[call-overload]
    return [max(np.bincount(np.array(words[q:q + 8]) % 8)) for q in range(0, 256, 8)]


def test_interleaved_a_chunks_avoid_bank_conflicts() -> None:
    assert set(_a_store_banks()) == {2}  # in row order: rows r and r + 3 share a bank
    assert set(_a_store_banks(a_interleave=1)) == {1}
    run((136, 48), (48, 136), **{"warps_m": 2, "warps_n": 4, "frags_m": 4, "frags_n": 2,
                                 "kt": 16, "a_interleave": 1, "preload": 1})
    run((2, 64, 48), (48, 64), **_TWO, a_interleave=1, pad=24, prefetch=2)
    inputs, outputs = matmul((64, 64), (64, 64))
    with pytest.raises(KnobConflict):  # two chunks a row of A: a step of 16
        lowered(inputs, outputs, kt=32, a_interleave=1)


def test_workgroups_of_512_invocations() -> None:
    """4 x 4 subgroups of 4 x 4 fragments (a 256 x 256 block) where the target allows
    1024 invocations; the write-back needs no scratch, so the tiles may take the rest
    of the workgroup memory. Refused at 256 invocations."""
    w4x4 = {"warps_m": 4, "warps_n": 4, "frags_m": 4, "frags_n": 4, "kt": 16}
    func = run((256, 32), (32, 256), resources=WIDE, **w4x4, preload=1, prefetch=2)
    text = str(func)
    assert "for threadIdx.x t in 0..512:" in text and "C_shared" not in text
    run((256, 48), (48, 256), resources=WIDE, **w4x4, b_global=1)
    # 4 x 4 subgroups of 2 x 4 fragments: 256 chunks of A a step among 512 invocations
    run((128, 48), (48, 256), resources=WIDE, **{**w4x4, "frags_m": 2}, preload=1,
        prefetch=2)
    inputs, outputs = matmul((256, 256), (256, 256))
    with pytest.raises(KnobConflict):
        lowered(inputs, outputs, COOP, **w4x4)
    # with an epilogue the scratch (16 KiB for 16 subgroups) does not fit next to them
    inputs, outputs = matmul((256, 256), (256, 256), bias=True)
    with pytest.raises(KnobConflict):
        lowered(inputs, outputs, WIDE, **w4x4)


def test_epilogue_runs_at_the_write_back() -> None:
    func = run((48, 32), (32, 40), bias=True)
    text = str(func)
    assert "C_shared" in text and "tanh(" in text  # through the scratch, epilogue applied
    assert "store_matrix(t0.C_shared[" in text


def test_fallbacks_keep_the_tiled_rule() -> None:
    def tensorized(inputs: list[te.Tensor], outputs: list[te.Tensor],
                   resources: GpuResources = COOP) -> bool:
        _, s = lowered(inputs, outputs, resources)
        return any(st.tensorized for st in s.stages)

    assert tensorized(*matmul((64, 64), (64, 64)))
    assert not tensorized(*matmul((64, 64), (64, 64)), GpuResources())  # plain vulkan
    assert not tensorized(*matmul((64, 64), (64, 64), "float32"))
    assert not tensorized(*matmul((64, 60), (60, 64)))  # K not a multiple of 8
    assert not tensorized(*matmul((64, 64), (64, 36)))  # N not a multiple of 8
    other = GpuResources((MatrixShape(16, 16, 16, "float16", "float16", "float16"),))
    assert not tensorized(*matmul((64, 64), (64, 64)), other)  # no float32 accumulator


def test_knobs_are_the_tuners_space() -> None:
    inputs, outputs = matmul((256, 256), (256, 256))

    def schedule(outs: list[te.Tensor], constants: frozenset[str] = frozenset(),
                 choose: Any = None, start: Any = None) -> te.Schedule:
        return schedule_gpu(outs, choose=choose, resources=COOP)

    found = rule_knobs(schedule, outputs)["t0"]
    assert set(found) == {"warps_m", "warps_n", "frags_m", "frags_n", "kt", "tile_lanes",
                          "pad", "prefetch", "stash_after", "raster", "preload", "a_global",
                          "b_global", "a_interleave"}
    with pytest.raises(KnobConflict):  # 4 x 4 subgroups of 4 x 4: 512 invocations
        lowered(inputs, outputs, warps_m=4, warps_n=4, frags_m=4, frags_n=4)
    with pytest.raises(KnobConflict):  # 256 rows in blocks of 32: 8 block rows, not 3k
        lowered(inputs, outputs, warps_m=1, warps_n=1, frags_m=2, frags_n=2, raster=3)
    with pytest.raises(KnobConflict):  # a step of 16 has one sub-step
        lowered(inputs, outputs, kt=16, stash_after=2)
    with pytest.raises(KnobConflict):  # fragments a step ahead: one sub-step a step
        lowered(inputs, outputs, kt=32, preload=1)
    edge = matmul((256, 200), (200, 256))
    with pytest.raises(KnobConflict):  # from global memory: K=200 has an edge at kt 16
        lowered(*edge, b_global=1)
    with pytest.raises(KnobConflict):
        lowered(*edge, a_global=1)


def test_tensorize_checks_its_stage() -> None:
    _, outputs = matmul((64, 64), (64, 64), "float32")
    s = te.Schedule(outputs)
    params = {"m": 16, "n": 16, "k": 16, "warps_m": 1, "warps_n": 1, "frags_m": 1,
              "frags_n": 1, "kt": 16, "subgroup": 32, "pad": 8, "tile_lanes": 8}
    with pytest.raises(ValueError, match="operands are float32 and float32, not float16"):
        s.tensorize("t0", "matrix_product", params)
    _, outputs = matmul((64, 64), (64, 64))
    s = te.Schedule(outputs)
    with pytest.raises(ValueError, match="unknown intrinsic 'wmma'"):
        s.tensorize("t0", "wmma", params)
    with pytest.raises(ValueError, match="kt=24 must be a multiple of k=16"):
        s.tensorize("t0", "matrix_product", {**params, "kt": 24})
    with pytest.raises(ValueError, match=r"tile_lanes=4 is not one of \(8, 1\)"):
        s.tensorize("t0", "matrix_product", {**params, "tile_lanes": 4})
    with pytest.raises(ValueError, match=r"prefetch=3 is not one of \(1, 2\)"):
        s.tensorize("t0", "matrix_product", {**params, "prefetch": 3})
    with pytest.raises(ValueError, match="stash_after=2 exceeds the 1 sub-steps"):
        s.tensorize("t0", "matrix_product", {**params, "stash_after": 2})
    with pytest.raises(ValueError, match="raster=3 does not divide the 4 block rows of M=64"):
        s.tensorize("t0", "matrix_product", {**params, "raster": 3})
    with pytest.raises(ValueError, match="preload=1 must be 0 or 1, and 1 needs a step of "
                       "one sub-step"):
        s.tensorize("t0", "matrix_product", {**params, "kt": 32, "preload": 1})
    with pytest.raises(ValueError, match=r"parameters \['raster'\] must be positive ints"):
        s.tensorize("t0", "matrix_product", {**params, "raster": 0})
    s = te.Schedule(matmul((64, 40), (40, 64))[1])
    with pytest.raises(ValueError, match=r"b_global=1 must be 0 or 1, and 1 needs blocks that "
                       r"divide the operand \(K=40 is not a multiple of 16\)"):
        s.tensorize("t0", "matrix_product", {**params, "b_global": 1})


# ---- matrices a whole workgroup holds (-workgroup-matrix, VK_NV_cooperative_matrix2) ----
# One workgroup-held fragment a block, both operands read from global memory, no shared
# tiles and no barriers (the driver stages them).

#: An H100's workgroup-held blocks (at 128 and 256 invocations; the probe lists 32 and
#: 64 too), and workgroups of 32 invocations, which keep the interpreter quick.
WG128 = WorkgroupMatrix(32, 16, 16, 128, 1024)
WG256 = WorkgroupMatrix(32, 32, 16, 256, 1024)
HELD = GpuResources((MatrixShape(16, 16, 16),), subgroup_size=32, shared_bytes=49152,
                    max_invocations=1024,
                    workgroup_matrices=(WorkgroupMatrix(16, 16, 16, 32, 256), WG128, WG256))
#: A block asked of the knobs, in workgroups of 32.
SMALL = {"workgroup": 1, "wg_invocations": 32, "raster": 1}


def test_block_lowers_to_one_workgroup_fragment() -> None:
    inputs, outputs = matmul((64, 64), (64, 128))
    func, s = lowered(inputs, outputs, HELD, **SMALL, wg_rows=32, wg_cols=64, wg_k=32)
    params = s.steps[0].args[1]
    assert (params["workgroup"], params["subgroup"], params["a_global"],
            params["b_global"]) == (1, 32, 1, 1)
    text = str(func)
    for line in [
        "for blockIdx.y by in 0..2:",
        "for blockIdx.x bx in 0..2:",
        "for threadIdx.x t in 0..32:",
        "alloc t0.acc: fragment<accumulator, float32, 32x64, workgroup>[1]",
        "alloc t0.a: fragment<a, float16, 32x32, workgroup>[1]",
        "alloc t0.b: fragment<b, float16, 32x64, workgroup>[1]",
        "for ko in 0..2:",
        "t0.acc[(fi + fj)] += t0.a[fi] @ t0.b[fj]",
    ]:
        assert line in text, line
    # straight from global memory, rows 16-byte aligned; the driver stages them
    assert "load_matrix(in0[" in text and "stride=64, align=16)" in text
    assert "load_matrix(in1[" in text and "stride=128, align=16)" in text
    assert "barrier" not in text and "_shared" not in text


@pytest.mark.parametrize(("a", "b", "answers"), [
    ((64, 64), (64, 128), {"wg_rows": 32, "wg_cols": 64, "wg_k": 32}),
    ((64, 48), (48, 64), {"wg_rows": 16, "wg_cols": 32, "wg_k": 16, "raster": 2}),
    ((2, 64, 64), (64, 64), {"wg_rows": 32, "wg_cols": 16, "wg_k": 64}),
    # each step's operands requested before the previous step's product (3 steps: the
    # step after the last is zeros)
    ((64, 96), (96, 64), {"wg_rows": 32, "wg_cols": 32, "wg_k": 32, "preload": 1}),
])
def test_workgroup_held_results_match_numpy(a: tuple[int, ...], b: tuple[int, ...],
                                            answers: dict[str, int]) -> None:
    text = str(run(a, b, resources=HELD, **{**SMALL, **answers}))
    assert ", workgroup>" in text


def test_rule_takes_workgroup_blocks_that_fill_the_gpu() -> None:
    def params(inputs: list[te.Tensor], outputs: list[te.Tensor],
               resources: GpuResources = HELD, **answers: int) -> dict[str, int] | None:
        _, s = lowered(inputs, outputs, resources, **answers)
        steps = [st for st in s.steps if st.kind == "tensorize"]
        return steps[0].args[1] if steps else None

    big = params(*matmul((4096, 4096), (4096, 4096)))
    assert big is not None and (big["m"], big["n"], big["k"], big["kt"], big["subgroup"],
                                big["raster"], big["workgroup"]) == (128, 256, 64, 128, 256, 8, 1)
    # 128 x 128 blocks of 128 invocations where 128 x 256 ones leave too few workgroups
    mid = params(*matmul((2048, 1024), (1024, 1024)))
    assert mid is not None and (mid["m"], mid["n"], mid["subgroup"]) == (128, 128, 128)
    # no workgroup-held matrices on the target, the knob says no, an epilogue that needs
    # the scratch, a trip of 128 that does not divide K, or too few blocks: the subgroup
    # kernel (which the knob can still overrule)
    for p in (params(*matmul((4096, 4096), (4096, 4096)), COOP),
              params(*matmul((4096, 4096), (4096, 4096)), workgroup=0),
              params(*matmul((4096, 4096), (4096, 4096), bias=True)),
              params(*matmul((4096, 4160), (4160, 4096))),
              params(*matmul((256, 256), (256, 256)))):
        assert p is not None and not p.get("workgroup"), p
    forced = params(*matmul((256, 256), (256, 256)), workgroup=1)
    assert forced is not None and (forced["m"], forced["n"], forced["subgroup"]) == (32, 32, 256)


def test_workgroup_knobs_are_the_tuners_space() -> None:
    inputs, outputs = matmul((256, 256), (256, 256))

    def schedule(outs: list[te.Tensor], constants: frozenset[str] = frozenset(),
                 choose: object = None, start: object = None) -> te.Schedule:
        return schedule_gpu(outs, choose=choose, resources=HELD)

    found = rule_knobs(schedule, outputs)["t0"]
    assert found["workgroup"].default == 0 and found["workgroup"].choices == (1, 0)
    with pytest.raises(KnobConflict):  # 256 rows in blocks of 96: no
        lowered(inputs, outputs, HELD, **SMALL, wg_rows=96)
    with pytest.raises(KnobConflict):  # 16 rows: no multiple of a 32-row granularity
        lowered(inputs, outputs, HELD, workgroup=1, wg_rows=16, wg_invocations=256)
    with pytest.raises(KnobConflict):  # no entry for workgroups of 512
        lowered(inputs, outputs, HELD, workgroup=1, wg_invocations=512)
    with pytest.raises(KnobConflict):  # over the device's largest dimension
        lowered(inputs, outputs, GpuResources(
            HELD.matrix_shapes, 32, 49152,
            workgroup_matrices=(WorkgroupMatrix(16, 16, 16, 32, 64),)), **SMALL, wg_rows=128)


def test_tensorize_checks_workgroup_blocks() -> None:
    _, outputs = matmul((64, 64), (64, 64))
    s = te.Schedule(outputs)
    params = {"m": 32, "n": 32, "k": 32, "warps_m": 1, "warps_n": 1, "frags_m": 1,
              "frags_n": 1, "kt": 32, "subgroup": 32, "pad": 8, "tile_lanes": 8,
              "a_global": 1, "b_global": 1, "workgroup": 1}
    s.tensorize("t0", "matrix_product", params)
    te.Schedule(outputs).tensorize("t0", "matrix_product", {**params, "preload": 1})
    # two sub-steps a step: the loop over K unrolled by two
    te.Schedule(outputs).tensorize("t0", "matrix_product", {**params, "kt": 64})
    for wrong in ({"warps_m": 2}, {"b_global": 0}, {"prefetch": 2}):
        with pytest.raises(ValueError, match="workgroup=1 must be 0 or 1, and 1 needs one "
                           "subgroup of one fragment"):
            te.Schedule(outputs).tensorize("t0", "matrix_product", {**params, **wrong})
