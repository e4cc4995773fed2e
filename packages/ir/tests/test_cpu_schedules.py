"""The default CPU schedules of convolution and pooling, run by the tensor-IR interpreter
and compared with the ops' NumPy references: every shape rule (padding by rows,
depthwise, small images, strides) must keep the result exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.schedules import schedule_cpu
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.stmt import For
from tensorsmith.ir.te.visit import walk_stmts

rng = np.random.default_rng(5)


def lowered(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> te.PrimFunc:
    opdef = get_op(op)
    inputs = [te.placeholder(s, "float32", f"in{i}") for i, s in enumerate(shapes)]
    out = opdef.infer([TensorType(s, "float32") for s in shapes], attrs)
    outputs = opdef.compute(inputs, attrs, out, "t0")  # type: ignore[misc]
    return te.lower(schedule_cpu(outputs), inputs, outputs)


def check(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> te.PrimFunc:
    func = lowered(op, shapes, attrs)
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    bufs = [*arrays] + [np.zeros(b.shape, b.dtype) for b in func.params[len(arrays):]]
    run_func(func, bufs)
    want = get_op(op).reference(arrays, attrs)[0]
    np.testing.assert_allclose(bufs[len(arrays)], want, rtol=1e-5, atol=1e-5)
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
def test_depthwise_reads_padding_in_place(stride: int) -> None:
    func = check("conv2d", [(1, 4, 9, 11), (4, 1, 3, 3)],
                 {"pads": [1, 1, 1, 1], "strides": [stride, stride], "groups": 4})
    assert not any(p.name.endswith("_pad") for p in func.params)  # no padded copy


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
