"""Tensor expressions, every schedule step and the simplifier, checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.expr import Var, const
from tensorsmith.ir.te.simplify import simplify

rng = np.random.default_rng(0)


def matmul_relu(m: int, n: int, k: int) -> tuple[te.Tensor, ...]:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], r), name="C")
    d = te.compute((m, n), lambda i, j: te.maximum(c[i, j], 0.0), name="D")
    return a, b, c, d


def run(sched: te.Schedule, inputs: list[te.Tensor], outputs: list[te.Tensor],
        arrays: list[np.ndarray]) -> list[np.ndarray]:
    func = te.lower(sched, inputs, outputs)
    bufs = [*arrays] + [np.zeros(b.shape, b.dtype) for b in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(inputs):len(inputs) + len(outputs)]


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a @ b, 0)


STEPS = {
    "none": lambda s: None,
    "split_divides": lambda s: s.split("C", "C_i1", 3),
    "split_tail": lambda s: s.split("C", "C_i1", 4),
    "split_reduce": lambda s: s.split("C", "k", 2),
    "fuse": lambda s: s.fuse("C", "C_i0", "C_i1"),
    "reorder": lambda s: s.reorder("C", "k", "C_i0"),
    "tile": lambda s: s.tile("C", "C_i0", "C_i1", 2, 4),
    "annotate": lambda s: (s.parallel("C", "C_i0"), s.vectorize("C", "C_i1"), s.unroll("C", "k")),
    "inline": lambda s: s.compute_inline("C"),
    "cache_write_tail_rows": lambda s: (s.split("C", "C_i0", 2), s.cache_write("C", "C_i0.o")),
    "cache_write_split_reduce": lambda s: (s.split("C", "k", 3), s.cache_write("C", "C_i0")),
    # k = 7 in 3 lanes: the last k.o iteration masks two lanes off
    "rfactor_vector_lanes": lambda s: (s.split("C", "k", 3), s.cache_write("C", "C_i0"),
                                       s.rfactor("C", "k.i"), s.vectorize("C", "k.i")),
    "rfactor_below_a_tile": lambda s: (s.split("C", "k", 4), s.reorder("C", "C_i0", "k.o",
                                       "k.i", "C_i1"), s.cache_write("C", "C_i0"),
                                       s.rfactor("C", "k.o")),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_schedule_step_matches_numpy(step: str) -> None:
    a, b, _, d = matmul_relu(5, 6, 7)
    s = te.create_schedule(d)
    if step == "inline":
        with pytest.raises(ValueError, match="reduction"):
            STEPS[step](s)
        return
    STEPS[step](s)
    x, y = rng.standard_normal((5, 7)).astype("float32"), rng.standard_normal((7, 6)).astype(
        "float32")
    (out,) = run(s, [a, b], [d], [x, y])
    np.testing.assert_allclose(out, reference(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("combiner", ["sum", "max"])
@pytest.mark.parametrize("length,lanes", [(128, 16), (37, 8), (5, 8), (20, 3)])
def test_rfactor_row_reduction(combiner: str, length: int, lanes: int) -> None:
    """Lanes that accumulate apart, then fold in halving steps, give the row's sum/max;
    lanes past the row's end (a non-dividing split) keep the identity."""
    a = te.placeholder((6, length), name="A")
    k = te.reduce_axis(length, "k")
    reducer = te.sum if combiner == "sum" else te.max
    c = te.compute((6,), lambda i: reducer(a[i, k], k), name="C")
    s = te.create_schedule(c)
    _, lane = s.split("C", "k", lanes)
    s.cache_write("C", "C_i0")
    s.rfactor("C", lane)
    s.vectorize("C", lane)
    x = rng.standard_normal((6, length)).astype("float32")
    (out,) = run(s, [a], [c], [x])
    want = x.sum(axis=1) if combiner == "sum" else x.max(axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_rfactor_needs_a_reduce_loop_and_a_cache_write() -> None:
    a, b, _, d = matmul_relu(4, 5, 6)
    s = te.create_schedule(d)
    with pytest.raises(ValueError, match="needs a reduce loop"):
        s.rfactor("C", "C_i1")
    s.rfactor("C", "k")
    with pytest.raises(ValueError, match="rfactor needs a cache_write"):
        te.lower(s, [a, b], [d])
    s = te.create_schedule(d)
    s.reorder("C", "k", "C_i0", "C_i1")
    s.cache_write("C", "C_i0")
    s.rfactor("C", "k")
    with pytest.raises(ValueError, match="must be below the cache_write loop"):
        te.lower(s, [a, b], [d])


def test_steps_replay_from_json() -> None:
    *_, d = matmul_relu(4, 6, 3)
    s = te.create_schedule(d)
    s.tile("C", "C_i0", "C_i1", 2, 4)
    s.parallel("C", "C_i0.o")
    records = [step.to_json() for step in s.steps]
    again = te.replay([d], [te.Step.from_json(r) for r in records])
    assert [st.to_json() for st in again.steps] == records
    assert [lf.name for lf in again["C"].leaves] == [lf.name for lf in s["C"].leaves]


def test_inline_elementwise_chain() -> None:
    x = te.placeholder((3, 4), name="x")
    y = te.compute((3, 4), lambda i, j: x[i, j] * 2.0, name="y")
    z = te.compute((3, 4), lambda i, j: y[i, j] + 1.0, name="z")
    s = te.create_schedule(z)
    s.compute_inline("y")
    func = te.lower(s, [x], [z])
    assert len(func.params) == 2  # no scratch buffer for the inlined stage
    data = rng.standard_normal((3, 4)).astype("float32")
    out = np.zeros((3, 4), "float32")
    run_func(func, [data, out])
    np.testing.assert_allclose(out, data * 2 + 1, rtol=1e-6)


def test_simplifier_removes_divmod_within_bounds() -> None:
    i, j = Var("i"), Var("j")
    bounds = {id(i): (0, 3), id(j): (0, 63)}
    assert simplify((i * 64 + j) % 64, bounds) is j
    assert simplify((i * 64 + j) // 64, bounds) is i
    assert repr(simplify(j % 64, bounds)) == "j"
    assert simplify(j // 64, bounds).value == 0  # type: ignore[attr-defined]
    assert simplify(i < 4, bounds).value is True  # type: ignore[attr-defined]
    kept = simplify(j % 8, bounds)
    assert repr(kept) == "(j % 8)"


def test_constant_folding_in_builders() -> None:
    i = Var("i")
    assert (i * 1 + 0) is i
    assert (const(3) * const(4)).value == 12  # type: ignore[attr-defined]
    assert repr((i // 4) * 4 + i % 4) == "i"


@pytest.mark.parametrize("layout", [((1, 0), None), ((1, 0, 2), (1, 3)), ((0, 2, 1), (1, 2))])
def test_layout_step_reads_the_stored_tensor(layout) -> None:  # noqa: ANN001
    """B stored transposed, or in blocks of its columns: the kernel takes the stored
    array (as PrimFunc.stored_inputs makes it) and computes the same product."""
    a, b, _, d = matmul_relu(5, 6, 7)
    s = te.create_schedule(d)
    order, block = layout
    s.layout("C", "B", order, block)
    if block is not None:  # the loop split by the block: its // and % fold away
        s.split("C", "C_i1", block[1])
    func = te.lower(s, [a, b], [d])
    want_shape = tuple(np.transpose(np.zeros((7, 6) if block is None else
                                             (7, 6 // block[1], block[1])), order).shape)
    assert func.params[1].shape == want_shape
    assert func.attrs["layouts"] == {1: {"order": list(order),
                                         "block": list(block) if block else None}}
    x, y = rng.standard_normal((5, 7)).astype("float32"), rng.standard_normal((7, 6)).astype(
        "float32")
    bufs = [*func.stored_inputs([x, y])] + [np.zeros(p.shape, p.dtype) for p in func.params[2:]]
    run_func(func, bufs)
    np.testing.assert_allclose(bufs[2], reference(x, y), rtol=1e-5, atol=1e-5)


def test_layout_step_rejects_what_it_cannot_store() -> None:
    *_, d = matmul_relu(5, 6, 7)
    s = te.create_schedule(d)
    with pytest.raises(ValueError, match="not an axis order"):
        s.layout("C", "B", (0, 1, 2))
    with pytest.raises(ValueError, match="blocks of 0"):
        s.layout("C", "B", (1, 0, 2), (1, 0))
    with pytest.raises(ValueError, match="reads no input tensor named 'C'"):
        s.layout("D", "C", (1, 0))
