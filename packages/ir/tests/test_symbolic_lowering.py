"""Kernels with run-time sizes: tensor expressions over symbolic dims, their default CPU
schedules (schedules/cpu_dynamic.py) and the tensor IR they lower to, checked as text
and, through the interpreter, against NumPy at several sizes."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import GraphBuilder, te
from tensorsmith.ir.lowering import (
    default_transforms,
    group_compute,
    has_symbolic_shapes,
    lower_group,
)
from tensorsmith.ir.passes import fuse_ops
from tensorsmith.ir.schedules import default_schedule, rule_knobs
from tensorsmith.ir.symbolic import symbol
from tensorsmith.ir.te.dispatch import split_dispatches
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.expr import Const, SymVar, const
from tensorsmith.ir.te.stmt import For, PrimFunc
from tensorsmith.ir.te.symbols import ceil_div, divides, sym_expr, symvar
from tensorsmith.ir.te.visit import walk_stmts

B, S, M, K = symbol("batch"), symbol("seq"), symbol("m"), symbol("k")
F = "float32"
rng = np.random.default_rng(3)


def kernels(graph_outputs: list, b: GraphBuilder, target: str = "llvm") -> list[PrimFunc]:
    groups = fuse_ops(b.finish(graph_outputs))
    schedule = default_schedule(target)
    return [lower_group(g, f"kernel{i}", schedule) for i, g in enumerate(groups)]


def interpret(func: PrimFunc, inputs: list[np.ndarray], sizes: dict[str, int]
              ) -> list[np.ndarray]:
    """Run ``func`` in the tensor-IR interpreter, its outputs (and scratch) allocated from
    the buffers' shapes at ``sizes``."""
    from tensorsmith.ir.symbolic import evaluate

    arrays = [*func.stored_inputs(inputs)]
    for buf in func.params[len(arrays):]:
        arrays.append(np.zeros([evaluate(d, sizes) for d in buf.shape], buf.dtype))
    run_func(func, arrays, sizes)
    return arrays[func.num_inputs:func.num_inputs + func.num_outputs]


# -- te: dims as expressions ---------------------------------------------------------------
def test_a_dim_becomes_one_expression_over_size_variables() -> None:
    e = sym_expr(B * S * 768)
    assert repr(e) == "((batch * seq) * 768)"
    assert sym_expr(S * B * 768) is e  # equal dims, one expression
    assert symvar("batch") is symvar("batch") and isinstance(symvar("seq"), SymVar)
    assert const(B - 1).dtype == "int64" and repr(const(S - 1)) == "(seq + -1)"
    assert repr(const(S, "float32")) == "float32(seq)"
    assert isinstance(const(5), Const) and ceil_div(S, 8) == (S + 7) // 8 and ceil_div(17, 8) == 3
    assert divides(4, 12 * B) and not divides(4, B) and divides(4, 8)
    x = te.placeholder((B, 3), name="x")
    assert repr(x[0, 1] * S) == "(x[0, 1] * float32(seq))"


def test_static_kernels_have_no_sizes_and_no_expression_extents() -> None:
    b = GraphBuilder()
    y = b.add1("exp", [b.input("x", (4, 96), F)])
    (func,) = kernels([y], b)
    assert "symbols" not in func.attrs
    assert all(isinstance(s.extent, int) for s in walk_stmts(func.body) if isinstance(s, For))


# -- lowering ----------------------------------------------------------------------------
def test_an_elementwise_kernel_loops_over_the_sizes() -> None:
    b = GraphBuilder()
    x, bias = b.input("x", (B, S, 96), F), b.input("bias", (96,), F)
    (func,) = kernels([b.add1("relu", [b.add1("add", [x, bias])])], b)
    text = str(func)
    assert "in0: float32[batch, seq, 96]" in text and "in1: float32[96]" in text
    # rows (batch x seq, and the column blocks) in parallel, the columns static vectors
    assert "for parallel" in text and "in 0..((batch * seq) * 2):" in text
    assert "for vectorized t1_relu_i2.i in 0..48:" in text
    assert func.attrs["symbols"] == ("batch", "seq")
    for sizes in ({"batch": 1, "seq": 1}, {"batch": 2, "seq": 3}):
        xs = rng.standard_normal((sizes["batch"], sizes["seq"], 96)).astype(F)
        bs = rng.standard_normal(96).astype(F)
        (got,) = interpret(func, [xs, bs], sizes)
        np.testing.assert_allclose(got, np.maximum(xs + bs, 0), rtol=1e-6)


def test_a_softmax_over_a_symbolic_axis_computes_its_reductions_by_rows() -> None:
    b = GraphBuilder()
    (func,) = kernels([b.add1("softmax", [b.input("x", (B, 4, S), F)], {"axis": -1})], b)
    text = str(func)
    assert "for parallel t0_softmax_i0.t0_softmax_i1 in 0..(batch * 4):" in text
    assert "for k in 0..seq:" in text  # the max and the sum, each over one row
    assert "alloc t0_softmax_max: float32[64] local" in text
    assert "in 0..((seq + 63) // 64):" in text and "< seq)" in text  # a masked tail
    assert [b.name for b in func.scratch] == []
    for batch, seq in ((1, 1), (2, 70)):
        xs = rng.standard_normal((batch, 4, seq)).astype(F)
        (got,) = interpret(func, [xs], {"batch": batch, "seq": seq})
        e = np.exp(xs - xs.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_reduction_over_a_symbolic_axis() -> None:
    b = GraphBuilder()
    x = b.input("x", (B, S, 8), F)
    (func,) = kernels([b.add1("reduce_mean", [x], {"axes": [1], "keepdims": False})], b)
    text = str(func)
    assert "for k1 in 0..seq:" in text and "float32(seq)" in text
    for batch, seq in ((1, 1), (3, 5)):
        xs = rng.standard_normal((batch, seq, 8)).astype(F)
        (got,) = interpret(func, [xs], {"batch": batch, "seq": seq})
        np.testing.assert_allclose(got, xs.mean(1), rtol=1e-5)


def test_a_matmul_with_symbolic_rows_keeps_the_static_register_tile() -> None:
    b = GraphBuilder()
    a = b.input("a", (M, 32), F)
    w = b.constant("w", rng.standard_normal((32, 40)).astype(F))
    avx2 = "llvm -mcpu=haswell"  # the tile sizes below are those of 16 ymm registers
    (func,) = kernels([b.add1("matmul", [a, w])], b, avx2)
    static = kernels([b.add1("matmul", [b.input("s", (64, 32), F), w])], b, avx2)[-1]
    text = str(func)
    # rows in register tiles of 6, the last one clamped to row m - 1 and its write guarded
    assert "min(" in text and "(m + -1))" in text and "< m)" in text
    assert "alloc t0_matmul.local: float32[" in text and "(m + 5) // 6)" in text
    # the steps are the static kernel's: the same tile
    assert func.attrs["steps"] == static.attrs["steps"]
    for m in (1, 7, 13):
        xs = rng.standard_normal((m, 32)).astype(F)
        (got,) = interpret(func, [xs, w.data], {"m": m})
        np.testing.assert_allclose(got, xs @ w.data, rtol=1e-4, atol=1e-4)


def test_a_matmul_with_symbolic_depth_and_columns() -> None:
    n = symbol("n")
    b = GraphBuilder()
    (func,) = kernels([b.add1("matmul", [b.input("a", (M, K), F), b.input("w", (K, n), F)])], b)
    assert func.attrs["symbols"] == ("k", "m", "n")
    assert "for k in 0..k:" in str(func)
    for m, k, cols in ((1, 1, 1), (7, 5, 19)):
        xs = rng.standard_normal((m, k)).astype(F)
        ws = rng.standard_normal((k, cols)).astype(F)
        (got,) = interpret(func, [xs, ws], {"m": m, "k": k, "n": cols})
        np.testing.assert_allclose(got, xs @ ws, rtol=1e-4, atol=1e-4)


def test_scratch_of_run_time_size_is_a_parameter_and_a_register_tile_is_refused() -> None:
    """A stage computed whole into scratch of run-time size (a padded batch of images)
    is one more parameter, which the plan places once it knows the sizes; the loops
    below a cache_write (the registers of a tile) must have a fixed size."""
    x = te.placeholder((B, 8), name="x")
    y = te.compute((B, 8), lambda i, j: x[i, j] + 1.0, name="y")
    z = te.compute((B, 8), lambda i, j: y[i, j] * 2.0, name="z")
    func = te.lower(te.create_schedule(z), [x], [z])
    assert [(b.name, b.shape) for b in func.scratch] == [("y", (B, 8))]
    xs = rng.standard_normal((3, 8)).astype(F)
    np.testing.assert_allclose(interpret(func, [xs], {"batch": 3})[0], (xs + 1) * 2)
    k = te.reduce_axis(8, "k")
    c = te.compute((B, 8), lambda i, j: te.sum(x[i, k.var] * x[i, j], k), name="c")
    s = te.create_schedule(c)
    s.reorder(c, "c_i1", "c_i0")
    s.cache_write(c, "c_i1")
    with pytest.raises(ValueError, match="run \\['batch'\\] times"):
        te.lower(s, [x], [c])


def test_a_row_at_a_time_stage_of_run_time_length_keeps_a_whole_buffer() -> None:
    """compute_at keeps a row of a fixed, small size in a local buffer; a row of
    run-time length is computed into a buffer of the stage's whole (run-time) size."""
    x = te.placeholder((4, S), name="x")
    e = te.compute((4, S), lambda i, j: te.exp(x[i, j]), name="e")
    o = te.compute((4, S), lambda i, j: e[i, j] * 2.0, name="o")
    s = te.create_schedule(o)
    s.compute_at(e, o, "o_i0")
    func = te.lower(s, [x], [o])
    assert [(b.name, b.shape) for b in func.scratch] == [("e", (4, S))]
    xs = rng.standard_normal((4, 5)).astype(F)
    np.testing.assert_allclose(interpret(func, [xs], {"seq": 5})[0], np.exp(xs) * 2,
                               rtol=1e-6)


def test_the_knobs_of_a_dynamic_kernel_are_asked() -> None:
    b = GraphBuilder()
    a = b.input("a", (M, 32), F)
    y = b.add1("relu", [b.add1("matmul", [a, b.constant("w", np.ones((32, 40), F))])])
    (group,) = fuse_ops(b.finish([y]))
    _, outputs = group_compute(group)
    knobs = rule_knobs(default_schedule("llvm"), outputs, frozenset({"in1"}))
    assert {"rows", "vec", "parallel"} <= set(knobs["t0_matmul"])


# -- what other targets and the tuner do with such kernels -----------------------------
def test_gpu_kernels_take_run_time_extents_in_their_workgroup_counts_only() -> None:
    """The GPU rules, sized on the stand-in, replay on the symbolic kernel: the workgroup
    size stays fixed, the workgroup count is an expression of the sizes."""
    b = GraphBuilder()
    (group,) = fuse_ops(b.finish([b.add1("exp", [b.input("x", (B, 8), F)])]))
    func = lower_group(group, "k", default_schedule("vulkan"))
    assert func.attrs["symbols"] == ("batch",)
    (d,) = split_dispatches(func)
    assert d.workgroup == (64, 1, 1)
    assert not isinstance(d.grid[0], int) and d.grid[1:] == (1, 1)


def test_opencl_kernels_read_run_time_sizes_from_their_last_argument() -> None:
    from tensorsmith.codegen.opencl.emit import emit_program

    b = GraphBuilder()
    (group,) = fuse_ops(b.finish([b.add1("exp", [b.input("x", (B, 8), F)])]))
    func = lower_group(group, "k", default_schedule("opencl"))
    program = emit_program([func])
    assert "__global const long* restrict sizes)" in program.source
    assert "const long batch = sizes[0];" in program.source
    (d,) = program.dispatches["k"]
    assert isinstance(d["grid"][0], str) and "batch" in d["grid"][0]
    assert d["grid"][1:] == [1, 1]


def test_a_symbolic_batch_takes_the_fast_convolution_of_one_image() -> None:
    """A weight transform does not depend on the batch: a blocked convolution over a
    symbolic batch runs Winograd where one image of it would (F(4x4) at 28x28: 49 tiles;
    at 7x7 one image has too few tiles for either); a run-time image size runs direct."""
    def transforms(x_shape: tuple, blocked: bool = True) -> dict[int, str]:
        b = GraphBuilder()
        w = b.constant("w", np.ones((64, 64, 3, 3), F))
        x = b.input("x", x_shape, F)
        attrs = {"pads": [1, 1, 1, 1], **({"block": 8} if blocked else {})}
        (group,) = fuse_ops(b.finish([b.add1("conv2d", [x, w], attrs)]))
        assert has_symbolic_shapes(group) == any(not isinstance(d, int) for d in x_shape)
        return default_transforms(group, "cpu", [1])

    assert transforms((B, 8, 28, 28, 8)) == transforms((1, 8, 28, 28, 8)) == {
        1: "winograd_f4_3"}
    assert transforms((B, 8, 7, 7, 8)) == {}
    assert transforms((B, 64, 28, 28), blocked=False) == {}  # NCHW: direct, as ever
    h = symbol("h")
    assert transforms((B, 8, h, h, 8)) == {}


def test_a_size_hint_sizes_the_kernel_as_the_static_kernel_of_that_size() -> None:
    """``build(size_hints=...)`` (``--dim m=1..2``): the rules size a dynamic stage for
    the hinted size, taking the steps of the static kernel of that size, not of the
    default stand-in (64); the kernel still computes any size."""
    from tensorsmith.ir.schedules.proxy import SIZE_HINT, sized_for

    weight = rng.standard_normal((256, 64)).astype(F)

    def product(rows: object) -> PrimFunc:
        b = GraphBuilder()
        x = b.input("a", (rows, 256), F)
        (func,) = kernels([b.add1("matmul", [x, b.constant("w", weight)])], b)
        return func

    default = product(M)
    with sized_for({"m": 2}):
        small = product(M)
    static = {n: product(n) for n in (2, SIZE_HINT)}
    assert default.attrs["steps"] == static[SIZE_HINT].attrs["steps"]
    assert small.attrs["steps"] == static[2].attrs["steps"]
    assert small.attrs["steps"] != default.attrs["steps"]
    for m in (1, 2, 9):
        xs = rng.standard_normal((m, 256)).astype(F)
        (got,) = interpret(small, [xs, weight], {"m": m})
        np.testing.assert_allclose(got, xs @ weight, rtol=1e-4, atol=1e-4)
