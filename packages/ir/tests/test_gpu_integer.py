"""schedules/gpu_integer.py: qmatmul and qconv2d tiled by the GPU rules (workgroup and
register tiles, operands read where they are), run by the tensor-IR interpreter against
the ops' references (exact int32 sums), with their knobs asked of ``choose``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorsmith.ir import te
from tensorsmith.ir.op_registry import TensorType, get_op
from tensorsmith.ir.ops.integer import pack_conv_weight, pack_matmul_weight
from tensorsmith.ir.schedules import schedule_gpu
from tensorsmith.ir.schedules.knobs import KnobConflict, KnobRecorder
from tensorsmith.ir.te.evaluate import run_func
from tensorsmith.ir.te.printer import print_func

rng = np.random.default_rng(11)


def _qmatmul(a: np.ndarray, w: np.ndarray) -> tuple[list[te.Tensor], list[te.Tensor]]:
    opdef = get_op("qmatmul")
    inputs = [te.placeholder(x.shape, str(x.dtype), f"in{i}") for i, x in enumerate((a, w))]
    out = opdef.infer([TensorType(x.shape, str(x.dtype)) for x in (a, w)], {})
    return inputs, opdef.compute(inputs, {}, out, "t0")  # type: ignore[misc]


def _run(a: np.ndarray, b: np.ndarray, choose: Any = None) -> tuple[np.ndarray, str]:
    w = pack_matmul_weight(b)
    inputs, outputs = _qmatmul(a, w)
    s = schedule_gpu(outputs, choose=choose) if choose else schedule_gpu(outputs)
    func = te.lower(s, inputs, outputs)
    bufs = [a, w, np.zeros(outputs[0].shape, np.int32)]
    run_func(func, bufs)
    return bufs[2], print_func(func)


@pytest.mark.parametrize("shape", [(6, 20, 36), (2, 5, 9, 12), (64, 96, 128)])
def test_tiled_qmatmul_is_exact(shape: tuple[int, ...]) -> None:
    """Shapes no tile divides (rows, columns, dots), a batch, and a larger product."""
    *batch, m, n, k = shape
    a = rng.integers(0, 256, (*batch, m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    got, _ = _run(a, b)
    assert np.array_equal(got, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))


def test_qmatmul_gets_workgroup_and_register_tiles() -> None:
    """Bound to a 2-D grid of 2-D workgroups, each invocation's register tile in int32
    accumulators (``local``), the dots read from the parameters (no shared copies)."""
    a = rng.integers(0, 256, (64, 128)).astype(np.uint8)
    b = rng.integers(-128, 128, (128, 96)).astype(np.int8)
    _, text = _run(a, b)
    loops = [line.strip().split(" in ")[0] for line in text.splitlines()
             if line.strip().startswith("for ")]
    assert loops[:4] == ["for blockIdx.y t0_i0.o", "for blockIdx.x t0_i1.o",
                         "for threadIdx.y t0_i0.i.i",
                         "for threadIdx.x t0_i1.i.i"]
    assert "alloc t0.local: int32[" in text and "shared" not in text
    assert "for unrolled k.i" in text


def test_qmatmul_knobs_are_asked_and_answered() -> None:
    a = rng.integers(0, 256, (33, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 40)).astype(np.int8)
    recorder = KnobRecorder()
    _run(a, b, recorder)
    (knobs,) = recorder.knobs.values()
    assert set(knobs) == {"ty", "tx", "ri", "rj", "kt"}

    answers = {"ty": 4, "tx": 8, "ri": 2, "rj": 4, "kt": 2}
    got, text = _run(a, b, lambda st, knob, default, choices=(): answers.get(knob, default))
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    assert "for threadIdx.y t0_i0.i.i in 0..4" in text
    with pytest.raises(KnobConflict, match="exceed a device limit"):
        _run(a, b, lambda st, knob, default, choices=(): 32 if knob in ("ty", "tx") else
             default)


def _qconv(x: np.ndarray, w: np.ndarray, attrs: dict[str, Any], choose: Any = None
           ) -> tuple[np.ndarray, str, KnobRecorder]:
    opdef = get_op("qconv2d")
    packed = pack_conv_weight(w)
    inputs = [te.placeholder(a.shape, str(a.dtype), f"in{i}") for i, a in enumerate((x, packed))]
    out = opdef.infer([TensorType(a.shape, str(a.dtype)) for a in (x, packed)], attrs)
    outputs = opdef.compute(inputs, attrs, out, "t0")  # type: ignore[misc]
    recorder = KnobRecorder()
    s = schedule_gpu(outputs, choose=choose or recorder)
    func = te.lower(s, inputs, outputs)
    bufs = [x, packed, np.zeros(outputs[0].shape, np.int32)]
    run_func(func, bufs)
    return bufs[2], print_func(func), recorder


@pytest.mark.parametrize("attrs", [{"pads": [1, 1, 1, 1], "zero_point": 9},
                                   {"pads": [1, 0, 2, 1], "strides": [2, 1], "zero_point": 200}])
def test_tiled_qconv2d_is_exact(attrs: dict[str, Any]) -> None:
    """Padded with the zero point, strided, 36 output channels (a register tile of 4
    overhangs them), against the op's reference."""
    x = rng.integers(0, 256, (1, 8, 7, 9)).astype(np.uint8)
    w = rng.integers(-128, 128, (36, 8, 3, 3)).astype(np.int8)
    got, text, recorder = _qconv(x, w, attrs)
    want = get_op("qconv2d").reference([x, pack_conv_weight(w)], attrs)[0]
    assert np.array_equal(got, want)
    loops = [line.strip().split(" in ")[0].split()[1] for line in text.splitlines()
             if line.strip().startswith("for ")]
    assert loops[:6] == ["blockIdx.z", "blockIdx.y", "blockIdx.x", "threadIdx.z",
                         "threadIdx.y", "threadIdx.x"]
    assert "shared" not in text
    (knobs,) = recorder.knobs.values()
    assert set(knobs) == {"to", "ty", "tx", "ri", "rj", "kt"}
