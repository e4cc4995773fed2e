"""cache_read tiles and the tiled GPU matrix-product schedule, run by the te interpreter
(workgroups in lockstep between barriers) and compared with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.schedules import schedule_gpu
from tensorsmith.ir.schedules.gpu_gemm import GemmTiles, choose_tiles, schedule_gemm
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.stmt import Allocate, Barrier, For, PrimFunc, Seq
from tensorsmith.ir.te.visit import walk_stmts

rng = np.random.default_rng(5)


def matmul(m: int, n: int, k: int, epilogue: bool = True) -> tuple[te.Tensor, ...]:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    bias = te.placeholder((n,), name="bias")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], r), name="C", tag="matmul")
    if not epilogue:
        return a, b, bias, c
    d = te.compute((m, n), lambda i, j: te.maximum(c[i, j] + bias[j], 0.0), name="D")
    return a, b, bias, d


def run(func: PrimFunc, arrays: list[np.ndarray]) -> list[np.ndarray]:
    bufs = [*arrays] + [np.zeros(p.shape, p.dtype) for p in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[func.num_inputs:func.num_inputs + func.num_outputs]


def inputs(m: int, n: int, k: int) -> list[np.ndarray]:
    return [rng.standard_normal((m, k)).astype("float32"),
            rng.standard_normal((k, n)).astype("float32"),
            rng.standard_normal((n,)).astype("float32")]


@pytest.mark.parametrize("shape", [(5, 6, 7), (37, 45, 29), (3, 130, 24), (33, 17, 1)])
def test_default_gpu_gemm_matches_numpy(shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    a, b, bias, d = matmul(m, n, k)
    s = schedule_gpu([d])
    assert any(step.kind == "cache_read" for step in s.steps)
    func = te.lower(s, [a, b, bias], [d])
    x, y, z = inputs(m, n, k)
    (out,) = run(func, [x, y, z, np.zeros((m, n), "float32")])
    np.testing.assert_allclose(out, np.maximum(x @ y + z, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tiles", [GemmTiles(4, 4, 2, 2, 4), GemmTiles(2, 8, 3, 1, 5),
                                   GemmTiles(4, 2, 1, 4, 3), GemmTiles(4, 4, 2, 2, 4, True),
                                   GemmTiles(2, 8, 3, 1, 5, True), GemmTiles(4, 4, 1, 1, 13, True)])
def test_gemm_tiles_not_dividing_the_shape(tiles: GemmTiles) -> None:
    """Every axis has a tail: zero-filled tiles and guarded write-back keep it exact."""
    m, n, k = 19, 23, 13
    a, b, _, c = matmul(m, n, k, epilogue=False)
    s = te.create_schedule(c)
    schedule_gemm(s, s["C"], tiles)
    func = te.lower(s, [a, b], [c])
    x, y, _ = inputs(m, n, k)
    (out,) = run(func, [x, y, np.zeros((m, n), "float32")])
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


def test_batched_matmul_with_broadcast_batch() -> None:
    a = te.placeholder((2, 3, 9, 6), name="A")
    b = te.placeholder((3, 6, 11), name="B")
    r = te.reduce_axis(6, "k")
    c = te.compute((2, 3, 9, 11), lambda p, q, i, j: te.sum(a[p, q, i, r] * b[q, r, j], r),
                   name="C", tag="matmul")
    s = schedule_gpu([c])
    func = te.lower(s, [a, b], [c])
    x = rng.standard_normal((2, 3, 9, 6)).astype("float32")
    y = rng.standard_normal((3, 6, 11)).astype("float32")
    (out,) = run(func, [x, y, np.zeros((2, 3, 9, 11), "float32")])
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


def test_gemm_reads_through_an_inlined_transpose() -> None:
    """x @ w.T with the transpose inlined: the tile is staged from the transposed view."""
    a = te.placeholder((7, 5), name="A")
    w = te.placeholder((9, 5), name="W")
    wt = te.compute((5, 9), lambda i, j: w[j, i], name="WT")
    r = te.reduce_axis(5, "k")
    c = te.compute((7, 9), lambda i, j: te.sum(a[i, r] * wt[r, j], r), name="C", tag="matmul")
    s = schedule_gpu([c])
    assert s["WT"].inline
    func = te.lower(s, [a, w], [c])
    x = rng.standard_normal((7, 5)).astype("float32")
    y = rng.standard_normal((9, 5)).astype("float32")
    (out,) = run(func, [x, y, np.zeros((7, 9), "float32")])
    np.testing.assert_allclose(out, x @ y.T, rtol=1e-5, atol=1e-5)


def test_shared_tile_is_filled_between_barriers() -> None:
    a, b, bias, d = matmul(8, 8, 8)
    func = te.lower(schedule_gpu([d]), [a, b, bias], [d])
    shared = [s.buffer for s in walk_stmts(func.body)
              if isinstance(s, Allocate) and s.buffer.scope == "shared"]
    assert sorted(buf.name for buf in shared) == ["A.shared", "B.shared"]
    loop = next(s for s in walk_stmts(func.body) if isinstance(s, For) and s.var.name == "k.o")
    inner = loop.body
    while isinstance(inner, Allocate):
        inner = inner.body
    assert isinstance(inner, Seq) and isinstance(inner.stmts[0], Barrier)
    assert sum(isinstance(x, Barrier) for x in inner.stmts) == 2


def test_local_tile_alone_on_cpu_style_loops() -> None:
    """A local cache_read needs no threads: a plain split reduction reading a copy."""
    a, b, _, c = matmul(6, 10, 9, epilogue=False)
    s = te.create_schedule(c)
    jo, ji = s.split("C", "C_i1", 4)
    ko, ki = s.split("C", "k", 4)
    s.reorder("C", "C_i0", jo, ko, ki, ji)
    s.cache_read("C", "B", "local", ko)
    s.cache_read("C", "A", "local", ki)
    func = te.lower(s, [a, b], [c])
    x, y, _ = inputs(6, 10, 9)
    (out,) = run(func, [x, y, np.zeros((6, 10), "float32")])
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


def test_cache_read_replays_from_json() -> None:
    a, b, bias, d = matmul(20, 12, 16)
    s = schedule_gpu([d])
    records = [step.to_json() for step in s.steps]
    again = te.replay([d], [te.Step.from_json(r) for r in records])
    assert [st.to_json() for st in again.steps] == records
    assert again["C"].cache_reads == s["C"].cache_reads
    assert str(te.lower(again, [a, b, bias], [d])) == str(te.lower(s, [a, b, bias], [d]))


def test_prefetched_tile_is_loaded_before_its_loop_and_one_iteration_ahead() -> None:
    a, b, _, c = matmul(8, 8, 12, epilogue=False)
    s = te.create_schedule(c)
    schedule_gemm(s, s["C"], GemmTiles(4, 4, 2, 2, 4, True))
    assert all(step.args[3:] == (True,) for step in s.steps
               if step.kind == "cache_read" and step.args[1] == "shared")
    text = str(te.lower(s, [a, b], [c]))
    assert text.index("A.shared.next[") < text.index("for k.o")
    assert "if ((k.o + 1) < 3)" in text


def test_cache_read_errors() -> None:
    a, b, _, c = matmul(4, 4, 4, epilogue=False)
    s = te.create_schedule(c)
    with pytest.raises(ValueError, match="scope"):
        s.cache_read("C", "A", "global", "k")
    with pytest.raises(ValueError, match="does not read"):
        s.cache_read("C", "bias", "shared", "k")
    with pytest.raises(ValueError, match="shared tiles only"):
        s.cache_read("C", "A", "local", "k", prefetch=True)
    s = te.create_schedule(c)
    s.annotate("C", "C_i1", "threadIdx.x")
    s.cache_read("C", "A", "shared", "C_i0")
    with pytest.raises(ValueError, match="threadIdx"):
        te.lower(s, [a, b], [c])


def test_interpreter_rejects_a_barrier_only_some_invocations_reach() -> None:
    from tensorsmith.ir.te.expr import Var
    from tensorsmith.ir.te.stmt import IfThenElse

    t = Var("t")
    body = For(t, 4, "threadIdx.x", IfThenElse(t < 2, Barrier()))
    with pytest.raises(RuntimeError, match="barrier"):
        run_func(PrimFunc("f", [], body, 0, 0), [])


def test_tile_choice_keeps_big_tiles_for_big_products() -> None:
    big = choose_tiles(1, 4096, 4096, 4096)
    assert (big.rows, big.cols, big.kt) == (128, 128, 16)
    vit = choose_tiles(1, 197, 768, 192)
    assert vit.rows * vit.cols < 128 * 128 and 192 % vit.kt == 0
    head = choose_tiles(1, 1, 1000, 512)
    assert head.rows == 1 and head.ty * head.tx >= 64


def conv_graph_stage(n: int, c: int, hw: int, o: int, k: int, stride: int, pad: int,
                     groups: int = 1) -> tuple[te.Tensor, ...]:
    from tensorsmith.ir.op_registry import TensorType, get_op

    x = te.placeholder((n, c, hw, hw), name="x")
    w = te.placeholder((o, c // groups, k, k), name="w")
    attrs = {"strides": [stride, stride], "pads": [pad] * 4, "groups": groups}
    opdef = get_op("conv2d")
    (out_type,) = opdef.infer([TensorType(x.shape, "float32"), TensorType(w.shape, "float32")],
                              attrs)
    (y,) = opdef.compute([x, w], attrs, [out_type], "conv")
    return x, w, y


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    from tensorsmith.ir.op_registry import get_op

    attrs = {"strides": [stride, stride], "pads": [pad] * 4}
    return get_op("conv2d").reference([x, w], attrs)[0]


@pytest.mark.parametrize("geometry", [(1, 3, 7, 5, 3, 1, 1), (2, 4, 9, 6, 3, 2, 1),
                                      (1, 6, 5, 9, 1, 1, 0)])
def test_default_gpu_conv_matches_numpy(geometry: tuple[int, ...]) -> None:
    n, c, hw, o, k, stride, pad = geometry
    x, w, y = conv_graph_stage(n, c, hw, o, k, stride, pad)
    s = schedule_gpu([y])
    assert any(step.kind == "cache_read" and step.args[1] == "shared" for step in s.steps)
    func = te.lower(s, [x, w], [y])
    xs = rng.standard_normal(x.shape).astype("float32")
    ws = rng.standard_normal(w.shape).astype("float32")
    (out,) = run(func, [xs, ws, np.zeros(y.shape, "float32")])
    np.testing.assert_allclose(out, conv_reference(xs, ws, stride, pad), rtol=1e-4, atol=1e-4)


def test_grouped_conv_keeps_the_simple_schedule() -> None:
    *_, y = conv_graph_stage(1, 4, 5, 4, 3, 1, 1, groups=4)
    assert not any(step.kind == "cache_read" for step in schedule_gpu([y]).steps)


def softmax_rows(rows: int, length: int) -> tuple[te.Tensor, te.Tensor]:
    x = te.placeholder((rows, length), name="x")
    k = te.reduce_axis(length, "k")
    mx = te.compute((rows,), lambda i: te.max(x[i, k], k), name="mx")
    k2 = te.reduce_axis(length, "k2")
    sm = te.compute((rows,), lambda i: te.sum(te.exp(x[i, k2] - mx[i]), k2), name="sm")
    return x, te.compute((rows, length), lambda i, j: te.exp(x[i, j] - mx[i]) / sm[i], name="y")


@pytest.mark.parametrize("length", [32, 70, 300])
def test_workgroup_reductions_for_softmax_rows(length: int) -> None:
    x, y = softmax_rows(3, length)
    s = schedule_gpu([y])
    assert any(step.args[1] == "threadIdx.x" and step.args[0].startswith("k")
               for step in s.steps if step.kind == "annotate")
    func = te.lower(s, [x], [y])
    xs = rng.standard_normal((3, length)).astype("float32") * 4
    (out,) = run(func, [xs, np.zeros((3, length), "float32")])
    e = np.exp(xs - xs.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_workgroup_reduction_over_two_axes_to_a_scalar() -> None:
    x = te.placeholder((6, 11), name="x")
    r0, r1 = te.reduce_axis(6, "r0"), te.reduce_axis(11, "r1")
    total = te.compute((1,), lambda i: te.sum(x[r0, r1], [r0, r1]), name="total")
    func = te.lower(schedule_gpu([total]), [x], [total])
    xs = rng.standard_normal((6, 11)).astype("float32")
    (out,) = run(func, [xs, np.zeros((1,), "float32")])
    np.testing.assert_allclose(out, [xs.sum()], rtol=1e-5)


def test_short_reductions_stay_per_invocation() -> None:
    _, y = softmax_rows(5, 8)
    assert not any(step.args[1] == "threadIdx.x" and step.args[0].startswith("k")
                   for step in schedule_gpu([y]).steps if step.kind == "annotate")


def test_workgroup_reduction_needs_a_power_of_two() -> None:
    x, y = softmax_rows(2, 40)
    s = te.create_schedule(y)
    ko, ki = s.split("mx", "k", 10)
    s.reorder("mx", "mx_i0", ki, ko)
    s.annotate("mx", "mx_i0", "blockIdx.x")
    s.annotate("mx", ki, "threadIdx.x")
    with pytest.raises(ValueError, match="power of two"):
        te.lower(s, [x], [y])


def test_conv_and_reduction_schedules_replay_from_json() -> None:
    x, w, y = conv_graph_stage(1, 4, 6, 8, 3, 1, 1)
    xr, yr = softmax_rows(2, 100)
    for inputs, out in (([x, w], y), ([xr], yr)):
        s = schedule_gpu([out])
        again = te.replay([out], [te.Step.from_json(st.to_json()) for st in s.steps])
        assert str(te.lower(again, inputs, [out])) == str(te.lower(s, inputs, [out]))
