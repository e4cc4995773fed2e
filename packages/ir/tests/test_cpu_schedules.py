"""The default CPU schedules of convolution and pooling, run by the tensor-IR interpreter
and compared with the ops' NumPy references: every shape rule (padding by rows,
depthwise, small images, strides) must keep the result exact."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.schedules import rule_knobs, schedule_cpu
from tensorsmith.ir.schedules.cpu_sizes import DEPTHWISE_SPARE_REGISTERS, register_tile
from tensorsmith.ir.target import BASELINE_CPU, CpuResources
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.expr import Binary, Call, Load, Select
from tensorsmith.ir.te.stmt import For, IfThenElse, Store
from tensorsmith.ir.te.visit import stmt_exprs, walk, walk_stmts

rng = np.random.default_rng(5)
AVX2 = BASELINE_CPU
AVX512 = CpuResources("avx512", vector_bits=512, vector_registers=32)
NEON = CpuResources("neon", vector_bits=128, vector_registers=32)


def lowered(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any],
            resources: CpuResources = AVX512, constants: frozenset[str] = frozenset()
            ) -> te.PrimFunc:
    opdef = get_op(op)
    inputs = [te.placeholder(s, "float32", f"in{i}") for i, s in enumerate(shapes)]
    out = opdef.infer([TensorType(s, "float32") for s in shapes], attrs)
    outputs = opdef.compute(inputs, attrs, out, "t0")  # type: ignore[misc]
    sched = schedule_cpu(outputs, resources=resources, constants=constants)
    return te.lower(sched, inputs, outputs)


def check(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any],
          resources: CpuResources = AVX512, constants: frozenset[str] = frozenset(),
          atol: float = 1e-5) -> te.PrimFunc:
    func = lowered(op, shapes, attrs, resources, constants)
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    stored = func.stored_inputs(arrays)
    bufs = [*stored] + [np.zeros(b.shape, b.dtype) for b in func.params[len(arrays):]]
    run_func(func, bufs)
    want = get_op(op).reference(arrays, attrs)[0]
    np.testing.assert_allclose(bufs[len(arrays)], want, rtol=1e-5, atol=atol)
    return func


def test_pad_stage_runs_by_rows_with_vector_columns() -> None:
    func = check("conv2d", [(1, 2, 5, 6), (3, 2, 3, 3)], {"pads": [1, 1, 1, 1]})
    pad_loops = [s for s in walk_stmts(func.body) if isinstance(s, For)
                 and s.var.name.startswith("t0_pad")]
    assert pad_loops[0].extent == 2 * 7  # channels x padded rows, fused
    assert any(s.kind == "vectorized" for s in pad_loops)


@pytest.mark.parametrize("attrs", [
    {"pads": [2, 1, 0, 1], "strides": [1, 1]},
    {"pads": [1, 1, 1, 1], "strides": [2, 2]},
])
def test_padded_conv(attrs: dict[str, Any]) -> None:
    check("conv2d", [(1, 3, 7, 9), (4, 3, 3, 3)], attrs)


def test_padded_max_pool() -> None:
    check("pool2d", [(1, 2, 7, 7)], {"mode": "max", "kernel": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1]})


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_reads_padding_in_place_on_small_images(stride: int) -> None:
    func = check("conv2d", [(1, 4, 9, 11), (4, 1, 3, 3)],
                 {"pads": [1, 1, 1, 1], "strides": [stride, stride], "groups": 4})
    assert any(p.name.endswith("_pad") for p in func.params) == (stride == 1)
    small = check("conv2d", [(1, 4, 7, 7), (4, 1, 3, 3)],
                  {"pads": [1, 1, 1, 1], "strides": [stride, stride], "groups": 4})
    assert not any(p.name.endswith("_pad") for p in small.params)  # no padded copy


@pytest.mark.parametrize("resources", [AVX2, AVX512])
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_tile_is_rows_of_one_channel(resources: CpuResources, stride: int) -> None:
    func = check("conv2d", [(1, 3, 30, 37), (3, 1, 3, 3)],
                 {"pads": [1, 1, 1, 1], "strides": [stride, stride], "groups": 3},
                 resources)
    tile = [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "unrolled"]
    rows, lanes = tile[0].extent, tile[0].body.extent  # type: ignore[attr-defined]
    assert lanes == resources.vector_bits // 32  # one register per row
    # the accumulators, the 9 weight broadcasts and the input vectors fit the registers
    assert rows + 9 + DEPTHWISE_SPARE_REGISTERS <= resources.vector_registers
    assert rows > 1


@pytest.mark.parametrize(("height", "rows"), [(14, 7), (28, 10), (56, 12)])
def test_depthwise_tiles_share_the_rows_evenly(height: int, rows: int) -> None:
    """A 5x5 depthwise tile may take 12 rows on AVX2; 14 rows are then two tiles of 7,
    not 12 and a clamped tile of 12 that keeps 2 (EfficientNet's 14x14 layers)."""
    func = check("conv2d", [(1, 2, height, 9), (2, 1, 5, 5)],
                 {"pads": [2, 2, 2, 2], "groups": 2}, AVX2)
    tile = [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "unrolled"]
    assert tile[0].extent == rows


@pytest.mark.parametrize(("op", "attrs"), [
    ("pool2d", {"kernel": [3, 3], "mode": "max", "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("conv2d", {"groups": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]})])
def test_tiles_that_read_no_padding_run_without_selects(op: str, attrs: dict[str, Any]
                                                        ) -> None:
    """Padding read in place: the register tiles whose reads all fall inside the image
    take a branch with plain loads (no select, no clamp); the border tiles keep them.
    Both are exact."""
    # (the convolution's image large enough that most of its tiles are interior)
    shapes = [(1, 3, 40, 37)] if op == "pool2d" else [(1, 3, 64, 70), (3, 1, 3, 3)]
    func = check(op, shapes, attrs, AVX2, frozenset({"in1"}))
    assert not any(p.name.endswith("_pad") for p in func.params)
    branches = [s for s in walk_stmts(func.body) if isinstance(s, IfThenElse)
                and s.otherwise is not None and _selects(s.otherwise) and not _selects(s.then)]
    assert branches, "no tile runs without the padding selects"
    loads = [e for b in branches for st in walk_stmts(b.then) if isinstance(st, Store)
             for e in walk(st.value) if isinstance(e, Load)]
    assert not any(isinstance(i, Binary) and i.op in ("min", "max")  # no clamp
                   for ld in loads for i in walk(ld.indices[0]))


@pytest.mark.parametrize(("channels", "size", "kernel", "inline"), [
    (96, 112, 3, True),     # MobileNetV2: 80% of the tiles read no padding
    (144, 56, 5, False)])   # EfficientNet's 5x5: a sixth of them do not
def test_strided_depthwise_reads_padding_in_place_where_most_tiles_are_interior(
        channels: int, size: int, kernel: int, inline: bool) -> None:
    attrs = {"pads": [kernel // 2] * 4, "strides": [2, 2], "groups": channels}
    shapes = [(1, channels, size, size), (channels, 1, kernel, kernel)]
    inputs = [te.placeholder(s, "float32", f"in{i}") for i, s in enumerate(shapes)]
    out = get_op("conv2d").infer([TensorType(s, "float32") for s in shapes], attrs)
    outputs = get_op("conv2d").compute(inputs, attrs, out, "t0")  # type: ignore[misc]
    sched = schedule_cpu(outputs, resources=AVX2, constants=frozenset({"in1"}))
    assert sched["t0_pad"].inline == inline


def _selects(stmt: Any) -> bool:
    return any(isinstance(e, Select) for st in walk_stmts(stmt) if isinstance(st, Store)
               for e in walk(st.value))


def test_dense_conv_keeps_padded_copy() -> None:
    func = check("conv2d", [(1, 4, 6, 6), (2, 4, 3, 3)], {"pads": [1, 1, 1, 1]})
    assert any(p.name.endswith("_pad") for p in func.params)


def test_small_image_vectorized_over_flattened_pixels() -> None:
    func = check("conv2d", [(1, 6, 5, 5), (8, 6, 3, 3)], {"pads": [1, 1, 1, 1]})
    vector = [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "vectorized"
              and s.var.name.startswith("t0_i2.t0_i3")]
    assert vector and vector[0].extent == 32  # 25 pixels, one 32-lane block


def test_small_image_with_far_rows_keeps_row_vectors() -> None:
    func = check("conv2d", [(1, 2, 14, 14), (3, 2, 3, 3)], {"pads": [1, 1, 1, 1],
                                                           "strides": [2, 2]})
    assert not any(isinstance(s, For) and s.var.name.startswith("t0_i2.t0_i3")
                   for s in walk_stmts(func.body))


def test_bias_add_after_a_batch_one_matmul_rides_the_write_back() -> None:
    """The bias add of ``[1, M, K] @ [K, N] + b`` reads the product at ``(0, i, j)`` (a
    broadcast of the size-1 batch axis folds to the constant 0): still its own index, so
    it is applied at the tile's write-back, without a scratch buffer and a second pass."""
    from tensorsmith.ir import GraphBuilder
    from tensorsmith.ir.build import fused_groups
    from tensorsmith.ir.lowering import group_compute

    b = GraphBuilder("dense")
    x = b.input("x", (1, 5, 8), "float32")
    w = b.constant("w", rng.standard_normal((8, 6)).astype("float32"))
    bias = b.constant("b", rng.standard_normal((6,)).astype("float32"))
    y = b.add1("add", [b.add1("matmul", [x, w], name="mm"), bias], name="bias")
    _, groups, _ = fused_groups(b.finish([y]))
    inputs, outputs = group_compute(groups[0])
    sched = schedule_cpu(outputs)
    assert sched[outputs[0].name].merged
    func = te.lower(sched, inputs, outputs)
    assert len(func.params) == 4  # x, w, b, output: no scratch for the product
    arrays = [rng.standard_normal((1, 5, 8)).astype("float32"),
              *(v.data for v in groups[0].inputs[1:])]
    bufs = [*arrays, np.zeros((1, 5, 6), "float32")]
    run_func(func, bufs)
    np.testing.assert_allclose(bufs[3], arrays[0] @ arrays[1] + arrays[2], rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("resources", [AVX2, AVX512, NEON], ids=lambda r: r.cpu)
@pytest.mark.parametrize(("cols", "rows"), [(768, 128), (50257, 32), (7, 512), (49, 64),
                                            (3, 1), (1000, 7)])
def test_register_tile_fits_the_register_file(resources: CpuResources, cols: int,
                                              rows: int) -> None:
    """Accumulators, one row of the other operand and a broadcast never exceed the
    vector registers: a tile that does spills every multiply-add to the stack."""
    vec, tile_rows = register_tile(resources, cols, rows)
    lanes = resources.lanes()
    per_row = -(-min(vec, cols) // lanes)
    assert vec % lanes == 0 and vec & (vec - 1) == 0  # whole registers, a power of two
    assert tile_rows * per_row + per_row + 1 <= resources.vector_registers
    assert 1 <= tile_rows <= rows


def test_register_tile_per_isa() -> None:
    """6 rows of 2 ymm on AVX2, 6 rows of 4 zmm on AVX-512 for a wide product."""
    assert register_tile(AVX2, 768, 128)[0] == 16
    assert register_tile(AVX512, 768, 128)[0] == 64
    assert register_tile(AVX2, 768, 120) == (16, 6)
    assert register_tile(AVX512, 768, 120) == (64, 6)


@pytest.mark.parametrize("resources", [AVX2, AVX512], ids=lambda r: r.cpu)
@pytest.mark.parametrize("n", [37, 64, 100])
def test_packed_panels_of_a_constant_rhs(resources: CpuResources, n: int) -> None:
    """A constant B[k, j] is stored as panels [ceil(N / vec), K, vec], the last one
    zero-padded when N is not a multiple of the vector block; the product is exact."""
    func = check("matmul", [(9, 20), (20, n)], {}, resources, frozenset({"in1"}))
    layouts = func.attrs.get("layouts", {})
    vec = register_tile(resources, n, 9)[0]
    if n > vec:
        assert layouts[1]["order"] == [1, 0, 2]
        assert func.params[1].shape == (-(-n // vec), 20, vec)
    else:
        assert not layouts  # one panel: B is stored as it is


def test_partial_vector_tile_is_unswitched() -> None:
    """A product whose columns are not a multiple of the vector block accumulates whole
    tiles with no lane mask: the reduction runs in two versions, picked per tile."""
    func = check("matmul", [(6, 30), (30, 40)], {}, AVX2)
    branches = [s for s in walk_stmts(func.body) if isinstance(s, IfThenElse)
                and s.otherwise is not None]
    assert branches
    func = check("matmul", [(6, 30), (30, 48)], {}, AVX2)
    assert not [s for s in walk_stmts(func.body) if isinstance(s, IfThenElse)]


def test_rules_ask_for_their_knobs() -> None:
    """Every free parameter of a rule is a knob with the rule's choice as its default,
    and answering a knob changes the schedule accordingly."""
    a, b = te.placeholder((64, 32), "float32", "in0"), te.placeholder((32, 96), "float32",
                                                                      "in1")
    (out,) = get_op("matmul").compute([a, b], {}, [TensorType((64, 96), "float32")], "t0")

    def schedule(outputs: list[te.Tensor], **kwargs: Any) -> te.Schedule:
        return schedule_cpu(outputs, resources=AVX2, **kwargs)

    knobs = rule_knobs(schedule, [out], frozenset({"in1"}))["t0"]
    assert knobs["vec"].default == 16 and knobs["rows"].default == 6
    assert knobs["pack"].default is True and knobs["pack"].choices == (False, True)
    assert 8 in knobs["vec"].choices and {"outer_order", "parallel"} <= set(knobs)
    eight = schedule_cpu([out], resources=AVX2,
                         choose=lambda st, knob, default, choices=(): 8 if knob == "vec"
                         else default)
    assert eight.steps[0].args == ("t0_i1", 8)


@pytest.mark.parametrize("resources", [AVX2, AVX512], ids=lambda r: r.cpu)
@pytest.mark.parametrize(("channels", "stride"), [(32, 1), (64, 2), (24, 1)])
def test_dense_conv_vectorizes_over_output_channels(resources: CpuResources, channels: int,
                                                    stride: int) -> None:
    """With constant weights, lanes run over whole blocks of output channels (weights
    stored [O/vec, C, KH, KW, vec]); 24 channels fill no 16-lane block, so AVX-512 keeps
    its lanes along the columns there. Either way the result is exact."""
    func = check("conv2d", [(1, 5, 9, 11), (channels, 5, 3, 3)],
                 {"pads": [1, 1, 1, 1], "strides": [stride, stride]}, resources,
                 frozenset({"in1"}))
    lanes = resources.lanes()
    layouts = func.attrs.get("layouts", {})
    if channels % lanes:
        assert not layouts
    else:
        vec = layouts[1]["block"][1]
        assert layouts[1]["order"] == [0, 2, 3, 4, 1] and channels % vec == 0
        assert vec % lanes == 0


@pytest.mark.parametrize(("resources", "size", "kernel", "lanes_over"), [
    (AVX2, 7, 1, "channels"), (AVX512, 14, 1, "channels"), (AVX2, 17, 1, "pixels"),
    (AVX2, 13, 3, "channels"), (AVX512, 9, 3, "channels")])
def test_conv_rows_run_over_the_flattened_image(
        resources: CpuResources, size: int, kernel: int, lanes_over: str) -> None:
    """With constant weights: lanes over output channels and register rows over the
    flattened image (49 rows for 7x7, not seven rows of seven), so only the image's last
    tile is partial. A pointwise convolution of more than FLAT_CHANNEL_PIXELS output
    pixels keeps its lanes along the pixels."""
    pads = [kernel // 2] * 4
    func = check("conv2d", [(1, 4, size, size), (16, 4, kernel, kernel)], {"pads": pads},
                 resources, frozenset({"in1"}), atol=1e-4)
    loops = [s for s in walk_stmts(func.body) if isinstance(s, For)]
    tiles = next(s for s in loops if s.var.name.startswith("t0_i0."))  # n, o.o, pixels.o
    if lanes_over == "channels":
        assert func.attrs["layouts"][1]["order"] == [0, 2, 3, 4, 1]
        rows = next(s for s in loops if s.kind == "unrolled").extent
        blocks = 16 // func.attrs["layouts"][1]["block"][1]
        assert tiles.extent == blocks * -(-size * size // rows)  # one loop of tiles
    else:
        assert not func.attrs.get("layouts")


@pytest.mark.parametrize(("resources", "per_group"), [(AVX2, 8), (AVX512, 16), (AVX2, 6)])
def test_grouped_conv_vectorizes_over_one_groups_output_channels(
        resources: CpuResources, per_group: int) -> None:
    """A grouped convolution (RegNet's 8-16 channels per group) puts one group's output
    channels in the lanes: they read the same input channels, so every input element is
    a broadcast. A group that fills no such block keeps lanes along the image."""
    groups = 2
    channels = groups * per_group
    func = check("conv2d", [(1, channels, 5, 6), (channels, per_group, 3, 3)],
                 {"pads": [1, 1, 1, 1], "groups": groups}, resources, frozenset({"in1"}),
                 atol=1e-4)
    layouts = func.attrs.get("layouts", {})
    if per_group % 4:
        assert not layouts
    else:
        assert layouts[1] == {"order": [0, 2, 3, 4, 1], "block": [0, per_group]}


def test_long_reduction_runs_in_blocks_with_partial_sums() -> None:
    """A product too large for the (here tiny) L2 reduces in blocks of k: the tile starts
    from the output's partial sums after the first block, and the result is exact."""
    tiny = CpuResources("tiny-l2", vector_bits=256, vector_registers=16, l2_bytes=8192,
                        l1_bytes=4096)
    # sums of 1024 products of unit normals (magnitude ~30) in float32: rounding ~1e-5
    func = check("matmul", [(5, 1024), (1024, 24)], {}, tiny, frozenset({"in1"}), atol=1e-4)
    steps = func.attrs.get("steps") or []
    outer = next(s for s in walk_stmts(func.body) if isinstance(s, For)
                 and not s.var.name.startswith("in0_packed"))  # after A's row panels
    assert outer.var.name == "k.o" and outer.extent == 4  # 4 blocks of 256, outermost
    assert not steps or all(s[0] != "fuse_epilogue" for s in steps)


@pytest.mark.parametrize("constants", [frozenset({"in1"}), frozenset({"in0", "in1"})])
def test_blocked_product_reads_its_left_side_as_row_panels(constants: frozenset[str]) -> None:
    """A product blocked for the (here tiny) caches reads ``A[i, k]`` as row panels
    ``[i / rows, k, rows]``: copied by the kernel when ``A`` is an input, stored so by
    ``build`` when it is a constant; 23 rows leave a partial last panel, and the result
    is still exact."""
    tiny = CpuResources("tiny-l2", vector_bits=256, vector_registers=16, l2_bytes=8192,
                        l1_bytes=4096)
    func = check("matmul", [(23, 1024), (1024, 24)], {}, tiny, constants, atol=1e-4)
    rows = next(s.extent for s in walk_stmts(func.body) if isinstance(s, For)
                and s.var.name == "t0_i0.i")
    assert 23 % rows
    shapes = {p.name: p.shape for p in func.params}
    if "in0" in constants:
        assert func.attrs["layouts"][0] == {"order": [0, 2, 1], "block": [0, rows]}
        assert shapes["in0"] == (-(-23 // rows), 1024, rows)
    else:
        assert shapes["in0_packed"] == (-(-23 // rows), 1024, rows)


def test_blocked_product_sizes_its_blocks_for_three_levels_of_cache() -> None:
    """A product blocked for the caches reads one panel of ``B`` (k block x lanes,
    within the L1) from every row tile of a block of row tiles (an eighth of the L2),
    and walks a group of panels (twice the L2) per block of rows: here blocks of k of
    256, blocks of 4 row tiles of 6, the register tiles' column loop above their row
    loop (``inner_order="cr"``), the 64 panels in two groups of 32."""
    caches = CpuResources("caches", vector_bits=256, vector_registers=16,
                          l2_bytes=256 * 1024, l1_bytes=16 * 1024)
    a, b = (te.placeholder((384, 1024), "float32", "in0"),
            te.placeholder((1024, 1024), "float32", "in1"))
    (out,) = get_op("matmul").compute([a, b], {}, [TensorType((384, 1024), "float32")], "t0")
    sched = schedule_cpu([out], resources=caches, constants=frozenset({"in1"}))
    loops = [s for s in walk_stmts(te.lower(sched, [a, b], [out]).body)
             if isinstance(s, For) and not s.var.name.startswith("in0_packed")]
    names = [s.var.name for s in loops]
    assert loops[0].var.name == "k.o" and loops[0].extent == 4
    parallel = next(s for s in loops if s.kind == "parallel")
    assert parallel.extent == 32  # 64 row tiles / 4 x 2 groups of panels
    cols, rows = names.index("t0_i1.o.i"), names.index("t0_i0.o.i")
    assert cols < rows and loops[rows].extent == 4 and loops[cols].extent == 32


@pytest.mark.parametrize("kblock_pos", ["outer", "tile"])
def test_blocks_of_k_inside_a_block_of_tiles(kblock_pos: str) -> None:
    """``kblock_pos="tile"`` moves the blocks of k inside the parallel loop, above a
    block of 2 x 2 register tiles whose part of the output stays in cache across them;
    with tails in both rows and columns (7 row tiles of 3, panels of 8 over 40), the
    result is still exact; so is the same block with the blocks of k outermost and the
    tiles' column loop above their row loop."""
    tiny = CpuResources("tiny-l2", vector_bits=256, vector_registers=16, l2_bytes=8192,
                        l1_bytes=4096)
    a, b = (te.placeholder((20, 256), "float32", "in0"),
            te.placeholder((256, 40), "float32", "in1"))
    (out,) = get_op("matmul").compute([a, b], {}, [TensorType((20, 40), "float32")], "t0")
    answers = {"kblock": 64, "pack_rows": True, "kblock_pos": kblock_pos, "tile_rows": 2,
               "tile_cols": 2, "rows": 3, "vec": 8,
               "inner_order": "cr" if kblock_pos == "outer" else "rc"}
    sched = schedule_cpu([out], resources=tiny, constants=frozenset({"in1"}),
                         choose=lambda st, knob, default, choices=(): answers.get(knob,
                                                                                   default))
    func = te.lower(sched, [a, b], [out])
    loops = [s for s in walk_stmts(func.body)
             if isinstance(s, For) and not s.var.name.startswith("in0_packed")]
    parallel = next(i for i, s in enumerate(loops) if s.kind == "parallel")
    inside = kblock_pos == "tile"
    assert (loops[parallel + 1].var.name == "k.o") == inside  # right inside the parallel
    assert (loops[0].var.name == "k.o") != inside  # or outermost
    arrays = [rng.standard_normal(x.shape).astype("float32") for x in (a, b)]
    bufs = [*func.stored_inputs(arrays)] + [np.zeros(b.shape, b.dtype)
                                            for b in func.params[2:]]  # C, A's row panels
    run_func(func, bufs)
    np.testing.assert_allclose(bufs[2], arrays[0] @ arrays[1], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("channels", "passes"), [(64, 4), (16, 0)])
def test_pointwise_conv_runs_in_passes_over_input_channels(channels: int, passes: int) -> None:
    """A blocked 1x1 convolution whose input outgrows half the (here tiny) L2 cache, with
    as many input channels as output ones, sums in passes over blocks of input channels
    (2 blocks of 8 a pass: 2.3 KiB of input, within half of 8 KiB), outermost, with the
    partial sums kept in the output; one with few input channels (an expansion) keeps
    one pass. Either way the result is exact."""
    tiny = CpuResources("tiny-l2", vector_bits=256, vector_registers=16, l2_bytes=8192,
                        l1_bytes=4096)
    func = check("conv2d", [(1, channels // 8, 6, 6, 8), (64, channels, 1, 1)],
                 {"pads": [0, 0, 0, 0], "strides": [1, 1], "block": 8}, tiny,
                 frozenset({"in1"}), atol=1e-4)
    outer = next(s for s in walk_stmts(func.body) if isinstance(s, For))
    if passes:
        assert outer.var.name == "rc.o" and outer.extent == passes
    else:
        assert all(s.var.name != "rc.o" for s in walk_stmts(func.body) if isinstance(s, For))


def test_blocked_conv_pixels_above_channel_blocks() -> None:
    """``outer_order="rows_first"`` on a blocked convolution puts the pixel tiles above
    the blocks of output channels in the parallel loop (each tile's input read once, the
    weights from cache); the result is exact, tails included (7 x 7 pixels in tiles of 6)."""
    x = te.placeholder((1, 4, 7, 7, 8), "float32", "in0")
    w = te.placeholder((32, 32, 1, 1), "float32", "in1")
    attrs = {"pads": [0, 0, 0, 0], "strides": [1, 1], "block": 8}
    out = get_op("conv2d").infer([TensorType(x.shape, "float32"), TensorType(w.shape, "float32")],
                                 attrs)
    (y,) = get_op("conv2d").compute([x, w], attrs, out, "t0")  # type: ignore[misc]
    answers = {"outer_order": "rows_first"}
    sched = schedule_cpu([y], resources=AVX2, constants=frozenset({"in1"}),
                         choose=lambda st, knob, default, choices=(): answers.get(knob,
                                                                                   default))
    func = te.lower(sched, [x, w], [y])
    parallel = next(s for s in walk_stmts(func.body) if isinstance(s, For) and
                    s.kind == "parallel")
    names = parallel.var.name.split(".")
    assert names.index("t0_i2") < names.index("t0_i1")  # pixels, then blocks
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in (x, w)]
    bufs = [*func.stored_inputs(arrays), np.zeros(y.shape, "float32")]
    run_func(func, bufs)
    want = get_op("conv2d").reference(arrays, attrs)[0]
    np.testing.assert_allclose(bufs[2], want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 5, 70), (2, 1000)])
def test_softmax_runs_a_row_at_a_time(shape: tuple[int, ...]) -> None:
    """A softmax's max, exponentials and sum are computed inside its row loop
    (compute_at): one parallel loop, the exponentials in a row buffer of its own (padded
    for vector tails), one exp per element, and the result exact."""
    from tensorsmith.ir.te.stmt import Allocate

    func = check("softmax", [shape], {"axis": -1}, AVX2)
    top = [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "parallel"]
    assert len(top) <= 1 and len(func.params) == 2  # no buffer of the whole exponentials
    rows = [s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate)
            and s.buffer.name.endswith("_exp")]
    assert len(rows) == 1 and rows[0].size >= shape[-1] and rows[0].size % 64 == 0
    exps = [e for s in walk_stmts(func.body) for x in stmt_exprs(s) for e in walk(x)
            if isinstance(e, Call) and e.fn == "exp"]
    assert len(exps) == 1


def test_row_reduction_read_outside_the_row_loop_stays_outside() -> None:
    """A mean's sum is read by the mean (a kernel output with loops of its own) as well as
    through it by the row loop of ``x - mean``: it is not moved into that loop, whose
    row buffer the mean's own loop could not see; the kernel stays exact."""
    x = te.placeholder((1, 197, 192), "float32", "in0")
    (mean,) = get_op("reduce_mean").compute([x], {"axes": [2], "keepdims": True},
                                            [TensorType((1, 197, 1), "float32")], "t0")
    sub = te.compute((1, 197, 192), lambda a, b, c: x[a, b, c] - mean[a, b, 0], name="t1")
    func = te.lower(schedule_cpu([mean, sub], resources=AVX2), [x], [mean, sub])
    data = rng.standard_normal((1, 197, 192)).astype("float32")
    bufs = [data, np.zeros((1, 197, 1), "float32"), np.zeros((1, 197, 192), "float32"),
            *[np.zeros(b.shape, b.dtype) for b in func.params[3:]]]
    run_func(func, bufs)
    want = data.mean(axis=2, keepdims=True)
    np.testing.assert_allclose(bufs[1], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bufs[2], data - want, rtol=1e-5, atol=1e-5)


def test_compute_at_needs_the_consumers_outermost_loop_over_the_same_rows() -> None:
    from tensorsmith.ir.te.schedule import Schedule

    x = te.placeholder((4, 6), "float32", "x")
    (y,) = get_op("reduce_sum").compute([x], {"axes": [1], "keepdims": True},
                                        [TensorType((4, 1), "float32")], "t0")
    z = te.compute((4, 6), lambda i, j: x[i, j] - y[i, 0], name="z")
    s = Schedule([z])
    s.fuse(y.name, *[lf.name for lf in s[y.name].leaves if not lf.reduce])
    with pytest.raises(ValueError, match="outermost"):
        s.compute_at(y.name, "z", s["z"].leaves[1].name)
    s.split("z", s["z"].leaves[0].name, 2)  # z's outer loop: 2 iterations, y has 4 rows
    with pytest.raises(ValueError, match="does not walk"):
        s.compute_at(y.name, "z", s["z"].leaves[0].name)


def test_channel_concat_loads_one_input_per_row() -> None:
    """A Concat along channels runs by rows (channels) with a vector loop along each row:
    its select between inputs is the same for every lane, so lowering makes it a branch
    per row, and each element loads from one input instead of all of them."""
    func = check("concat", [(1, 3, 5, 20), (1, 2, 5, 20), (1, 4, 5, 20)], {"axis": 1}, AVX2)
    branches = [s for s in walk_stmts(func.body) if isinstance(s, IfThenElse)
                and s.otherwise is not None]
    assert len(branches) == 2  # three inputs, two boundaries (the third if: the tail)
    assert any(isinstance(s, For) and s.kind == "vectorized" for s in walk_stmts(func.body))


def test_rules_refuse_answers_they_cannot_schedule() -> None:
    """A register tile of 12 rows x 64 lanes would spill: the rule raises KnobConflict
    (the tuner's space leaves such configs out) instead of scheduling it."""
    from tensorsmith.ir.schedules import KnobConflict

    a, b = (te.placeholder((64, 32), "float32", "in0"),
            te.placeholder((32, 96), "float32", "in1"))
    (out,) = get_op("matmul").compute([a, b], {}, [TensorType((64, 96), "float32")], "t0")
    answers = {"vec": 64, "rows": 12}
    with pytest.raises(KnobConflict, match="spills"):
        schedule_cpu([out], resources=AVX2,
                     choose=lambda st, knob, default, choices=(): answers.get(knob, default))
    answers["rows"] = 8  # 512 accumulators: allowed
    schedule_cpu([out], resources=AVX2,
                 choose=lambda st, knob, default, choices=(): answers.get(knob, default))


def test_every_stage_kind_has_a_rule_on_every_family() -> None:
    from tensorsmith.ir.schedules.rules import RULES

    kinds = set(RULES["cpu"])
    assert {"inline", "elementwise", "pad", "window", "product", "reduction"} <= kinds
    assert all(set(table) == kinds for table in RULES.values())


@pytest.mark.parametrize("resources", [AVX2, AVX512], ids=lambda r: r.cpu)
def test_column_sums_are_a_product_of_one_row(resources: CpuResources) -> None:
    """A sum over the rows of a matrix reads its input's last axis contiguously: the
    product rule schedules it with one row (TopK and ReduceLogSum cases build this)."""
    check("reduce_sum", [(5, 37)], {"axes": [0], "keepdims": 0}, resources)


@pytest.mark.parametrize("resources", [AVX2, AVX512], ids=lambda r: r.cpu)
@pytest.mark.parametrize("shapes", [[(64, 30), (30, 40)], [(2, 70, 9), (2, 9, 35)]],
                         ids=["2d", "batched"])
def test_input_right_hand_side_is_packed_at_run_time(resources: CpuResources,
                                                     shapes: list[tuple[int, ...]]) -> None:
    """A product of two inputs with 64 rows or more, whose right-hand side does not fit
    half the L2 cache, copies that into zero-padded panels first (a scratch buffer, not
    a stored layout the caller must make), and reads the copy: the result is exact, the
    last panel partial. (An L2 of 1 KiB keeps the shapes small for the interpreter.)"""
    func = check("matmul", shapes, {}, dataclasses.replace(resources, l2_bytes=1024))
    assert "layouts" not in func.attrs  # the caller passes B as it is
    (scratch,) = func.params[3:]
    rows, cols = shapes[1][-2:]
    lanes = scratch.shape[-1]  # the register tile's width
    assert scratch.name == "in1_packed" and lanes % resources.lanes() == 0
    assert scratch.shape == (*shapes[1][:-2], -(-cols // lanes), rows, lanes)
    copy = next(s for s in walk_stmts(func.body) if isinstance(s, For))
    assert copy.var.name.startswith("in1_packed")  # the copy runs first


def test_few_rows_or_a_small_input_are_read_in_place() -> None:
    """32 rows: the copy would cost a large share of the product's own memory traffic;
    a right-hand side in the L2 cache (attention's): no gain to pay for."""
    tiny = dataclasses.replace(AVX2, l2_bytes=1024)
    assert len(check("matmul", [(32, 30), (30, 40)], {}, tiny).params) == 3
    assert len(check("matmul", [(64, 30), (30, 40)], {}, AVX2).params) == 3


@pytest.mark.parametrize(("stride", "size", "outer"), [
    (2, 56, True),    # ResNet-50's downsampling: 3.2 MB of input, every other pixel read
    (1, 56, False),   # stride 1: passes over input channels instead
    (2, 14, False)])  # an input that fits the L2
def test_strided_pointwise_conv_walks_pixels_outermost(stride: int, size: int,
                                                       outer: bool) -> None:
    """A strided 1x1 convolution over blocked activations whose input outgrows the L2
    puts its pixel tiles above its blocks of output channels by default."""
    x = te.placeholder((1, 32, size, size, 8), "float32", "in0")
    w = te.placeholder((512, 256, 1, 1), "float32", "in1")
    attrs = {"pads": [0, 0, 0, 0], "strides": [stride, stride], "block": 8}
    out = get_op("conv2d").infer([TensorType(x.shape, "float32"), TensorType(w.shape, "float32")],
                                 attrs)
    (y,) = get_op("conv2d").compute([x, w], attrs, out, "t0")  # type: ignore[misc]
    sched = schedule_cpu([y], resources=AVX2, constants=frozenset({"in1"}))
    func = te.lower(sched, [x, w], [y])
    parallel = next(s for s in walk_stmts(func.body) if isinstance(s, For) and
                    s.kind == "parallel")
    names = parallel.var.name.split(".")
    pixels_first = names.index("t0_i2") < names.index("t0_i1")
    assert pixels_first == outer
