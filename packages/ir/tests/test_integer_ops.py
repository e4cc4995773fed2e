"""ops/integer.py: qmatmul and qconv2d (uint8 x int8 -> int32). Their NumPy references
against plain integer arithmetic, and their computes, scheduled by the CPU rules (AVX2
and AVX-512 sized) and run by the tensor-IR interpreter, against the references: exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.errors import ShapeError
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.ops.conv import block_channels
from tensorsmith.ir.ops.integer import (
    pack_conv_weight,
    pack_matmul_weight,
    unpack_conv_weight,
    unpack_matmul_weight,
)
from tensorsmith.ir.schedules import schedule_cpu
from tensorsmith.ir.target import BASELINE_CPU, CpuResources
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.stmt import For
from tensorsmith.ir.te.visit import walk_stmts

rng = np.random.default_rng(7)
AVX512 = CpuResources("avx512", vector_bits=512, vector_registers=32)


def _bytes(shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, shape).astype(np.uint8)


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


def _naive_conv(x: np.ndarray, w: np.ndarray, zero: int, stride: int, pad: int) -> np.ndarray:
    """Padding with ``zero``, then every output element's sum in int64, loop by loop."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.full((n, c, h + 2 * pad, wd + 2 * pad), zero, np.int64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for y in range(oh):
        for z in range(ow):
            patch = xp[:, :, y * stride:y * stride + kh, z * stride:z * stride + kw]
            out[:, :, y, z] = np.einsum("nchw,ochw->no", patch, w.astype(np.int64))
    return out.astype(np.int32)


def test_weight_packing_round_trips() -> None:
    b = _weights((12, 5))
    packed = pack_matmul_weight(b)
    assert packed.shape == (3, 5, 4) and packed[1, 2, 3] == b[7, 2]
    assert np.array_equal(unpack_matmul_weight(packed), b)
    w = _weights((6, 8, 3, 3))
    packed = pack_conv_weight(w)
    assert packed.shape == (6, 2, 3, 3, 4) and packed[5, 1, 2, 0, 3] == w[5, 7, 2, 0]
    assert np.array_equal(unpack_conv_weight(packed), w)


def test_qmatmul_reference_is_the_integer_product() -> None:
    a, b = _bytes((2, 3, 16)), _weights((16, 5))
    got = get_op("qmatmul").reference([a, pack_matmul_weight(b)], {})[0]
    assert got.dtype == np.int32
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize(("stride", "pad", "zero"), [(1, 1, 0), (2, 1, 131), (1, 0, 255)])
def test_qconv2d_reference_pads_with_the_zero_point(stride: int, pad: int, zero: int) -> None:
    x, w = _bytes((1, 8, 7, 6)), _weights((5, 8, 3, 3))
    attrs = {"strides": [stride] * 2, "pads": [pad] * 4, "zero_point": zero}
    got = get_op("qconv2d").reference([x, pack_conv_weight(w)], attrs)[0]
    assert np.array_equal(got, _naive_conv(x, w, zero, stride, pad))
    blocked = get_op("qconv2d").reference(
        [block_channels(x, 4), pack_conv_weight(w[:4])], {**attrs, "block": 4})[0]
    assert np.array_equal(blocked, block_channels(_naive_conv(x, w[:4], zero, stride, pad), 4))


def _run(op: str, arrays: list[np.ndarray], attrs: dict[str, Any],
         resources: CpuResources) -> tuple[np.ndarray, te.PrimFunc]:
    opdef = get_op(op)
    inputs = [te.placeholder(a.shape, str(a.dtype), f"in{i}") for i, a in enumerate(arrays)]
    out = opdef.infer([TensorType(a.shape, str(a.dtype)) for a in arrays], attrs)
    outputs = opdef.compute(inputs, attrs, out, "t0")  # type: ignore[misc]
    sched = schedule_cpu(outputs, resources=resources, constants=frozenset({"in1"}))
    func = te.lower(sched, inputs, outputs)
    bufs = [*func.stored_inputs(arrays)] + [np.zeros(b.shape, b.dtype)
                                            for b in func.params[len(arrays):]]
    run_func(func, bufs)
    return bufs[len(arrays)], func


@pytest.mark.parametrize("resources", [BASELINE_CPU, AVX512], ids=["avx2", "avx512"])
def test_qmatmul_compute_is_exact_as_a_register_tile(resources: CpuResources) -> None:
    a, b = _bytes((13, 36)), _weights((36, 40))
    got, func = _run("qmatmul", [a, pack_matmul_weight(b)], {}, resources)
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    # scheduled as a product: a vector loop over output columns inside unrolled rows
    kinds = [s.kind for s in walk_stmts(func.body) if isinstance(s, For)]
    assert "vectorized" in kinds and "unrolled" in kinds


@pytest.mark.parametrize("resources", [BASELINE_CPU, AVX512], ids=["avx2", "avx512"])
def test_a_wide_qmatmul_stores_its_weight_as_panels_of_dots(resources: CpuResources) -> None:
    a, b = _bytes((7, 24)), _weights((24, 200))
    got, func = _run("qmatmul", [a, pack_matmul_weight(b)], {}, resources)
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    # [K / 4, N, 4] as panels [N / vec, K / 4, vec, 4] (the last one zero-padded)
    layout = func.attrs["layouts"][1]
    assert layout["order"] == [1, 0, 2, 3] and layout["block"][0] == 1


@pytest.mark.parametrize("resources", [BASELINE_CPU, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize(("kernel", "stride", "pad"), [(3, 1, 1), (3, 2, 1), (1, 1, 0)])
def test_blocked_qconv2d_compute_is_exact(resources: CpuResources, kernel: int, stride: int,
                                          pad: int) -> None:
    lanes = resources.lanes(4)
    x, w = _bytes((1, 2 * lanes, 9, 9)), _weights((2 * lanes, 2 * lanes, kernel, kernel))
    attrs = {"strides": [stride] * 2, "pads": [pad] * 4, "zero_point": 77, "block": lanes}
    got, func = _run("qconv2d", [block_channels(x, lanes), pack_conv_weight(w)], attrs,
                     resources)
    want = block_channels(_naive_conv(x, w, 77, stride, pad), lanes)
    assert np.array_equal(got, want)
    # the weights are stored blocked with each block's dots last: [O/b, C/4, KH, KW, b, 4]
    assert func.attrs["layouts"][1]["order"] == [0, 2, 3, 4, 1, 5]


def test_plain_qconv2d_compute_is_exact() -> None:
    x, w = _bytes((2, 4, 6, 5)), _weights((3, 4, 3, 3))
    attrs = {"strides": [1, 2], "pads": [1, 0, 1, 2], "zero_point": 9}
    got, _ = _run("qconv2d", [x, pack_conv_weight(w)], attrs, AVX512)
    want = get_op("qconv2d").reference([x, pack_conv_weight(w)], attrs)[0]
    assert np.array_equal(got, want)


@pytest.mark.parametrize(("op", "types", "message"), [
    ("qmatmul", [((2, 8), "int8"), ((2, 3, 4), "int8")], "qmatmul takes uint8 activations, "
     "got int8"),
    ("qmatmul", [((2, 8), "uint8"), ((8, 3), "int8")], "with 4 reduction steps last"),
    ("qmatmul", [((2, 12), "uint8"), ((2, 3, 4), "int8")], "A's last dim 12 is not 4 x"),
    ("qconv2d", [((1, 8, 5, 5), "uint8"), ((4, 2, 3, 3, 4), "float32")], "qconv2d takes int8 "
     "weights, got float32"),
])
def test_bad_operands_are_named(op: str, types: list[tuple[tuple[int, ...], str]],
                                message: str) -> None:
    with pytest.raises(ShapeError, match=message.replace("[", r"\[")):
        get_op(op).infer([TensorType(s, d) for s, d in types], {})
